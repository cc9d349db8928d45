"""Lowering: resource limits and unsupported PTX give errors that name the cause and place."""

import pytest

from qgpu.driver import compile_source
from qgpu.errors import QgpuError
from qgpu.machine import limits
from qgpu.toolchain.cuda import available_compilers

pytestmark = pytest.mark.skipif(not available_compilers(), reason="no CUDA compiler")


def launch(src: str, args: list, block=(4, 1), grid=(1, 1), backend="interp", **kw):
    return compile_source(src).kernel().launch(grid=grid, block=block, args=args,
                                               backend=backend, **kw)


def error_of(src: str, args: list, **kw) -> QgpuError:
    with pytest.raises(QgpuError) as err:
        launch(src, args, **kw)
    return err.value


# Sixteen accumulators stay live across an unrolled loop: more than 15 registers.
PRESSURE = """
extern "C" __global__ void pressure(const int* a, int* out, int n) {
    int s0=0,s1=0,s2=0,s3=0,s4=0,s5=0,s6=0,s7=0,s8=0,s9=0,s10=0,s11=0,s12=0,s13=0,s14=0,s15=0;
    #pragma unroll 1
    for (int i = 0; i < n; i++) {
        int v = a[i];
        s0 += v; s1 ^= v; s2 += v * 3; s3 -= v; s4 |= v; s5 += v << 1; s6 += v & 5;
        s7 += v * v; s8 += v + i; s9 ^= v * 7; s10 += v ^ i; s11 += v * i; s12 -= v * 2;
        s13 += v | i; s14 += v * 11; s15 ^= v + 3;
    }
    out[0]=s0; out[1]=s1; out[2]=s2; out[3]=s3; out[4]=s4; out[5]=s5; out[6]=s6; out[7]=s7;
    out[8]=s8; out[9]=s9; out[10]=s10; out[11]=s11; out[12]=s12; out[13]=s13; out[14]=s14;
    out[15]=s15;
}
"""


def pressure_model(a: list[int]) -> list[int]:
    s = [0] * 16
    for i, v in enumerate(a):
        s[0] += v; s[1] ^= v; s[2] += v * 3; s[3] -= v; s[4] |= v; s[5] += v << 1  # noqa: E702
        s[6] += v & 5; s[7] += v * v; s[8] += v + i; s[9] ^= v * 7; s[10] += v ^ i  # noqa: E702
        s[11] += v * i; s[12] -= v * 2; s[13] += v | i; s[14] += v * 11  # noqa: E702
        s[15] ^= v + 3
    return s


def test_spilling_keeps_results_exact() -> None:
    a = [3, -1, 7, 2, 9, -4]
    module = compile_source(PRESSURE)
    prog = module.kernel().program
    assert prog.local_words > 0  # it really spilled
    for backend in ("interp", "ptx"):
        res = module.kernel().launch(grid=(1, 1), block=(1, 1), args=[a, {"zeros": 16}, len(a)],
                                     backend=backend)
        assert res.args[1] == pressure_model(a)


def test_too_many_live_values_is_a_resource_error() -> None:
    n = limits.NUM_REGS + limits.LOCAL_WORDS + 4
    decl = "".join(f"int s{i} = a[{i}];" for i in range(n))
    use = "".join(f"s{i} = s{i} * s{(i + 1) % n} + i;" for i in range(n))
    out = "".join(f"out[{i}] = s{i};" for i in range(n))
    src = (f'extern "C" __global__ void wide(const int* a, int* out, int m) {{ {decl} '
           f"\n#pragma unroll 1\n for (int i = 0; i < m; i++) {{ {use} }} {out} }}")
    err = error_of(src, [[1] * n, {"zeros": n}, 2], block=(1, 1))
    assert err.kind == "resource" and "registers live at once" in err.message


def test_rom_overflow_is_a_resource_error() -> None:
    body = "".join(f"x = x * {3 + i} + (x >> {i % 7 + 1});" for i in range(400))
    src = f'extern "C" __global__ void big(int* out) {{ int x = out[threadIdx.x]; {body} ' \
          "out[threadIdx.x] = x; }"
    err = error_of(src, [[1, 2, 3, 4]])
    assert err.kind == "resource" and "ROM blocks" in err.message


