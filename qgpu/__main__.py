"""Entry point of ``python -m qgpu``."""

import sys

from qgpu.cli import main

sys.exit(main())
