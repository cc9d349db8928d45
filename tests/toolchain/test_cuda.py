"""CUDA -> PTX on every route this machine has; the routes it lacks are skipped with a reason."""

from __future__ import annotations

import math
import re
import struct
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


# --- what a paste carries: the C library's headers, `extern "C"__global__`, host code --------

# Each header with a kernel body that uses what it declares on the device, and a name the PTX
# must then hold (printf is NVVM's vprintf, assert calls __assertfail).
HEADER_USES = {
    "stdio.h": ('printf("%d\\n", p[0]);', "vprintf"),
    "cstdio": ('std::printf("%d\\n", p[0]);', "vprintf"),
    "math.h": ("f[0] = sqrtf(f[1]) + fabsf(f[2]) + fminf(f[3], f[4]) + fmaxf(f[1], f[2]) + "
               "expf(f[5]) + floorf(f[6]) + powf(f[1], 2.0f);\n"
               "    f[1] = INFINITY; f[2] = -HUGE_VALF; f[3] = NAN; f[4] = (float)M_PI;", None),
    "cmath": ("f[0] = std::sqrt(f[1]) + std::fabs(f[2]) + std::fmin(f[3], f[4]) + std::exp(f[5]) "
              "+ std::floor(f[6]);\n    p[0] = std::isnan(f[7]) + std::isinf(f[8]);", None),
    "assert.h": ("assert(p[0] > 0);", "__assertfail"),
    "cassert": ("assert(p[0] > 0);", "__assertfail"),
    "stdint.h": ("int32_t a = p[0]; uint8_t b = (uint8_t)a; int64_t c = INT64_MAX; size_t n = 4;\n"
                 "    p[1] = a + b + (int)(c >> 40) + (int)n + (int)UINT16_MAX;", None),
    "cstdint": ("std::int32_t a = p[0]; std::uint8_t b = (std::uint8_t)a; "
                "std::uint64_t c = UINT64_MAX;\n    p[1] = a + b + (int)(c >> 40) + "
                "(int)sizeof(std::size_t);", None),
    "float.h": ("f[0] = FLT_MAX; f[1] = FLT_MIN; f[2] = FLT_EPSILON; p[0] = FLT_DIG;", None),
    "cfloat": ("f[0] = FLT_MAX - FLT_EPSILON; p[0] = FLT_MANT_DIG;", None),
    "limits.h": ("p[0] = INT_MAX; p[1] = INT_MIN; p[2] = (int)UINT_MAX; p[3] = CHAR_BIT;\n"
                 "    p[4] = (int)(LLONG_MAX >> 32);", None),
    "climits": ("p[0] = SHRT_MAX + SCHAR_MIN + (int)(ULLONG_MAX >> 40);", None),
    "stdlib.h": ("int *q = (int *)malloc(4 * sizeof(int)); q[0] = abs(p[0]) + (int)labs(-3L);\n"
                 "    *(int **)(p + 2) = q; free(*(int **)(p + 4)); p[6] = EXIT_FAILURE;",
                 "malloc"),
    "cstdlib": ("p[0] = std::abs(p[1]) + (int)std::llabs(-2LL);", None),
    "string.h": ("memset(p, 0, 2 * sizeof(int)); memcpy(p + 2, p + 4, 2 * sizeof(int));", None),
    "cstring": ("std::memset(p, 0, 8); std::memcpy(p + 2, p + 4, 8);", None),
    "stddef.h": ("struct S { int a; char b; int c; };\n    p[0] = (int)offsetof(S, c); "
                 "size_t n = 1; ptrdiff_t d = 2; p[1] = (int)(n + d);", None),
    "cstddef": ("std::size_t n = 1; std::ptrdiff_t d = 2; p[1] = (int)(n + d);", None),
    "iostream": ("p[0] = 1;", None),  # host-only: nothing for a kernel, and it must not fail
}


def header_source(header: str) -> str:
    body, _ = HEADER_USES[header]
    return (f"#include <{header}>\n"
            f'extern "C" __global__ void k(int *p, float *f) {{\n    {body}\n}}\n')