def test_memory_overflow_is_a_resource_error() -> None:
    src = 'extern "C" __global__ void k(int* a, int* b) { b[0] = a[0]; }'
    err = error_of(src, [[1] * 100, {"zeros": 40}])
    assert err.kind == "resource" and "global memory holds 127 words" in err.message


def test_shared_memory_overflow_is_a_resource_error() -> None:
    src = ('extern "C" __global__ void k(int* a) { __shared__ int s[80]; s[threadIdx.x] = 1; '
           "__syncthreads(); a[threadIdx.x] = s[(threadIdx.x + 1) % 80]; }")
    err = error_of(src, [{"zeros": 4}])
    assert err.kind == "resource" and "shared memory" in err.message


def test_dynamic_shared_memory_overflow_is_a_resource_error() -> None:
    src = ('extern "C" __global__ void k(int* a) { extern __shared__ int s[]; '
           "s[threadIdx.x] = 1; __syncthreads(); a[threadIdx.x] = s[threadIdx.x]; }")
    assert launch(src, [{"zeros": 4}], dynamic_shared=16).args[0] == [1, 1, 1, 1]
    err = error_of(src, [{"zeros": 4}], dynamic_shared=512)
    assert err.kind == "resource" and "shared memory" in err.message


@pytest.mark.parametrize("name,src,args,needle", [
    ("call", """
__device__ __noinline__ int twice(int x) { return 2 * x; }
extern "C" __global__ void k(int* a) { a[threadIdx.x] = twice(a[threadIdx.x]); }
""", [[1, 2, 3, 4]], "device function"),
    ("local array", """
extern "C" __global__ void k(int* a, int n) {
    int buf[16];
    for (int i = 0; i < 16; i++) buf[i] = a[i % 4] * i;
    a[threadIdx.x] = buf[n & 15];
}
""", [[1, 2, 3, 4], 5], "local"),
    ("long long", """
extern "C" __global__ void k(long long* a) { a[threadIdx.x] += 1; }
""", [[1, 2, 3, 4]], "64-bit"),
    ("float", """
extern "C" __global__ void k(float* a) { a[threadIdx.x] *= 0.1; }
""", [[1.0, 2, 3, 4]], "double precision"),
    ("wide shuffle", """
extern "C" __global__ void k(int* a) {
    a[threadIdx.x] = __shfl_down_sync(0xffffffff, a[threadIdx.x], 1);
}
""", [[1, 2, 3, 4]], "width 4"),
    ("vote", """
extern "C" __global__ void k(int* a) {
    a[threadIdx.x] = __ballot_sync(0xffffffff, a[threadIdx.x] > 2);
}
""", [[1, 2, 3, 4]], "vote"),
])
def test_unsupported_ptx_names_instruction_and_line(name, src, args, needle) -> None:
    err = error_of(src, args)
    assert err.kind == "unsupported", err.message
    assert needle.lower() in err.message.lower(), err.message
    assert "line " in err.message, err.message


def test_compile_error_reports_compiler_message() -> None:
    err = error_of('extern "C" __global__ void k(int* a) { a[0] = undefined_name; }', [[1]])
    assert err.kind == "compile" and "undefined_name" in err.message and "(1)" in err.message


def test_generic_addresses_are_global_on_both_backends() -> None:
    """clang writes atomics without a state space: both interpreters treat them as global."""
    from qgpu.driver import load_ptx
    from tests.toolchain.ptx.helpers import isolate, sample

    # ld: every thread reads out[0]; atom.add: lanes add 1 in lane order, each keeps the old value
    for name, want in (("k_generic_ld", [5, 5, 5, 5]), ("k_generic_atom", [5, 6, 7, 8])):
        module = load_ptx(isolate(sample("unsupported.ptx"), name))
        for backend in ("ptx", "interp"):
            res = module.kernel(name).launch(grid=(1, 1), block=(4, 1), args=[[5, 6, 7, 8]],
                                             backend=backend)
            assert res.args == [want], backend
