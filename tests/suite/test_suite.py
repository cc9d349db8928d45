"""Every suite kernel agrees three ways — intent model, PTX interpreter, machine interpreter."""

import pytest

from qgpu.driver import load_ptx
from qgpu.errors import QgpuError
from qgpu.suite.runner import SUITE, check_kernel, source_path
from qgpu.toolchain.cuda import available_compilers, compile_cuda

SEEDS = (0, 1, 2)


@pytest.mark.parametrize("kernel", SUITE, ids=lambda k: k.name)
def test_suite_kernel_is_exact_three_ways(kernel) -> None:
    for seed in SEEDS:
        check = check_kernel(kernel, seed)
        assert check.ptx is None, f"seed {seed}: PTX interpreter vs intent: {check.ptx}"
        assert check.machine is None, f"seed {seed}: machine vs intent: {check.machine}"
        # race-free by design: barriers between warps, atomics for shared counters
        assert not check.races, f"seed {seed}: {check.races[0]}"


@pytest.mark.parametrize("compiler", ["nvcc", "clang"])
def test_suite_is_exact_with_other_compilers(compiler: str) -> None:
    """The lowering accepts the other toolchains' PTX dialects too (seed 0 of every kernel)."""
    if compiler not in available_compilers():
        pytest.skip(f"{compiler} is not installed here")
    failures = []
    for kernel in SUITE:
        path = source_path(kernel)
        ptx = compile_cuda(path.read_text(), filename=path.name, compiler=compiler).ptx
        try:
            check = check_kernel(kernel, 0, load_ptx(ptx, compiler))
        except QgpuError as e:
            failures.append(f"{kernel.name}: {e.kind}: {e.message}")
            continue
        if not check.exact:
            failures.append(f"{kernel.name}: ptx: {check.ptx}; machine: {check.machine}")
    assert not failures, "\n".join(failures)
