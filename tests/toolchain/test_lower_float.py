"""float32 kernels lowered to the machine: compiled CUDA run on both interpreters (the PTX
interpreter and the machine), bit for bit, and host float I/O (decimals, ints as C converts
them, non-finite names, raw bits)."""

import math

import numpy as np
import pytest

from qgpu.errors import UsageError
from qgpu.machine import float32 as F
from tests.toolchain.both import bits, module, needs_compiler, run_both

pytestmark = needs_compiler


def f32(x: float) -> float:
    return float(np.float32(x))


SAXPY = """
extern "C" __global__ void saxpy(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def test_saxpy_takes_decimals_and_ints_as_c_converts_them():
    out = run_both(SAXPY, None, [4, 2.5, [1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4]])
    want = [f32(f32(2.5) * v + f32(w)) for v, w in zip([1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4],
                                                      strict=True)]
    assert out.args[3] == want
    assert repr(out.args[3]) == "[2.6, 5.2, 7.8, 10.4]"  # shortest float32 decimals
    assert out.args[2] == [1.0, 2.0, 3.0, 4.0]  # a float * given ints: converted, read as floats


def test_saxpy_rounds_once_like_a_fused_multiply_add():
    x, y = 1 + 2 ** -23, -(1 + 2 ** -22)  # x*x - (1 + 2^-22) = 2^-46 exactly, fused
    out = run_both(SAXPY, None, [1, x, [x], [y]])
    assert out.args[3][0].bits == F.fma(F.from_decimal(x), F.from_decimal(x), F.from_decimal(y))
    assert out.args[3][0] == 2.0 ** -46


SPECIAL = """
extern "C" __global__ void special(const float *x, float *y, int *c) {
    int i = threadIdx.x;
    float v = x[i];
    y[4 * i + 0] = fminf(v, 1.0f);
    y[4 * i + 1] = fabsf(v) * -1.0f;
    y[4 * i + 2] = copysignf(2.0f, v);
    y[4 * i + 3] = v / 1.0f - v;
    c[4 * i + 0] = isnan(v) + 2 * isinf(v) + 4 * (v < 0.0f) + 8 * !(v >= 0.0f);
    c[4 * i + 1] = (int)v;
    c[4 * i + 2] = (unsigned)v;
    c[4 * i + 3] = __float_as_int(floorf(v)) ^ __float_as_int(ceilf(v));
}
"""


def test_specials_nan_inf_subnormal_and_negative_zero_agree_bit_for_bit():
    inputs = ["nan", "-inf", {"bits": 1}, -0.0, 2.5, -2.5, 3e9, -1e-3]
    out = run_both(SPECIAL, None, [inputs, {"zeros": 32}, {"zeros": 32}], block=(8,))
    ys, cs = out.args[1], out.args[2]
    assert not math.isnan(ys[0]) and ys[0] == 1.0  # fminf(NaN, 1) = 1
    assert ys[1].bits == F.CANONICAL_NAN  # |NaN| * -1: the canonical NaN
    assert [cs[4 * i] for i in range(8)] == [1 + 8, 2 + 4 + 8, 0, 0, 0, 4 + 8, 0, 4 + 8]
    assert cs[4 * 4 + 1] == 2 and cs[4 * 5 + 1] == -2  # truncation
    assert cs[4 * 6 + 1] == 2147483647  # saturates
    assert cs[4 * 6 + 2] == -1294967296  # 3e9 as unsigned, read back as a signed word
    assert ys[4 * 3 + 2] == -2.0  # copysign(2, -0)
    assert ys[4 * 2 + 3] == 0.0  # a subnormal minus itself


DOT = """
extern "C" __global__ void dot(const float *a, const float *b, float *out, int n) {
    __shared__ float part;
    if (threadIdx.x == 0) part = 0.0f;
    __syncthreads();
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += a[i] * b[i];
    atomicAdd(&part, s);
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(out, part);
}
"""


def test_float_atomics_on_shared_and_global_memory_in_lane_order():
    a = [0.5, 1.25, -3.0, 4.0, 0.1, 0.2, 0.3, 7.0, 1e-3, 2.0]
    b = [2.0, 4.0, 0.5, -1.0, 3.0, 0.7, 0.9, 1.0, 5.0, 0.25]
    out = run_both(DOT, None, [a, b, [1.0], len(a)], grid=(2,), block=(8,))
    assert abs(out.args[2][0] - (1.0 + 2 * sum(x * y for x, y in zip(a, b, strict=True)))) < 1e-4


ROUNDING = """
extern "C" __global__ void rounding(const float *x, float *y) {
    int i = threadIdx.x;
    float v = x[i];
    y[6 * i + 0] = __fadd_rz(v, 1e-8f);
    y[6 * i + 1] = __fadd_ru(v, 1e-8f);
    y[6 * i + 2] = __fmul_rd(v, 3.0f);
    y[6 * i + 3] = __fmaf_ru(v, v, -1.0f);
    y[6 * i + 4] = rintf(v) + roundf(v) + truncf(v);
    y[6 * i + 5] = __int2float_rz(__float2int_rn(v * 1e6f) + 16777217);
}
"""


def test_directed_rounding_intrinsics_agree():
    xs = [1.0, -1.0, 0.1, 2.5, -2.5, 1e-40, 16777215.0, -0.7]
    out = run_both(ROUNDING, None, [xs, {"zeros": 48}], block=(8,))
    y = out.args[1]
    one = F.from_decimal(1.0)
    assert y[0].bits == one and y[1].bits == one + 1  # 1 + 1e-8 rounded down / up
    assert y[6 * 3 + 4] == 2.0 + 3.0 + 2.0  # rint(2.5) = 2 (even), round = 3, trunc = 2


CONVERT = """
extern "C" __global__ void narrow(const float *x, int *out) {
    int i = threadIdx.x;
    signed char c = (signed char)x[i];
    unsigned short s = (unsigned short)x[i];
    out[2 * i] = c;
    out[2 * i + 1] = s;
}
"""


def test_float_to_narrow_integers_agree_on_both_interpreters():
    out = run_both(CONVERT, None, [[1.5, -1.5, 300.0, -300.0], {"zeros": 8}])
    assert out.args[1][:2] == [1, 1]


def test_host_float_arguments_and_their_errors():
    k = module(SAXPY).kernel()
    out = k.launch(grid=(1,), block=(4,), backend="interp",
                   args=[3, "inf", [1.0, -2.0, 0.0], {"bits": [0, 1, 0x7FC00000]}])
    assert [v.bits for v in out.args[3]] == [F.INF, F.INF | F.SIGN, F.CANONICAL_NAN]
    assert repr(out.args[3]) == "[inf, -inf, nan]"
    for bad, needle in [("two", "expected a number"), ([1.0], "is a float"),
                        ({"bits": -1}, "32-bit word")]:
        with pytest.raises(UsageError, match=needle):
            k.launch(grid=(1,), block=(4,), backend="interp", args=[3, bad, [1.0], [1.0]])
    with pytest.raises(UsageError, match="integer parameter"):
        k.launch(grid=(1,), block=(4,), backend="interp", args=[3.5, 1.0, [1.0], [1.0]])
    assert bits(out.args)[0] == 3
