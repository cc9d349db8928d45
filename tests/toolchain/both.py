"""Run CUDA on both interpreters (the PTX interpreter and the machine) and require one answer."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from qgpu.driver import CompiledModule, LaunchResult, compile_source
from qgpu.errors import QgpuError
from qgpu.toolchain.cuda import available_compilers

needs_compiler = pytest.mark.skipif(not available_compilers(), reason="no CUDA compiler")


@functools.cache
def module(src: str) -> CompiledModule:
    return compile_source(src)


def run_both(src: str, kernel: str | None, args: list, *, grid: tuple = (1,),
             block: tuple = (4,), **kw: Any) -> LaunchResult:
    """The machine's result, after checking that the PTX interpreter gives the same."""
    k = module(src).kernel(kernel)
    ptx = k.launch(grid=grid, block=block, args=args, backend="ptx", **kw)
    machine = k.launch(grid=grid, block=block, args=args, backend="interp", **kw)
    assert bits(machine.args) == bits(ptx.args) and machine.symbols == ptx.symbols
    return machine


def bits(value: Any) -> Any:
    """Results with each float as its word: equal means bit for bit (NaN, -0 included)."""
    if isinstance(value, list):
        return [bits(v) for v in value]
    return ("f32", value.bits) if hasattr(value, "bits") else value


def error_both(src: str, kernel: str | None, args: list, *, grid: tuple = (1,),
               block: tuple = (4,), **kw: Any) -> list[QgpuError]:
    """The errors of both interpreters (each must raise one)."""
    out = []
    for backend in ("ptx", "interp"):
        with pytest.raises(QgpuError) as err:
            module(src).kernel(kernel).launch(grid=grid, block=block, args=args,
                                              backend=backend, **kw)
        out.append(err.value)
    return out
