"""Entry point of ``python -m qgpu``."""

import signal
import sys

from qgpu.cli import main


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM (``timeout``, a service stopping) ends the command like Ctrl-C does: the
    compiler it may be running is killed on the way out, not left running on its own."""
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _terminate)
sys.exit(main())
