"""CUDA -> PTX on every route this machine has; the routes it lacks are skipped with a reason."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from qgpu.errors import CompileError, UsageError
from qgpu.toolchain import cuda

AVAILABLE = cuda.available_compilers()

ADD_ONE = """\
extern "C" __global__ void add_one(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1;
}
"""

# Everything the clang header has to supply, including a width-4 shuffle.
WARP_SUM = """\
extern "C" __global__ void warp_sum(const int *in, int *out) {
    __shared__ int s[4];
    int t = threadIdx.x;
    s[t & 3] = in[t];
    __syncthreads();
    int v = s[t & 3];
    v += __shfl_down_sync(0xffffffffu, v, 2, 4);
    v += __shfl_down_sync(0xffffffffu, v, 1, 4);
    if ((t & 3) == 0) atomicAdd(out, v);
}
"""

# Line 3 is the error; line 2 only warns.
BROKEN = """\
extern "C" __global__ void broken(int *p) {
    int unused = 1;
    p[0] = undeclared_name;
}
"""

ERROR_LOCATION = {
    "nvrtc": "src/broken.cu(3): error",
    "nvcc": "src/broken.cu(3): error",
    "clang": "src/broken.cu:3:12: error",
}


def needs(name: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(name not in AVAILABLE, reason=f"{name} is not available here")


@needs("nvrtc")
def test_nvrtc_compiles_to_compute_75_ptx() -> None:
    result = cuda.compile_cuda(ADD_ONE, compiler="nvrtc")
    assert result.compiler == "nvrtc"
    assert re.match(r"\d+\.\d+", result.version)
    assert ".entry add_one(" in result.ptx
    assert re.search(r"^\.target sm_75$", result.ptx, re.MULTILINE)
    assert result.log == ""


@needs("nvrtc")
def test_nvrtc_warnings_are_returned_in_the_log() -> None:
    source = WARP_SUM.replace("int t =", "int unused = 0; int t =")
    result = cuda.compile_cuda(source, compiler="nvrtc")
    assert result.compiler == "nvrtc"
    assert "kernel.cu(3): warning" in result.log
    assert "shfl.sync.down.b32" in result.ptx


@needs("nvrtc")
def test_nvrtc_is_safe_to_call_from_threads() -> None:
    sources = [ADD_ONE.replace("+= 1", f"+= {k}") for k in range(2, 10)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda s: cuda.compile_cuda(s, compiler="nvrtc"), sources))
    assert results == [cuda.compile_cuda(s, compiler="nvrtc") for s in sources]
    assert all(f", {k};" in r.ptx for k, r in zip(range(2, 10), results, strict=True))


@needs("nvcc")
def test_nvcc_compiles_to_sm_75_ptx() -> None:
    result = cuda.compile_cuda(ADD_ONE, compiler="nvcc")
    assert result.compiler == "nvcc"
    assert ".entry add_one(" in result.ptx
    assert re.search(r"^\.target sm_75$", result.ptx, re.MULTILINE)


@needs("clang")
def test_clang_with_the_shipped_header_compiles_warp_code() -> None:
    result = cuda.compile_cuda(WARP_SUM, compiler="clang")
    assert result.compiler == "clang"
    assert ".entry warp_sum(" in result.ptx
    assert "bar.sync" in result.ptx
    assert re.search(r"atom(\.global)?\.add\.u32", result.ptx)
    # width 4 -> c = ((32 - 4) << 8) | 0x1f = 7199 (0x1C1F), the value nvcc/NVRTC use too.
    assert re.search(r"shfl\.sync\.down\.b32\s+%r\d+, %r\d+, 2, 7199, -1;", result.ptx)


@pytest.mark.parametrize("name", cuda.COMPILERS)
def test_compile_errors_carry_the_compilers_log_and_line(name: str) -> None:
    if name not in AVAILABLE:
        pytest.skip(f"{name} is not available here")
    with pytest.raises(CompileError) as info:
        cuda.compile_cuda(BROKEN, filename="src/broken.cu", compiler=name)
    assert info.value.kind == "compile"
    assert ERROR_LOCATION[name] in info.value.message
    assert "undeclared_name" in info.value.message


@pytest.fixture
def no_compilers(monkeypatch: pytest.MonkeyPatch) -> None:
    for finder in ("_nvrtc", "_nvcc", "_clang"):
        monkeypatch.setattr(cuda, finder, lambda: None)


@pytest.mark.usefixtures("no_compilers")
@pytest.mark.parametrize(
    ("platform", "advice"),
    [("linux", "pip install nvidia-cuda-nvrtc==13.5.37"), ("win32", "pip install"),
     ("darwin", "brew install llvm")],
)  # fmt: skip
def test_without_any_compiler_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, platform: str, advice: str
) -> None:
    monkeypatch.setattr(cuda.sys, "platform", platform)
    assert cuda.available_compilers() == []
    with pytest.raises(CompileError, match="no CUDA compiler found") as info:
        cuda.compile_cuda(ADD_ONE)
    assert advice in info.value.message


@pytest.mark.usefixtures("no_compilers")
@pytest.mark.parametrize("name", cuda.COMPILERS)
def test_an_explicit_missing_compiler_is_named(name: str) -> None:
    with pytest.raises(CompileError, match=f"compiler '{name}' is not available"):
        cuda.compile_cuda(ADD_ONE, compiler=name)


def test_an_unknown_compiler_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown compiler 'gcc'"):
        cuda.compile_cuda(ADD_ONE, compiler="gcc")


def test_a_bad_qgpu_nvrtc_makes_nvrtc_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QGPU_NVRTC", "/nonexistent/libnvrtc.so")
    assert cuda._nvrtc() is None
    with pytest.raises(CompileError, match="QGPU_NVRTC='/nonexistent/libnvrtc.so'"):
        cuda.compile_cuda(ADD_ONE, compiler="nvrtc")


@needs("nvrtc")
def test_committed_suite_ptx_matches_the_pinned_nvrtc() -> None:
    build_ptx = pytest.importorskip("qgpu.suite.build_ptx")
    if not any(build_ptx.PTX_DIR.glob("*.ptx")):
        pytest.skip("kernels/ptx/ is empty")
    version = cuda.compile_cuda(ADD_ONE, compiler="nvrtc").version
    if version != build_ptx.PINNED_NVRTC:
        pytest.skip(f"NVRTC {version} here; the suite PTX is pinned to {build_ptx.PINNED_NVRTC}")
    assert build_ptx.differences(build_ptx.expected_ptx()) == [], \
        "run python -m qgpu.suite.build_ptx"


INCLUDES_KEPT = [
    "#include <cuda_runtime.h>\n#include <cooperative_groups.h>\n  #  include <cuda/std/cstdint>",
    'const char *s = "#include \\"/etc/passwd\\"";',  # in a string: no directive
    '// #include "/etc/passwd"\n/* #include "x"\n#include "y" */ int b;',  # in comments
    "#include <x.h> // a trailing comment",
    'int a; /* c */ #include "x"',  # not first on its line: no directive (the compiler errs)
]
INCLUDES_REJECTED = [
    ('#include "/etc/hostname"', 1), ("#include </etc/passwd>", 1),
    ("#include <../../etc/passwd>", 1), ("#include <a/../../b.h>", 1),
    ('#define F "/etc/passwd"\n#include F', 2),  # computed
    ('#/**/include "x.h"', 1), ('%:include "x.h"', 1),  # a comment inside, a digraph
    ("#include_next <x.h>", 1), ('#embed "/etc/passwd"', 1),
    ('int x;\n#in\\\nclude "/etc/passwd"', 2), ('#include\\\n "/etc/passwd"', 1),  # spliced
    ('/* c */ #include "x"', 1), ('  #include "kernel.cuh"', 1),
]


@pytest.mark.parametrize("source", INCLUDES_KEPT)
def test_the_cuda_headers_may_be_included(source: str) -> None:
    cuda.check_includes(source, "k.cu")


@pytest.mark.parametrize(("source", "line"), INCLUDES_REJECTED)
def test_no_other_file_can_be_included(source: str, line: int) -> None:
    """A server compiles users' sources (the app): an include of one of its files would show
    that file's lines in the compiler's errors, so only headers in angle brackets by a relative
    path are let through, read as the preprocessor reads directives."""
    with pytest.raises(CompileError, match=rf"^k\.cu:{line}:\d+: #\w+ .*only the CUDA headers"):
        cuda.check_includes(source, "k.cu")


def test_compiling_an_include_of_a_server_file_says_why_without_its_lines() -> None:
    with pytest.raises(CompileError) as err:
        cuda.compile_cuda('#include "/etc/hostname"\n__global__ void k() {}', filename="k.cu")
    assert "only the CUDA headers" in err.value.message
    assert "could not compile" not in err.value.message  # refused before any compiler ran
