"""The tiny GPU build the runtime tests share: ``python -m qgpu build --base tiny`` (the GPU
circuit compiled for the Qwen3.5-2B layer shapes, merged into the tiny base, float32), built
once per session in its own process (its memory goes with it), removed at the end."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qgpu.runtime import GpuModel


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gpu")
    subprocess.run([sys.executable, "-m", "qgpu", "build", "--base", "tiny", "--out", str(out),
                    "--dtype", "float32", "--cache-dir", str(out / "cache")], check=True)
    yield out
    shutil.rmtree(out, ignore_errors=True)


@pytest.fixture(scope="session")
def gpu(build_dir) -> GpuModel:
    """The build on the sparse engine (the default); ``gpu.with_engine("stock")`` shares it."""
    return GpuModel.load(build_dir)
