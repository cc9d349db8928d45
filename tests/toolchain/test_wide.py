"""64-bit integer values on the 32-bit machine (``lower/select/wide.py``): the high half of a
128-bit product (``mul.hi.u64/.s64``, what a ``long long`` divided by a constant becomes) and
shifts by a variable amount, on both interpreters against Python's integers."""

from __future__ import annotations

import random

import pytest

from .both import needs_compiler, run_both

pytestmark = needs_compiler

M64 = (1 << 64) - 1
EDGES = [0, 1, 2, 3, 7, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 32, (1 << 32) + 1,
         (1 << 63) - 1, 1 << 63, (1 << 63) + 1, M64, M64 - 1, 0x0123_4567_89AB_CDEF,
         0xFEDC_BA98_7654_3210, 0x8000_0000_FFFF_FFFF, 0xFFFF_FFFF_0000_0001]

# values arrive as (high, low) int pairs; results leave as (low, high)
PROLOGUE = """
__device__ long long get(const int *x, int i) {
    return (long long)(((unsigned long long)(unsigned)x[2 * i] << 32) | (unsigned)x[2 * i + 1]);
}
__device__ void put(int *out, int i, long long v) {
    out[2 * i] = (int)v; out[2 * i + 1] = (int)(v >> 32);
}
"""
MULHI = PROLOGUE + """
__global__ void mulhi(const int *a, const int *b, int *out) {
    int i = threadIdx.x;
    long long x = get(a, i), y = get(b, i);
    put(out, 2 * i, __mul64hi(x, y));
    put(out, 2 * i + 1, (long long)__umul64hi((unsigned long long)x, (unsigned long long)y));
}
"""
DIVIDE = PROLOGUE + """
__global__ void divide(const int *a, int *out) {
    int i = threadIdx.x;
    long long x = get(a, i);
    unsigned long long u = (unsigned long long)x;
    put(out, 4 * i, x / 7);
    put(out, 4 * i + 1, x % 1000);
    put(out, 4 * i + 2, (long long)(u / 10));
    put(out, 4 * i + 3, x / -8589934593LL);
}
"""
SHIFT = PROLOGUE + """
__global__ void shift(const int *a, const int *s, int *out) {
    int i = threadIdx.x;
    long long x = get(a, i);
    int k = s[i];
    put(out, 3 * i, x >> k);
    put(out, 3 * i + 1, (long long)((unsigned long long)x >> k));
    put(out, 3 * i + 2, x << k);
}
"""


def s32(v: int) -> int:
    v &= 0xFFFF_FFFF
    return v - (1 << 32) if v >> 31 else v


def split(values: list[int]) -> list[int]:
    return [w for v in values for w in (s32(v >> 32), s32(v))]


def joined(words: list[int]) -> list[int]:
    return [(words[k] & 0xFFFF_FFFF) | (words[k + 1] & 0xFFFF_FFFF) << 32
            for k in range(0, len(words), 2)]


def signed(v: int) -> int:
    v &= M64
    return v - (1 << 64) if v >> 63 else v


def tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def operands(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.choice(EDGES) if rng.random() < 0.4 else rng.getrandbits(rng.choice((8, 33, 64)))
            for _ in range(n)]


@pytest.mark.parametrize("seed", range(4))
def test_high_halves_of_128_bit_products(seed: int) -> None:
    xs, ys = operands(seed, 8), operands(seed + 100, 8)
    got = joined(run_both(MULHI, "mulhi", [split(xs), split(ys), {"zeros": 32}],
                          block=(8,)).args[2])
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        assert got[2 * i] == (signed(x) * signed(y)) >> 64 & M64, (hex(x), hex(y))
        assert got[2 * i + 1] == (x * y) >> 64, (hex(x), hex(y))


@pytest.mark.parametrize("seed", range(3))
def test_division_by_constants(seed: int) -> None:
    xs = operands(seed, 8)
    got = joined(run_both(DIVIDE, "divide", [split(xs), {"zeros": 64}], block=(8,)).args[1])
    for i, x in enumerate(xs):
        v = signed(x)
        want = [tdiv(v, 7), v - tdiv(v, 1000) * 1000, x // 10, tdiv(v, -8589934593)]
        assert [signed(g) for g in got[4 * i:4 * i + 4]] == want, hex(x)


@pytest.mark.parametrize("seed", range(3))
def test_shifts_by_a_variable_amount(seed: int) -> None:
    xs = operands(seed, 8)
    ks = [0, 1, 31, 32, 33, 63] + [random.Random(seed + k).randrange(64) for k in range(2)]
    got = joined(run_both(SHIFT, "shift", [split(xs), ks, {"zeros": 48}], block=(8,)).args[2])
    for i, (x, k) in enumerate(zip(xs, ks, strict=True)):
        want = [signed(x) >> k & M64, x >> k, x << k & M64]
        assert got[3 * i:3 * i + 3] == want, (hex(x), k)