@pytest.mark.parametrize("name", cuda.COMPILERS)
@pytest.mark.parametrize("header", HEADER_USES)
def test_a_pasted_sources_c_library_headers_compile(name: str, header: str) -> None:
    """NVRTC has no C library headers and clang has none for the device: qgpu's own
    (qgpu/toolchain/include) stand in for them; nvcc uses its host compiler's."""
    if name not in AVAILABLE:
        pytest.skip(f"{name} is not available here")
    result = cuda.compile_cuda(header_source(header), compiler=name, untrusted=True)
    assert ".entry k(" in result.ptx
    _, symbol = HEADER_USES[header]
    if symbol is not None:
        assert re.search(rf"\b{symbol}\b", result.ptx), f"{header}: no {symbol} in the PTX"


@pytest.mark.parametrize("name", cuda.COMPILERS)
def test_every_header_at_once_with_the_cuda_runtime(name: str) -> None:
    if name not in AVAILABLE:
        pytest.skip(f"{name} is not available here")
    includes = "".join(f"#include <{h}>\n" for h in ["cuda_runtime.h", *HEADER_USES])
    bodies = "".join(f"__device__ void use_{i}(int *p, float *f) {{ {HEADER_USES[h][0]} }}\n"
                     for i, h in enumerate(HEADER_USES))
    source = includes + bodies + 'extern "C" __global__ void k(int *p, float *f) { use_0(p, f); }\n'
    assert ".entry k(" in cuda.compile_cuda(source, compiler=name).ptx


def _f32(x: float) -> int:
    return struct.unpack("<i", struct.pack("<f", x))[0]


# (C expression, its true value as an int): stored by a kernel into an int array. The float
# macros are compared by their bits (__float_as_int), so no float instruction reaches the PTX.
MACRO_VALUES = [
    ("INT_MAX", 2**31 - 1), ("INT_MIN", -(2**31)), ("(int)UINT_MAX", -1), ("CHAR_BIT", 8),
    ("SCHAR_MIN", -128), ("SCHAR_MAX", 127), ("UCHAR_MAX", 255), ("SHRT_MIN", -32768),
    ("SHRT_MAX", 32767), ("USHRT_MAX", 65535), ("(int)(LLONG_MAX >> 32)", 2**31 - 1),
    ("(int)(LLONG_MIN >> 32)", -(2**31)), ("(int)(ULLONG_MAX >> 33)", 2**31 - 1),
    ("(int)FLT_MAX_EXP", 128), ("FLT_MIN_EXP", -125), ("FLT_MAX_10_EXP", 38),
    ("FLT_MIN_10_EXP", -37), ("FLT_DIG", 6), ("FLT_MANT_DIG", 24), ("FLT_RADIX", 2),
    ("FLT_DECIMAL_DIG", 9), ("DBL_MANT_DIG", 53), ("DBL_DIG", 15), ("DBL_MAX_EXP", 1024),
    ("__float_as_int(INFINITY)", 0x7F80_0000), ("__float_as_int(-INFINITY)", _f32(-math.inf)),
    ("__float_as_int(HUGE_VALF)", 0x7F80_0000), ("__float_as_int(NAN)", 0x7FC0_0000),
    ("__float_as_int(FLT_MAX)", 0x7F7F_FFFF), ("__float_as_int(FLT_MIN)", 0x0080_0000),
    ("__float_as_int(FLT_EPSILON)", 0x3400_0000), ("__float_as_int(FLT_TRUE_MIN)", 1),
    ("__float_as_int((float)M_PI)", _f32(math.pi)), ("__float_as_int((float)M_E)", _f32(math.e)),
    ("__float_as_int((float)M_SQRT2)", _f32(math.sqrt(2))),
    ("__float_as_int((float)M_LN2)", _f32(math.log(2))),
    ("__float_as_int((float)M_PI_2)", _f32(math.pi / 2)),
    ("(int)sizeof(int8_t)", 1), ("(int)sizeof(int16_t)", 2), ("(int)sizeof(int32_t)", 4),
    ("(int)sizeof(int64_t)", 8), ("(int)sizeof(uint8_t)", 1), ("(int)sizeof(size_t)", 8),
    ("INT8_MIN", -128), ("INT16_MAX", 32767), ("INT32_MIN", -(2**31)), ("UINT8_MAX", 255),
    ("UINT16_MAX", 65535), ("(int)UINT32_MAX", -1), ("(int)(INT64_MAX >> 32)", 2**31 - 1),
    ("(int)(SIZE_MAX >> 33)", 2**31 - 1), ("(int)INT64_C(7)", 7),
    ("EXIT_SUCCESS", 0), ("EXIT_FAILURE", 1),
]  # fmt: skip


