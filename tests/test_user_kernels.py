"""Textbook CUDA kernels as a new user would paste them: exact, or rejected with a clear error.

Never a wrong answer: a case with a reference result fails if the launch raises, and a case that
expects an error fails if the launch returns. Cases live in tests/user_kernels/cases.py.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import re
import sys
from pathlib import Path

import pytest

from qgpu.driver import CompiledModule, LaunchResult, compile_source
from qgpu.errors import QgpuError
from qgpu.toolchain import cuda

if not cuda.available_compilers():
    pytest.skip("no CUDA compiler (NVRTC, nvcc or clang) on this machine",
                allow_module_level=True)


def _load_cases() -> list:
    path = Path(__file__).resolve().parent / "user_kernels" / "cases.py"
    spec = importlib.util.spec_from_file_location("user_kernel_cases", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while building
    spec.loader.exec_module(module)
    return module.CASES


def _ptx_backend_ready() -> bool:
    """The PTX interpreter backend exists (it is written in parallel with these tests)."""
    try:
        from qgpu.toolchain.ptx import interp
    except ImportError:
        return False
    return hasattr(interp, "run_kernel")


CASES = _load_cases()
BACKENDS = ["interp"] + (["ptx"] if _ptx_backend_ready() else [])


@functools.cache
def _compile(file: str, source: str) -> CompiledModule | QgpuError:
    try:
        return compile_source(source, filename=file)
    except QgpuError as err:
        return err


@functools.cache
def _ptx_lines(file: str, source: str) -> list[str]:
    return cuda.compile_cuda(source, filename=file).ptx.splitlines()


def _launch(case, backend: str) -> LaunchResult:
    module = _compile(case.file, case.source)
    if isinstance(module, QgpuError):
        raise module
    step_limit = case.ptx_step_limit if backend == "ptx" else None
    return module.kernel(case.kernel).launch(
        grid=case.grid, block=case.block, args=copy.deepcopy(case.args),
        dynamic_shared=case.dynamic_shared, backend=backend, step_limit=step_limit,
    )


def _check_names_ptx_line(case, message: str) -> None:
    """An unsupported-PTX message names a line, and that PTX line holds what it quotes."""
    found = re.search(r"\bline (\d+)\b", message)
    assert found, f"no PTX line number in: {message}"
    lines = _ptx_lines(case.file, case.source)
    n = int(found.group(1))
    assert 1 <= n <= len(lines), f"line {n} is outside the {len(lines)}-line PTX"
    quoted = " ".join(re.findall(r"`([^`]*)`", message) + re.findall(r"\(([^)]*)\)", message))
    tokens = [t for t in re.findall(r"[\w.%]+", quoted) if len(t) >= 4]
    assert any(t in lines[n - 1] for t in tokens), \
        f"PTX line {n} {lines[n - 1]!r} holds none of {tokens} from: {message}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_user_kernel(case, backend: str) -> None:
    exact = case.error is None or (backend == "ptx" and case.ptx == "exact")
    if exact:
        assert case.reference is not None, f"{case.id}: an exact case needs a reference"
        result = _launch(case, backend)  # any error here is a failure
        assert result.args == case.reference(copy.deepcopy(case.args))
        return
    with pytest.raises(QgpuError) as info:
        result = _launch(case, backend)
        pytest.fail(f"{case.id} should fail with a {case.error} error but returned {result.args}")
    err = info.value
    substring = case.ptx_substring if backend == "ptx" and case.ptx_substring else case.substring
    assert err.kind == case.error, f"{err.kind} error instead of {case.error}: {err.message}"
    assert substring in err.message
    if case.error == "unsupported":
        _check_names_ptx_line(case, err.message)
