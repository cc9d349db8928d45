"""Fixtures shared across test modules, and the ``slow`` mark for every test of the built model."""

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty qgpu cache directory (tokenizer ranks, build stages) per test module: a module's
    first build or tokenizer load is cold, its later ones may hit what that one stored."""
    return tmp_path_factory.mktemp("cache")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the built GPU model (``build_dir``, minutes to build) is slow, wherever
    it lives."""
    for item in items:
        if "build_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny GPU build the runtime and app tests share: ``python -m qgpu build --base tiny``
    (the GPU circuit compiled for the Qwen3.5-2B layer shapes, merged into the tiny base,
    float32), built once per session in its own process (its memory goes with it), removed at
    the end."""
    import shutil
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("gpu")
    subprocess.run([sys.executable, "-m", "qgpu", "build", "--base", "tiny", "--out", str(out),
                    "--dtype", "float32", "--cache-dir", str(out / "cache")], check=True)
    yield out
    shutil.rmtree(out, ignore_errors=True)


@pytest.fixture(scope="session")
def gpu(build_dir: Path):
    """The build on the sparse engine (the default); ``gpu.with_engine("stock")`` shares it."""
    from qgpu.runtime import GpuModel

    return GpuModel.load(build_dir)