@pytest.mark.parametrize("name", cuda.COMPILERS)
def test_the_header_macros_have_their_true_values(name: str) -> None:
    """INT_MAX, FLT_EPSILON, INFINITY... as a kernel sees them, run on the PTX interpreter:
    the same on every route, and the values C and IEEE-754 define."""
    if name not in AVAILABLE:
        pytest.skip(f"{name} is not available here")
    from qgpu.driver import compile_source

    stores = "".join(f"    out[{i}] = {expr};\n" for i, (expr, _) in enumerate(MACRO_VALUES))
    source = ("#include <limits.h>\n#include <float.h>\n#include <math.h>\n#include <stdint.h>\n"
              "#include <stdlib.h>\n"
              f'extern "C" __global__ void values(int *out) {{\n{stores}}}\n')
    kernel = compile_source(source, compiler=name).kernel()
    result = kernel.launch(grid=(1,), block=(1,), args=[{"zeros": len(MACRO_VALUES)}],
                           backend="ptx")
    got = dict(zip([e for e, _ in MACRO_VALUES], result.args[0], strict=True))
    assert got == dict(MACRO_VALUES)


@pytest.mark.parametrize("name", cuda.COMPILERS)
def test_a_source_without_includes_sees_what_nvcc_shows_it(name: str) -> None:
    """nvcc includes cuda_runtime.h (and with it <math.h>, <limits.h>) before every source: a
    kernel written for it uses INFINITY or INT_MAX without an include. Every route does."""
    if name not in AVAILABLE:
        pytest.skip(f"{name} is not available here")
    from qgpu.driver import compile_source

    exprs = ["__float_as_int(INFINITY)", "__float_as_int(-INFINITY)", "__float_as_int(NAN)",
             "__float_as_int((float)M_PI)", "INT_MAX", "INT_MIN"]
    stores = "".join(f"    out[{i}] = {e};\n" for i, e in enumerate(exprs))
    source = f"__global__ void values(int *out) {{\n{stores}}}\n"
    kernel = compile_source(source, compiler=name).kernel()
    result = kernel.launch(grid=(1,), block=(1,), args=[{"zeros": len(exprs)}], backend="ptx")
    assert result.args[0] == [0x7F80_0000, _f32(-math.inf), 0x7FC0_0000, _f32(math.pi),
                              2**31 - 1, -(2**31)]


@pytest.mark.parametrize("name", cuda.COMPILERS)
def test_ndebug_turns_assert_off(name: str) -> None:
    if name not in AVAILABLE:
        pytest.skip(f"{name} is not available here")
    source = ('#define NDEBUG\n#include <assert.h>\n'
              'extern "C" __global__ void k(int *p) { assert(p[0] > 0); p[1] = 1; }\n')
    assert "__assertfail" not in cuda.compile_cuda(source, compiler=name).ptx


@pytest.mark.parametrize("name", cuda.COMPILERS)
def test_extern_c_glued_to_global_compiles(name: str) -> None:
    """`extern "C"__global__` (no space; nvcc warns, NVRTC and clang reject a string with a
    user-defined suffix): compile_cuda puts the space in."""
    if name not in AVAILABLE:
        pytest.skip(f"{name} is not available here")
    source = ('extern "C"__device__ int twice(int x) { return 2 * x; }\n'
              'extern "C"__global__ void k(int *p) { p[0] = twice(p[1]); }\n')
    result = cuda.compile_cuda(source, compiler=name)
    assert ".entry k(" in result.ptx  # unmangled: the linkage took
    assert "literal" not in result.log  # nvcc's warning about the suffix is gone too


