"""Fixtures shared across test modules, and the ``slow`` mark for every test of the built model."""

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty qgpu cache directory (tokenizer ranks, build stages) per test module: a module's
    first build or tokenizer load is cold, its later ones may hit what that one stored."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session", autouse=True)
def bfloat16_convolutions_in_float32():
    """On a CPU without AVX-512, PyTorch has no bfloat16 kernel for the depthwise conv1d of
    Qwen3.5's DeltaNet layers and falls back to one small convolution per channel: ~3.5 s per
    decode step of the tiny base's widened model, 25x the float32 step (CI's machines have only
    AVX2). There the tests compute a bfloat16 conv1d in float32 and round the result to
    bfloat16 once — what PyTorch's bfloat16 kernels compute (float32 sums of exact products,
    rounded at the end; the sparse engine rounds so too). Elsewhere nothing changes."""
    import torch
    import torch.nn.functional as F

    if torch.backends.cpu.get_cpu_capability().startswith("AVX512"):
        yield
        return
    stock = F.conv1d

    def conv1d(x, weight, bias=None, *args, **kw):
        if x.dtype == weight.dtype == torch.bfloat16 and x.device.type == "cpu":
            bias = None if bias is None else bias.float()
            return stock(x.float(), weight.float(), bias, *args, **kw).to(torch.bfloat16)
        return stock(x, weight, bias, *args, **kw)

    F.conv1d = conv1d
    try:
        yield
    finally:
        F.conv1d = stock


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
