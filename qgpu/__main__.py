"""Entry point of ``python -m qgpu``."""

import sys

from qgpu.toolchain.cuda import start_nvrtc

if sys.argv[1:2] in (["run"], ["ptx"], ["asm"]):
    start_nvrtc()  # compiling comes next: start NVRTC's worker while qgpu.cli imports

from qgpu.cli import main  # noqa: E402

sys.exit(main())