@pytest.mark.parametrize(("source", "expected"), [
    ('extern "C"__global__ void k();', 'extern "C" __global__ void k();'),
    ('extern"C"__device__ int f();', 'extern"C" __device__ int f();'),
    ('extern "C++"_f();', 'extern "C++" _f();'),
    ('extern\n"C"__global__', 'extern\n"C" __global__'),
    ('extern "C" __global__', 'extern "C" __global__'),  # already spaced
    ('extern "C"{ int a; }', 'extern "C"{ int a; }'),
    ('// extern "C"__global__\n', '// extern "C"__global__\n'),  # a comment
    ('/* extern "C"__global__ */', '/* extern "C"__global__ */'),
    ('const char *s = "extern \\"C\\"__global__";', 'const char *s = "extern \\"C\\"__global__";'),
    ('const char *r = R"(extern "C"__x)";', 'const char *r = R"(extern "C"__x)";'),  # raw
    ('noextern "C"__global__', 'noextern "C"__global__'),  # not the keyword
    ('f("C"__x)', 'f("C"__x)'),  # a literal with a suffix, not after extern
])  # fmt: skip
def test_the_linkage_fix_up_touches_code_only(source: str, expected: str) -> None:
    assert cuda.space_linkage(source) == expected


@pytest.mark.parametrize("name", cuda.COMPILERS)
def test_a_missing_header_is_named_with_what_exists(name: str) -> None:
    if name not in AVAILABLE:
        pytest.skip(f"{name} is not available here")
    with pytest.raises(CompileError) as info:
        cuda.compile_cuda('#include <cublas_v2.h>\n' + ADD_ONE, compiler=name)
    message = info.value.message
    assert "cublas_v2.h" in message.splitlines()[1]  # the compiler's own line names it
    assert f"(qgpu: cublas_v2.h: not a header {name} has here" in message
    assert "docs/ISA.md section 8" in message


@needs("nvrtc")
def test_thrust_on_nvrtc_says_it_is_host_code() -> None:
    """The cccl wheel has thrust, whose containers NVRTC refuses in a flood of errors."""
    with pytest.raises(CompileError) as info:
        cuda.compile_cuda('#include <thrust/device_vector.h>\n' + ADD_ONE, compiler="nvrtc")
    assert info.value.message.endswith("use plain arrays in the kernel)")
    assert "thrust" in info.value.message.splitlines()[-1]


HOST_PASTE = """\
#include <cuda_runtime.h>
#include <iostream>
#include <stdio.h>
__global__ void add(int *p, int n) { int i = threadIdx.x; if (i < n) p[i] += 1; }
int main() {
    int h[16] = {0}, *d;
    cudaMalloc(&d, sizeof h);
    cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
    add<<<1, 16>>>(d, 16);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    std::cout << h[0] << std::endl;
    printf("%d\\n", h[1]);
    return 0;
}
"""


@pytest.mark.parametrize("name", cuda.COMPILERS)
def test_host_code_in_a_paste(name: str) -> None:
    """nvcc compiles a whole .cu to PTX, host code and all (the host side is left out); NVRTC
    refuses any host function and clang here has no CUDA runtime API: their errors end with
    what to remove. The headers are never the problem."""
    if name not in AVAILABLE:
        pytest.skip(f"{name} is not available here")
    if name == "nvcc":
        assert ".entry _Z3addPii(" in cuda.compile_cuda(HOST_PASTE, compiler=name).ptx
        return
    with pytest.raises(CompileError) as info:
        cuda.compile_cuda(HOST_PASTE, compiler=name)
    message = info.value.message
    assert "cannot open" not in message and "not found" not in message
    assert message.splitlines()[-1].startswith("(qgpu: host code: qgpu compiles a source's "
                                               "device code only")


def test_diagnostics_in_qgpus_headers_are_shown_as_qgpu() -> None:
    log = f"{cuda.QGPU_INCLUDE}/math.h(3): error: x\n/etc/x.h(1): error: y"
    assert cuda.withhold_paths(log, "kernel.cu").splitlines() == [
        "<qgpu>/math.h(3): error: x",
        "(a diagnostic located in a file other than the source and the CUDA headers was "
        "withheld)"]


def test_qgpus_headers_are_written_for_qgpu() -> None:
    """Each header says what it is (and is shipped: pyproject's package data)."""
    headers = sorted(p.name for p in cuda.QGPU_INCLUDE.iterdir())
    assert set(HEADER_USES) <= set(headers)
    for name in headers:
        assert "written for qgpu" in (cuda.QGPU_INCLUDE / name).read_text()[:400], name
