"""The kernel suite: launch shape, random inputs and an independent model of every kernel.

Each entry pairs ``kernels/<name>.cu`` with a launch that fits the machine (``qgpu.machine.limits``)
and an *intent*: a plain Python/numpy statement of what the kernel is meant to compute, never
a line-by-line copy of the CUDA. Tests and the verification ladder compare every lower rung
(PTX interpreter, machine, circuit, model) against these intents.

Arguments use the CLI's JSON form: ``list[int]`` is an int32 input array (modified in place
when the kernel writes it), ``{"zeros": n}`` is an output array of ``n`` zero words, ``int``
is a scalar. ``intent(args)`` returns the final value of every parameter: arrays as lists of
int32 values (unsigned results are shown as their int32 bit patterns), scalars unchanged.
Inputs stay small enough that no kernel meets C undefined behaviour (no signed overflow, no
division by zero, no shift by 32 or more).
"""

from __future__ import annotations

import itertools
import math
import pathlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from qgpu.driver import SUITE_DIR

Arg = list[int] | dict[str, int] | int
Gen = Callable[[np.random.Generator, int], list[int]]

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1
MASK32 = 0xFFFFFFFF


@dataclass(frozen=True)
class SuiteKernel:
    """One suite kernel: its source file stem, launch shape, input generator and intent."""

    name: str
    grid: tuple[int, int]
    block: tuple[int, int]
    make_args: Callable[[np.random.Generator], list[Arg]]
    intent: Callable[[list[Arg]], list[Arg]]
    dynamic_shared: int = 0
    tags: tuple[str, ...] = ()
    library: str | None = None


# ---------------------------------------------------------------------------------------------
# helpers: random inputs and 32-bit arithmetic


def _int(rng: np.random.Generator, lo: int, hi: int) -> int:
    """One integer in [lo, hi], inclusive."""
    return int(rng.integers(lo, hi, endpoint=True))


def _ints(rng: np.random.Generator, lo: int, hi: int, n: int) -> list[int]:
    """n integers in [lo, hi], inclusive."""
    return [int(v) for v in rng.integers(lo, hi, size=n, endpoint=True)]


def _r(lo: int, hi: int) -> Gen:
    """A generator of n integers in [lo, hi]."""
    return lambda rng, n: _ints(rng, lo, hi, n)


_EDGE_WORDS = (0, 1, -1, INT_MIN, INT_MAX, 2, 0x40000000, -2)


def _words(rng: np.random.Generator, n: int) -> list[int]:
    """n int32 words mixing full-range values, small values and edge cases (0, -1, INT_MIN...)."""
    out = []
    for _ in range(n):
        kind = _int(rng, 0, 5)
        if kind == 0:
            out.append(_EDGE_WORDS[_int(rng, 0, len(_EDGE_WORDS) - 1)])
        elif kind == 1:
            out.append(_int(rng, 0, 300))
        else:
            out.append(_int(rng, INT_MIN, INT_MAX))
    return out


def _nonzero_words(rng: np.random.Generator, n: int) -> list[int]:
    """Like _words, with zeros replaced (used as divisors and xorshift states)."""
    return [w if w != 0 else 7 for w in _words(rng, n)]


def _s32(v: int) -> int:
    """The int32 whose bit pattern is v mod 2**32 (how an unsigned result is stored)."""
    v &= MASK32
    return v - (1 << 32) if v >= 1 << 31 else v


def _u32(v: int) -> int:
    """The unsigned value of an int32 word."""
    return v & MASK32


def _tdiv(a: int, b: int) -> int:
    """C division: the quotient truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _trem(a: int, b: int) -> int:
    """C remainder: it has the sign of the dividend."""
    return a - b * _tdiv(a, b)


def _final(args: Sequence[Arg], updates: dict[int, Sequence[int]]) -> list[Arg]:
    """Every parameter's final value: updated arrays, zero outputs not written, inputs as given.

    Values must already be in int32 range: a signed result outside it means the inputs would
    overflow in the kernel (C undefined behaviour), so it is an error, never wrapped here.
    """
    out: list[Arg] = []
    for i, a in enumerate(args):
        if i in updates:
            vals = [int(v) for v in updates[i]]
            bad = [v for v in vals if not INT_MIN <= v <= INT_MAX]
            if bad:
                raise ValueError(f"intent value {bad[0]} of parameter {i} is outside int32")
            out.append(vals)
        elif isinstance(a, dict):
            out.append([0] * a["zeros"])
        elif isinstance(a, list):
            out.append(list(a))
        else:
            out.append(a)
    return out


def _a(args: Sequence[Arg], i: int) -> list[int]:
    """Parameter i as an input array (type-narrowing accessor)."""
    a = args[i]
    assert isinstance(a, list)
    return a


def _n(args: Sequence[Arg], i: int) -> int:
    """Parameter i as a scalar."""
    a = args[i]
    assert isinstance(a, int)
    return a


def _mat(a: list[int], rows: int, cols: int) -> np.ndarray:
    """A row-major int64 matrix view of a flat list (int64: products never wrap in numpy)."""
    return np.array(a, dtype=np.int64).reshape(rows, cols)


# ---------------------------------------------------------------------------------------------
# families


def _elementwise(
    name: str,
    fn: Callable[..., int | tuple[int, ...]],
    gens: Sequence[Gen],
    *,
    n_out: int = 1,
    per: int = 1,
    max_n: int = 32,
    grid: tuple[int, int] = (2, 1),
    block: tuple[int, int] = (16, 1),
    tags: tuple[str, ...] = (),
    library: str | None = None,
) -> SuiteKernel:
    """Kernels shaped ``k(in_0.., out_0.., n)``: out_j[i*per .. i*per+per-1] from fn(in_*[i])."""
    n_in = len(gens)

    def make_args(rng: np.random.Generator) -> list[Arg]:
        n = _int(rng, 1, max_n)
        ins: list[Arg] = [g(rng, n) for g in gens]
        outs: list[Arg] = [{"zeros": n * per} for _ in range(n_out)]
        return [*ins, *outs, n]

    def intent(args: list[Arg]) -> list[Arg]:
        cols: list[list[int]] = [[] for _ in range(n_out)]
        for vals in zip(*(_a(args, i) for i in range(n_in)), strict=True):
            r = fn(*vals)
            flat = r if isinstance(r, tuple) else (r,)
            assert len(flat) == n_out * per
            for j in range(n_out):
                cols[j].extend(flat[j * per : (j + 1) * per])
        return _final(args, {n_in + j: cols[j] for j in range(n_out)})

    return SuiteKernel(name, grid, block, make_args, intent, tags=tags, library=library)


def _reduction(
    name: str,
    fn: Callable[[list[int]], int],
    lo: int,
    hi: int,
    *,
    max_n: int = 100,
    grid: tuple[int, int] = (1, 1),
    block: tuple[int, int] = (16, 1),
    tags: tuple[str, ...] = (),
    library: str | None = None,
) -> SuiteKernel:
    """Kernels shaped ``k(x, out, n)`` with out[0] = fn(x)."""

    def make_args(rng: np.random.Generator) -> list[Arg]:
        n = _int(rng, 1, max_n)
        return [_ints(rng, lo, hi, n), {"zeros": 1}, n]

    def intent(args: list[Arg]) -> list[Arg]:
        return _final(args, {1: [fn(_a(args, 0))]})

    return SuiteKernel(name, grid, block, make_args, intent, tags=tags, library=library)


# ---------------------------------------------------------------------------------------------
# intents of the individual kernels (inputs -> final parameters)


def _isqrt(x: int) -> int:
    return math.isqrt(_u32(x))


def _fib(k: int) -> int:
    a, b = 0, 1
    for _ in range(k):
        a, b = b, a + b
    return a


def _collatz(v: int) -> int:
    steps = 0
    while v > 1:
        v = v // 2 if v % 2 == 0 else 3 * v + 1
        steps += 1
    return steps


def _is_prime(v: int) -> int:
    return int(v >= 2 and all(v % d for d in range(2, math.isqrt(v) + 1)))


def _grade(s: int) -> int:
    return sum(s >= cut for cut in (60, 70, 80, 90))


def _nested_branch(v: int) -> int:
    if v > 0:
        return v // 2 if v % 2 == 0 else 3 * v
    if v < -10:
        return -v
    return 100 if v == 0 else v - 5


def _tri_products(k: int) -> int:
    # sum_{a<=k} a * (1 + ... + a)
    return sum(a * a * (a + 1) // 2 for a in range(1, k + 1))


def _brev(x: int) -> int:
    return _s32(int(f"{_u32(x):032b}"[::-1], 2))


def _popc_clz_ffs(x: int) -> tuple[int, int, int]:
    u = _u32(x)
    return bin(u).count("1"), 32 - u.bit_length(), (u & -u).bit_length()


def _shift_var(x: int, s: int) -> tuple[int, int, int]:
    u, k = _u32(x), s & 31
    rot = ((u << k) | (u >> (32 - k))) & MASK32
    return _s32(rot), x >> k, _s32(u >> k)


def _masks(x: int) -> tuple[int, int, int, int]:
    u = _u32(x)
    return (_s32(u & -u), _s32(u & (u - 1)), bin(u).count("1") & 1, (u >> 4) & 0xF)


def _gray(x: int) -> tuple[int, int]:
    u = _u32(x)
    dec, shifted = 0, u
    while shifted:
        dec ^= shifted
        shifted >>= 1
    return _s32(u ^ (u >> 1)), _s32(dec)


def _div_const_signed(v: int) -> tuple[int, int, int, int]:
    return _tdiv(v, 3), _trem(v, 7), _tdiv(v, 10), _trem(v, 10)


def _div_const_unsigned(x: int) -> tuple[int, int, int, int]:
    u = _u32(x)
    return _s32(u // 3), u % 7, u // 10, u // 1000


def _mulhi(x: int, y: int) -> tuple[int, int]:
    return (x * y) >> 32, _s32((_u32(x) * _u32(y)) >> 32)


def _sat_add(a: int, b: int) -> int:
    return _s32(min(_u32(a) + _u32(b), MASK32))


def _minmax_abs(a: int, b: int) -> tuple[int, int, int, int]:
    return min(a, b), max(a, b), abs(a - b), _s32(min(_u32(a), _u32(b)))


def _xorshift(x: int, rounds: int) -> int:
    u = _u32(x)
    for _ in range(rounds):
        u ^= (u << 13) & MASK32
        u ^= u >> 17
        u ^= (u << 5) & MASK32
    return _s32(u)


def _fnv1a_word(x: int) -> int:
    h = 2166136261
    for byte in _u32(x).to_bytes(4, "little"):
        h = ((h ^ byte) * 16777619) & MASK32
    return h


def _fmix32(x: int) -> int:
    h = _u32(x)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & MASK32
    h ^= h >> 16
    return _s32(h)


def _lcg(x: int, k: int) -> int:
    u = _u32(x)
    for _ in range(k):
        u = (1664525 * u + 1013904223) & MASK32
    return _s32(u)


def _pow(b: int, e: int) -> int:
    return b**e


def _gcd(a: int, b: int) -> int:
    return math.gcd(a, b)


# --- vector and scalar parameters out of the (ins, outs, n) pattern


def _args_scale(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 40)
    return [_ints(rng, -1000, 1000, n), {"zeros": n}, _int(rng, -50, 50), n]


def _want_scale(args: list[Arg]) -> list[Arg]:
    s = _n(args, 2)
    return _final(args, {1: [s * v for v in _a(args, 0)]})


def _args_axpy(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 48)
    return [_int(rng, -20, 20), _ints(rng, -100, 100, n), _ints(rng, -100, 100, n), n]


def _want_axpy(args: list[Arg]) -> list[Arg]:
    alpha = _n(args, 0)
    return _final(args, {2: [alpha * x + y for x, y in zip(_a(args, 1), _a(args, 2), strict=True)]})


def _args_axpby(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 32)
    a, b = _int(rng, -20, 20), _int(rng, -20, 20)
    return [a, _ints(rng, -100, 100, n), b, _ints(rng, -100, 100, n), {"zeros": n}, n]


def _want_axpby(args: list[Arg]) -> list[Arg]:
    x = np.array(_a(args, 1), dtype=np.int64)
    y = np.array(_a(args, 3), dtype=np.int64)
    return _final(args, {4: (_n(args, 0) * x + _n(args, 2) * y).tolist()})


def _args_clamp(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 32)
    lo = _int(rng, -50, 50)
    return [_ints(rng, -100, 100, n), {"zeros": n}, lo, _int(rng, lo, 50), n]


def _want_clamp(args: list[Arg]) -> list[Arg]:
    y = np.clip(np.array(_a(args, 0)), _n(args, 2), _n(args, 3))
    return _final(args, {1: y.tolist()})


def _args_copy(rng: np.random.Generator) -> list[Arg]:
    size = _int(rng, 1, 50)
    return [_ints(rng, -1000, 1000, size), {"zeros": size}, _int(rng, 0, size)]


def _want_copy(args: list[Arg]) -> list[Arg]:
    src, n = _a(args, 0), _n(args, 2)
    return _final(args, {1: src[:n] + [0] * (len(src) - n)})


def _args_fill(rng: np.random.Generator) -> list[Arg]:
    size = _int(rng, 1, 60)
    return [{"zeros": size}, _int(rng, -1000, 1000), _int(rng, 0, size)]


def _want_fill(args: list[Arg]) -> list[Arg]:
    out = args[0]
    assert isinstance(out, dict)
    size, value, n = out["zeros"], _n(args, 1), _n(args, 2)
    return _final(args, {0: [value] * n + [0] * (size - n)})


def _args_iota(rng: np.random.Generator) -> list[Arg]:
    size = _int(rng, 1, 60)
    return [{"zeros": size}, _int(rng, -100, 100), _int(rng, -5, 5), _int(rng, 0, size)]


def _want_iota(args: list[Arg]) -> list[Arg]:
    out = args[0]
    assert isinstance(out, dict)
    size, start, step, n = out["zeros"], _n(args, 1), _n(args, 2), _n(args, 3)
    return _final(args, {0: [start + i * step for i in range(n)] + [0] * (size - n)})


def _args_reverse(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 32)
    return [_ints(rng, -1000, 1000, n), {"zeros": n}, n]


def _want_reverse(args: list[Arg]) -> list[Arg]:
    return _final(args, {1: _a(args, 0)[::-1]})


def _args_inplace(max_n: int, lo: int = -1000, hi: int = 1000) -> Callable[..., list[Arg]]:
    def make_args(rng: np.random.Generator) -> list[Arg]:
        n = _int(rng, 1, max_n)
        return [_ints(rng, lo, hi, n), n]

    return make_args


def _want_reversed_inplace(args: list[Arg]) -> list[Arg]:
    return _final(args, {0: _a(args, 0)[::-1]})


def _want_sorted_inplace(args: list[Arg]) -> list[Arg]:
    return _final(args, {0: sorted(_a(args, 0))})


def _args_dot(max_n: int) -> Callable[..., list[Arg]]:
    def make_args(rng: np.random.Generator) -> list[Arg]:
        n = _int(rng, 1, max_n)
        return [_ints(rng, -100, 100, n), _ints(rng, -100, 100, n), {"zeros": 1}, n]

    return make_args


def _want_dot(args: list[Arg]) -> list[Arg]:
    a = np.array(_a(args, 0), dtype=np.int64)
    b = np.array(_a(args, 1), dtype=np.int64)
    return _final(args, {2: [int(np.dot(a, b))]})


def _argmax(x: list[int]) -> int:
    return int(np.argmax(x))


def _argmin(x: list[int]) -> int:
    return int(np.argmin(x))


def _mean(x: list[int]) -> int:
    return _tdiv(sum(x), len(x))


def _norm2(x: list[int]) -> int:
    v = np.array(x, dtype=np.int64)
    return int(v @ v)


def _args_count_if(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 100)
    return [_ints(rng, -50, 50, n), {"zeros": 1}, _int(rng, -55, 55), n]


def _want_count_if(args: list[Arg]) -> list[Arg]:
    thr = _n(args, 2)
    return _final(args, {1: [sum(v > thr for v in _a(args, 0))]})


def _args_histogram(rng: np.random.Generator) -> list[Arg]:
    nbins = _int(rng, 1, 16)
    n = _int(rng, 1, 100)
    return [_ints(rng, 0, nbins - 1, n), {"zeros": nbins}, n, nbins]


def _args_histogram_global(rng: np.random.Generator) -> list[Arg]:
    nbins = _int(rng, 1, 16)
    n = _int(rng, 1, 100)
    return [_ints(rng, -100, 100, n), {"zeros": nbins}, n, nbins]


def _want_histogram(args: list[Arg]) -> list[Arg]:
    nbins = _n(args, 3)
    bins = np.mod(np.array(_a(args, 0)), nbins)  # floor modulo, as the kernels define a bin
    return _final(args, {1: np.bincount(bins, minlength=nbins).tolist()})


def _args_scan(max_n: int) -> Callable[..., list[Arg]]:
    def make_args(rng: np.random.Generator) -> list[Arg]:
        n = _int(rng, 1, max_n)
        return [_ints(rng, -100, 100, n), {"zeros": n}, n]

    return make_args


def _want_inclusive(args: list[Arg]) -> list[Arg]:
    return _final(args, {1: np.cumsum(_a(args, 0)).tolist()})


def _want_exclusive(args: list[Arg]) -> list[Arg]:
    x = _a(args, 0)
    return _final(args, {1: [0, *np.cumsum(x)[:-1].tolist()]})


def _args_compact(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 16)
    return [_ints(rng, -10, 10, n), {"zeros": n}, {"zeros": 1}, n]


def _want_compact(args: list[Arg]) -> list[Arg]:
    x = _a(args, 0)
    kept = [v for v in x if v > 0]
    return _final(args, {1: kept + [0] * (len(x) - len(kept)), 2: [len(kept)]})


def _args_search(rng: np.random.Generator) -> list[Arg]:
    m, n = _int(rng, 1, 40), _int(rng, 1, 16)
    return [sorted(_ints(rng, -50, 50, m)), m, _ints(rng, -60, 60, n), {"zeros": n}, n]


def _want_search(args: list[Arg]) -> list[Arg]:
    idx = np.searchsorted(np.array(_a(args, 0)), np.array(_a(args, 2)), side="left")
    return _final(args, {3: idx.tolist()})


def _args_conv1d(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 40)
    k = _int(rng, 1, min(4, n))
    return [_ints(rng, -50, 50, n), n, _ints(rng, -50, 50, k), k, {"zeros": n - k + 1}]


def _want_conv1d(args: list[Arg]) -> list[Arg]:
    y = np.correlate(np.array(_a(args, 0), dtype=np.int64), np.array(_a(args, 2), dtype=np.int64))
    return _final(args, {4: y.tolist()})


def _args_poly(rng: np.random.Generator) -> list[Arg]:
    deg, n = _int(rng, 0, 4), _int(rng, 1, 32)
    return [_ints(rng, -3, 3, deg + 1), deg, _ints(rng, -5, 5, n), {"zeros": n}, n]


def _want_poly(args: list[Arg]) -> list[Arg]:
    coef = _a(args, 0)
    return _final(args, {3: [sum(c * x**k for k, c in enumerate(coef)) for x in _a(args, 2)]})


# --- matrices


def _args_matmul(max_m: int, max_k: int, max_n: int) -> Callable[..., list[Arg]]:
    def make_args(rng: np.random.Generator) -> list[Arg]:
        m, k, n = _int(rng, 1, max_m), _int(rng, 1, max_k), _int(rng, 1, max_n)
        return [_ints(rng, -10, 10, m * k), _ints(rng, -10, 10, k * n), {"zeros": m * n}, m, k, n]

    return make_args


def _want_matmul(args: list[Arg]) -> list[Arg]:
    m, k, n = _n(args, 3), _n(args, 4), _n(args, 5)
    c = _mat(_a(args, 0), m, k) @ _mat(_a(args, 1), k, n)
    return _final(args, {2: c.ravel().tolist()})


def _args_matmul_tiled(rng: np.random.Generator) -> list[Arg]:
    k = 4 * _int(rng, 1, 3)
    return [_ints(rng, -10, 10, 4 * k), _ints(rng, -10, 10, 4 * k), {"zeros": 16}, k]


def _want_matmul_tiled(args: list[Arg]) -> list[Arg]:
    k = _n(args, 3)
    return _final(args, {2: (_mat(_a(args, 0), 4, k) @ _mat(_a(args, 1), k, 4)).ravel().tolist()})


def _args_matmul4(rng: np.random.Generator) -> list[Arg]:
    return [_ints(rng, -50, 50, 16), _ints(rng, -50, 50, 16), {"zeros": 16}]


def _want_matmul4(args: list[Arg]) -> list[Arg]:
    return _final(args, {2: (_mat(_a(args, 0), 4, 4) @ _mat(_a(args, 1), 4, 4)).ravel().tolist()})


def _args_matvec(max_m: int, max_n: int) -> Callable[..., list[Arg]]:
    def make_args(rng: np.random.Generator) -> list[Arg]:
        m, n = _int(rng, 1, max_m), _int(rng, 1, max_n)
        return [_ints(rng, -20, 20, m * n), _ints(rng, -20, 20, n), {"zeros": m}, m, n]

    return make_args


def _want_matvec(args: list[Arg]) -> list[Arg]:
    m, n = _n(args, 3), _n(args, 4)
    y = _mat(_a(args, 0), m, n) @ np.array(_a(args, 1), dtype=np.int64)
    return _final(args, {2: y.tolist()})


def _args_transpose(rng: np.random.Generator) -> list[Arg]:
    r, c = _int(rng, 1, 7), _int(rng, 1, 7)
    return [_ints(rng, -1000, 1000, r * c), {"zeros": r * c}, r, c]


def _want_transpose(args: list[Arg]) -> list[Arg]:
    r, c = _n(args, 2), _n(args, 3)
    return _final(args, {1: _mat(_a(args, 0), r, c).T.ravel().tolist()})


def _args_outer(rng: np.random.Generator) -> list[Arg]:
    m, n = _int(rng, 1, 8), _int(rng, 1, 8)
    return [_ints(rng, -100, 100, m), _ints(rng, -100, 100, n), {"zeros": m * n}, m, n]


def _want_outer(args: list[Arg]) -> list[Arg]:
    return _final(args, {2: np.outer(_a(args, 0), _a(args, 1)).ravel().tolist()})


def _args_matadd(rng: np.random.Generator) -> list[Arg]:
    r, c = _int(rng, 1, 6), _int(rng, 1, 6)
    return [_ints(rng, -1000, 1000, r * c), _ints(rng, -1000, 1000, r * c), {"zeros": r * c}, r, c]


def _want_matadd(args: list[Arg]) -> list[Arg]:
    return _final(args, {2: (np.array(_a(args, 0)) + np.array(_a(args, 1))).tolist()})


def _args_rows(rng: np.random.Generator) -> list[Arg]:
    r, c = _int(rng, 1, 8), _int(rng, 1, 4)
    return [_ints(rng, -1000, 1000, r * c), {"zeros": r}, r, c]


def _want_rows(args: list[Arg]) -> list[Arg]:
    r, c = _n(args, 2), _n(args, 3)
    return _final(args, {1: _mat(_a(args, 0), r, c).sum(axis=1).tolist()})


def _args_stencil_2d(rng: np.random.Generator) -> list[Arg]:
    r, c = _int(rng, 1, 7), _int(rng, 1, 7)
    return [_ints(rng, -100, 100, r * c), {"zeros": r * c}, r, c]


def _want_stencil_2d(args: list[Arg]) -> list[Arg]:
    r, c = _n(args, 2), _n(args, 3)
    p = np.pad(_mat(_a(args, 0), r, c), 1)
    lap = 4 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
    return _final(args, {1: lap.ravel().tolist()})


def _args_stencil_3pt(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 24)
    return [_ints(rng, -1000, 1000, n), {"zeros": n}, n]


def _want_stencil_3pt(args: list[Arg]) -> list[Arg]:
    p = np.pad(np.array(_a(args, 0), dtype=np.int64), 1)  # zero outside 0..n-1
    return _final(args, {1: (p[:-2] + 2 * p[1:-1] + p[2:]).tolist()})


def _args_index_2d(rng: np.random.Generator) -> list[Arg]:
    w, h = _int(rng, 1, 6), _int(rng, 1, 4)
    return [{"zeros": w * h}, w, h]


def _want_index_2d(args: list[Arg]) -> list[Arg]:
    w, h = _n(args, 1), _n(args, 2)
    bw, bh = 3, 2  # the launch's block shape
    cells = [
        (y // bh) * 1000 + (x // bw) * 100 + (y % bh) * 10 + (x % bw)
        for y in range(h)
        for x in range(w)
    ]
    return _final(args, {0: cells})


def _args_break(rng: np.random.Generator) -> list[Arg]:
    r, length = _int(rng, 1, 8), _int(rng, 1, 10)
    return [_ints(rng, -5, 9, r * length), {"zeros": r}, r, length]


def _want_break(args: list[Arg]) -> list[Arg]:
    r, length = _n(args, 2), _n(args, 3)
    m = _a(args, 0)
    sums = []
    for row in range(r):
        vals = m[row * length : (row + 1) * length]
        upto = vals.index(0) if 0 in vals else length
        sums.append(sum(v for v in vals[:upto] if v > 0))
    return _final(args, {1: sums})


# --- warp shuffles


def _groups(x: list[int], pad: int) -> list[list[int]]:
    """x padded to 16 lanes and cut into the four 4-lane warps."""
    p = x + [pad] * (16 - len(x))
    return [p[i : i + 4] for i in range(0, 16, 4)]


def _args_warp16(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 16)
    return [_ints(rng, -1000, 1000, n), {"zeros": n}, {"zeros": n}, n]


def _want_allreduce(args: list[Arg]) -> list[Arg]:
    x = _a(args, 0)
    n = len(x)
    sums = [sum(g) for g in _groups(x, 0)]
    maxes = [max(g) for g in _groups(x, INT_MIN)]
    return _final(args, {1: [sums[t // 4] for t in range(n)], 2: [maxes[t // 4] for t in range(n)]})


def _args_warp_sum(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 32)
    return [_ints(rng, -1000, 1000, n), {"zeros": (n + 3) // 4}, n]


def _want_warp_sum(args: list[Arg]) -> list[Arg]:
    x = _a(args, 0)
    return _final(args, {1: [sum(x[i : i + 4]) for i in range(0, len(x), 4)]})


def _args_broadcast(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 16)
    return [_ints(rng, -1000, 1000, n), {"zeros": n}, n, _int(rng, 0, 7)]


def _want_broadcast(args: list[Arg]) -> list[Arg]:
    x, src = _a(args, 0), _n(args, 3)
    g = _groups(x, 0)
    return _final(args, {1: [x[t] + g[t // 4][src % 4] for t in range(len(x))]})


def _args_width2(rng: np.random.Generator) -> list[Arg]:
    return [_ints(rng, -1000, 1000, 8), {"zeros": 8}, {"zeros": 8}, {"zeros": 8}]


def _want_width2(args: list[Arg]) -> list[Arg]:
    x = _a(args, 0)
    swp = [x[t ^ 1] for t in range(8)]
    dwn = [x[t + 1] if t % 2 == 0 else x[t] for t in range(8)]
    rot = [x[t - t % 4 + (t + 1) % 4] for t in range(8)]
    return _final(args, {1: swp, 2: dwn, 3: rot})


# --- atomics


def _args_atomic_sum(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 100)
    return [_ints(rng, -1000, 1000, n), {"zeros": 2}, n]


def _want_add_sub(args: list[Arg]) -> list[Arg]:
    s = sum(_a(args, 0))
    return _final(args, {1: [s, -s]})


def _args_atomic_minmax(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 100)
    return [_ints(rng, -(10**6), 10**6, n), [INT_MAX, INT_MIN], n]


def _want_minmax(args: list[Arg]) -> list[Arg]:
    x = _a(args, 0)
    return _final(args, {1: [min(x), max(x)]})


def _args_atomic_minmax_u(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 100)
    return [_words(rng, n), {"zeros": 2}, n]


def _want_minmax_u(args: list[Arg]) -> list[Arg]:
    u = [_u32(v) for v in _a(args, 0)]
    return _final(args, {1: [_s32(min(u)), _s32(max(u))]})


def _args_exch(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 60)
    return [_ints(rng, -50, 50, n), {"zeros": 3}, _int(rng, -60, 60), n]


def _want_exch(args: list[Arg]) -> list[Arg]:
    thr = _n(args, 2)
    hits = sum(v > thr for v in _a(args, 0))
    return _final(args, {1: [int(hits > 0), int(hits > 0), hits]})


def _args_cas(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 40)
    return [_ints(rng, -1000, 1000, n), [0, INT_MIN], n]


def _want_cas(args: list[Arg]) -> list[Arg]:
    x = _a(args, 0)
    return _final(args, {1: [sum(x), max(x)]})


def _args_bitwise(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 60)
    return [_words(rng, n), [0, -1, 0], n]


def _want_bitwise(args: list[Arg]) -> list[Arg]:
    ors, ands, xors = 0, MASK32, 0
    for v in _a(args, 0):
        u = _u32(v)
        ors |= 1 << (u % 32)
        ands &= ~(1 << ((u >> 5) % 32)) & MASK32
        xors ^= u
    return _final(args, {1: [_s32(ors), _s32(ands), _s32(xors)]})


def _args_inc_dec(rng: np.random.Generator) -> list[Arg]:
    return [{"zeros": 2}, _int(rng, 1, 10), _int(rng, 1, 32)]


def _want_inc_dec(args: list[Arg]) -> list[Arg]:
    limit, n = _n(args, 1), _n(args, 2)
    return _final(args, {0: [n % (limit + 1), (-n) % (limit + 1)]})


def _args_fnv(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 32)
    return [_words(rng, n), {"zeros": n}, {"zeros": 1}, n]


def _want_fnv(args: list[Arg]) -> list[Arg]:
    hashes = [_fnv1a_word(v) for v in _a(args, 0)]
    combined = 0
    for h in hashes:
        combined ^= h
    return _final(args, {1: [_s32(h) for h in hashes], 2: [_s32(combined)]})


def _args_xorshift(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 32)
    return [_nonzero_words(rng, n), _int(rng, 1, 8), n]


def _want_xorshift(args: list[Arg]) -> list[Arg]:
    rounds = _n(args, 1)
    return _final(args, {0: [_xorshift(v, rounds) for v in _a(args, 0)]})


def _args_lcg(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 32)
    return [_words(rng, n), {"zeros": n}, _int(rng, 0, 10), n]


def _want_lcg(args: list[Arg]) -> list[Arg]:
    k = _n(args, 2)
    return _final(args, {1: [_lcg(v, k) for v in _a(args, 0)]})


# ---------------------------------------------------------------------------------------------
# the calculator's checked kernels (qgpu/chat: every step of `python -m qgpu calc`): results
# wrap as the machine's words do, and the flag words say where a result left int32 (flag[0])
# or divided by zero (flag[1]); inputs mix full-range words (overflow), small values and edges


def _calc_words(rng: np.random.Generator, n: int) -> list[int]:
    """Operands for checked arithmetic: half full-range words and edges, half small values."""
    return [w if _int(rng, 0, 1) else _int(rng, -300, 300) for w in _words(rng, n)]


def _args_calc_binary(divisors: bool) -> Callable[[np.random.Generator], list[Arg]]:
    """``k(a, b, c, flag, n, ma, mb)``: either operand may be a scalar (mask 0, one word);
    divisors (for // and %) include 0 and -1."""

    def make(rng: np.random.Generator) -> list[Arg]:
        n = _int(rng, 1, 32)
        shape = _int(rng, 0, 2)  # 0: both vectors, 1: scalar a, 2: scalar b
        a = _calc_words(rng, 1 if shape == 1 else n)
        b = _calc_words(rng, 1 if shape == 2 else n)
        if divisors:
            b = [(0, -1, 1, 7)[_int(rng, 0, 3)] if _int(rng, 0, 3) == 0 else v for v in b]
        return [a, b, {"zeros": n}, {"zeros": 2 if divisors else 1}, n,
                0 if shape == 1 else -1, 0 if shape == 2 else -1]

    return make


def _floordiv(x: int, y: int) -> tuple[int | None, int]:
    """Python's x // y as the kernel leaves it: (word or None if unwritten, flag index or -1)."""
    if y == 0:
        return None, 1
    return _s32(x // y), 0 if x // y > INT_MAX else -1


def _want_calc_binary(op: Callable[[int, int], tuple[int | None, int]], flags: int) \
        -> Callable[[list[Arg]], list[Arg]]:
    def want(args: list[Arg]) -> list[Arg]:
        a, b, n, ma, mb = _a(args, 0), _a(args, 1), _n(args, 4), _n(args, 5), _n(args, 6)
        out, flag = [0] * n, [0] * flags
        for i in range(n):
            value, bad = op(a[i & ma], b[i & mb])
            if value is not None:
                out[i] = value
            if bad >= 0:
                flag[bad] = 1
        return _final(args, {2: out, 3: flag})

    return want


def _checked(v: int) -> tuple[int, int]:
    """A result as the word the kernel writes, and flag 0 where it leaves int32."""
    return _s32(v), -1 if INT_MIN <= v <= INT_MAX else 0


def _args_calc_unary(max_n: int, out: int | None = None) \
        -> Callable[[np.random.Generator], list[Arg]]:
    """``k(x, y, flag, n)``: y has n words (elementwise, scans) or `out` (reductions)."""

    def make(rng: np.random.Generator) -> list[Arg]:
        n = _int(rng, 1, max_n)
        return [_calc_words(rng, n), {"zeros": out or n}, {"zeros": 1}, n]

    return make


def _want_calc_abs(args: list[Arg]) -> list[Arg]:
    words = [_checked(abs(v)) for v in _a(args, 0)]
    return _final(args, {1: [w for w, _ in words], 2: [int(any(b == 0 for _, b in words))]})


def _want_calc_sum(args: list[Arg]) -> list[Arg]:
    word, bad = _checked(sum(_a(args, 0)))
    return _final(args, {1: [word], 2: [int(bad == 0)]})


def _want_calc_cumsum(args: list[Arg]) -> list[Arg]:
    prefixes = list(itertools.accumulate(_a(args, 0)))
    return _final(args, {1: [_s32(p) for p in prefixes],
                         2: [int(any(not INT_MIN <= p <= INT_MAX for p in prefixes))]})


def _args_calc_dot(rng: np.random.Generator) -> list[Arg]:
    n = _int(rng, 1, 55)
    big = _int(rng, 0, 1)  # full-range words overflow; small ones mostly do not
    gen = _calc_words if big else _r(-50000, 50000)
    return [gen(rng, n), gen(rng, n), {"zeros": 1}, {"zeros": 1}, n]


def _dot_far(terms: list[int]) -> bool:
    """Whether a partial sum of the terms, added in order, leaves [-2^62, 2^62) (the checked
    kernels' guard against a 64-bit sum that could wrap)."""
    return any(not -(1 << 62) <= p < 1 << 62 for p in itertools.accumulate(terms))


def _want_calc_dot(args: list[Arg]) -> list[Arg]:
    a, b = _a(args, 0), _a(args, 1)
    products = [x * y for x, y in zip(a, b, strict=True)]
    lanes = [sum(products[lane::4]) for lane in range(4)]  # four lanes, then xor shuffles
    far = any(_dot_far(products[lane::4]) for lane in range(4)) or \
        _dot_far(lanes[:2]) or _dot_far(lanes[2:]) or _dot_far([sum(lanes[:2]), sum(lanes[2:])])
    word, bad = _checked(sum(products))
    return _final(args, {2: [word], 3: [int(bad == 0 or far)]})


def _args_calc_matmul(rng: np.random.Generator) -> list[Arg]:
    m, k, n = _int(rng, 1, 6), _int(rng, 1, 6), _int(rng, 1, 6)
    gen = _calc_words if _int(rng, 0, 3) == 0 else _r(-1000, 1000)
    return [gen(rng, m * k), gen(rng, k * n), {"zeros": m * n}, {"zeros": 1}, m, k, n]


def _want_calc_matmul(args: list[Arg]) -> list[Arg]:
    m, k, n = _n(args, 4), _n(args, 5), _n(args, 6)
    a, b = _a(args, 0), _a(args, 1)
    out, bad = [], False
    for r in range(m):
        for c in range(n):
            products = [a[r * k + j] * b[j * n + c] for j in range(k)]
            word, flag = _checked(sum(products))
            out.append(word)
            bad = bad or flag == 0 or _dot_far(products)
    return _final(args, {2: out, 3: [int(bad)]})



# ---------------------------------------------------------------------------------------------
# the suite

_L = ("library",)
_T = ("teaching",)
_RED = ("reduction", "shared", "loop")
_CALC = ("library", "calc", "overflow")

# fmt: off
SUITE: tuple[SuiteKernel, ...] = (
    # ---- library: elementwise
    _elementwise("vec_add", lambda a, b: a + b, (_r(-1000, 1000), _r(-1000, 1000)),
                 tags=_L, library="add"),
    _elementwise("vec_sub", lambda a, b: a - b, (_r(-1000, 1000), _r(-1000, 1000)),
                 grid=(3, 1), block=(12, 1), tags=_L, library="sub"),
    _elementwise("vec_mul", lambda a, b: a * b, (_r(-1000, 1000), _r(-1000, 1000)),
                 tags=_L, library="mul"),
    _elementwise("vec_max", max, (_r(-1000, 1000), _r(-1000, 1000)),
                 tags=(*_L, "minmax"), library="maximum"),
    SuiteKernel("vec_scale", (2, 1), (8, 1), _args_scale, _want_scale,
                tags=(*_L, "grid", "loop"), library="scale"),
    SuiteKernel("axpy", (3, 1), (16, 1), _args_axpy, _want_axpy, tags=_L, library="axpy"),
    SuiteKernel("axpby", (2, 1), (16, 1), _args_axpby, _want_axpby, tags=_L, library="axpby"),
    _elementwise("vec_abs", abs, (_r(-(10**6), 10**6),), max_n=30, grid=(3, 1), block=(10, 1),
                 tags=(*_L, "minmax"), library="abs"),
    _elementwise("relu", lambda v: max(v, 0), (_r(-1000, 1000),), tags=(*_L, "minmax"),
                 library="relu"),
    _elementwise("sign", lambda v: (v > 0) - (v < 0), (_r(-5, 5),), tags=(*_L, "ternary"),
                 library="sign"),
    SuiteKernel("clamp", (2, 1), (16, 1), _args_clamp, _want_clamp, tags=(*_L, "minmax"),
                library="clamp"),
    SuiteKernel("copy", (3, 1), (4, 1), _args_copy, _want_copy, tags=(*_L, "grid", "loop"),
                library="copy"),
    SuiteKernel("fill", (2, 1), (8, 1), _args_fill, _want_fill, tags=(*_L, "grid", "loop"),
                library="fill"),
    SuiteKernel("iota", (4, 1), (4, 1), _args_iota, _want_iota, tags=(*_L, "grid", "loop"),
                library="iota"),
    SuiteKernel("reverse", (2, 1), (16, 1), _args_reverse, _want_reverse, tags=_L,
                library="reverse"),
    # ---- library: reductions
    SuiteKernel("dot", (1, 1), (4, 1), _args_dot(55), _want_dot, tags=(*_L, "atomic", "loop"),
                library="dot"),
    SuiteKernel("dot_shared", (1, 1), (16, 1), _args_dot(55), _want_dot, tags=(*_L, *_RED),
                library="dot_shared"),
    _reduction("reduce_sum", sum, -1000, 1000, tags=(*_L, *_RED), library="sum"),
    _reduction("mean", _mean, -1000, 1000, tags=(*_L, *_RED, "division"), library="mean"),
    _reduction("reduce_max", max, -(10**6), 10**6,
               tags=(*_L, "reduction", "shuffle", "atomic", "shared", "loop"), library="max"),
    _reduction("reduce_min", min, -(10**6), 10**6, tags=(*_L, *_RED, "minmax"), library="min"),
    _reduction("argmax", _argmax, -20, 20, tags=(*_L, *_RED, "divergence"), library="argmax"),
    _reduction("argmin", _argmin, -20, 20, tags=(*_L, "reduction", "shuffle", "shared", "loop"),
               library="argmin"),
    _reduction("norm2", _norm2, -100, 100, grid=(2, 1),
               tags=(*_L, "reduction", "shuffle", "atomic", "grid", "loop"), library="norm2"),
    SuiteKernel("count_if", (2, 1), (16, 1), _args_count_if, _want_count_if,
                tags=(*_L, "atomic", "grid", "loop"), library="count_if"),
    SuiteKernel("histogram", (2, 1), (16, 1), _args_histogram, _want_histogram,
                tags=(*_L, "atomic", "shared", "grid", "loop"), library="histogram"),
    # ---- library: scans, sorting, searching
    SuiteKernel("prefix_sum", (1, 1), (16, 1), _args_scan(50), _want_inclusive,
                tags=(*_L, "scan", "shared", "loop"), library="prefix_sum"),
    SuiteKernel("exclusive_scan", (1, 1), (8, 1), _args_scan(16), _want_exclusive,
                tags=(*_L, "scan", "shared", "loop"), library="exclusive_scan"),
    SuiteKernel("sort_bitonic", (1, 1), (16, 1), _args_inplace(16), _want_sorted_inplace,
                tags=(*_L, "sort", "shared", "loop", "bits"), library="sort"),
    SuiteKernel("search", (1, 1), (16, 1), _args_search, _want_search, tags=(*_L, "loop"),
                library="search"),
    SuiteKernel("compact", (1, 1), (16, 1), _args_compact, _want_compact,
                tags=(*_L, "scan", "shared", "divergence"), library="compact"),
    # ---- library: matrices and signals
    SuiteKernel("matmul", (2, 2), (4, 4), _args_matmul(6, 5, 6), _want_matmul,
                tags=(*_L, "matrix", "2d", "grid", "loop"), library="matmul"),
    SuiteKernel("matvec", (2, 1), (4, 1), _args_matvec(8, 10), _want_matvec,
                tags=(*_L, "matrix", "loop"), library="matvec"),
    SuiteKernel("transpose", (2, 2), (4, 4), _args_transpose, _want_transpose,
                tags=(*_L, "matrix", "2d", "grid"), library="transpose"),
    SuiteKernel("outer", (2, 2), (4, 4), _args_outer, _want_outer,
                tags=(*_L, "matrix", "2d", "grid"), library="outer"),
    SuiteKernel("matadd", (2, 3), (4, 2), _args_matadd, _want_matadd,
                tags=(*_L, "matrix", "2d", "grid"), library="matadd"),
    SuiteKernel("conv1d", (2, 1), (16, 1), _args_conv1d, _want_conv1d,
                tags=(*_L, "grid", "loop"), library="conv1d"),
    SuiteKernel("poly_eval", (2, 1), (16, 1), _args_poly, _want_poly, tags=(*_L, "loop"),
                library="poly"),
    # ---- library: integer math
    _elementwise("fib", _fib, (_r(0, 30),), max_n=16, grid=(1, 1), tags=(*_L, "loop"),
                 library="fib"),
    _elementwise("factorial", math.factorial, (_r(0, 12),), max_n=16, grid=(1, 1),
                 tags=(*_L, "loop"), library="factorial"),
    _elementwise("gcd", _gcd, (_r(0, 500), _r(0, 500)),
                 tags=(*_L, "loop", "division"), library="gcd"),
    _elementwise("isqrt", _isqrt, (_words,), max_n=16, grid=(1, 1),
                 tags=(*_L, "loop", "bits", "divergence"), library="isqrt"),
    _elementwise("ipow", _pow, (_r(-6, 6), _r(0, 11)), max_n=16, grid=(1, 1),
                 tags=(*_L, "loop", "bits"), library="pow"),
    # ---- teaching: matrices
    SuiteKernel("matmul_tiled", (1, 1), (4, 4), _args_matmul_tiled, _want_matmul_tiled,
                tags=(*_T, "matrix", "shared", "2d", "loop")),
    SuiteKernel("matmul4_regs", (1, 1), (4, 1), _args_matmul4, _want_matmul4,
                tags=(*_T, "matrix", "spill")),
    SuiteKernel("matmul_rowcol", (2, 1), (8, 1), _args_matmul(5, 6, 5), _want_matmul,
                tags=(*_T, "matrix", "division", "grid", "loop")),
    SuiteKernel("matvec_warp", (2, 1), (16, 1), _args_matvec(8, 9), _want_matvec,
                tags=(*_T, "matrix", "shuffle", "loop")),
    SuiteKernel("transpose_shared", (2, 2), (4, 4), _args_transpose, _want_transpose,
                tags=(*_T, "matrix", "shared", "2d", "grid")),
    SuiteKernel("stencil_2d", (2, 2), (4, 4), _args_stencil_2d, _want_stencil_2d,
                tags=(*_T, "stencil", "shared", "2d", "grid", "division", "loop")),
    SuiteKernel("stencil_3pt", (3, 1), (8, 1), _args_stencil_3pt, _want_stencil_3pt,
                tags=(*_T, "stencil", "shared", "grid")),
    SuiteKernel("index_2d", (2, 2), (3, 2), _args_index_2d, _want_index_2d,
                tags=(*_T, "2d", "grid")),
    SuiteKernel("reduce_2d_rows", (1, 2), (4, 4), _args_rows, _want_rows,
                tags=(*_T, "reduction", "shared", "2d", "grid")),
    # ---- teaching: reductions and scans
    _reduction("reduce_interleaved", sum, -1000, 1000, max_n=40,
               tags=(*_T, *_RED, "division", "divergence")),
    _reduction("reduce_multiblock", sum, -1000, 1000, max_n=110, grid=(4, 1), block=(8, 1),
               tags=(*_T, *_RED, "atomic", "grid")),
    _reduction("reduce_warp_tail", sum, -1000, 1000, max_n=60,
               tags=(*_T, *_RED, "shuffle")),
    SuiteKernel("scan_warp", (1, 1), (16, 1), _args_scan(16), _want_inclusive,
                tags=(*_T, "scan", "shuffle", "shared", "loop")),
    SuiteKernel("odd_even_sort", (1, 1), (8, 1), _args_inplace(16), _want_sorted_inplace,
                tags=(*_T, "sort", "shared", "loop")),
    SuiteKernel("reverse_inplace", (2, 1), (8, 1), _args_inplace(60), _want_reversed_inplace,
                tags=(*_T, "grid", "loop")),
    SuiteKernel("reverse_dyn", (1, 1), (16, 1), _args_inplace(16), _want_reversed_inplace,
                dynamic_shared=64, tags=(*_T, "shared", "dynamic_shared")),
    SuiteKernel("histogram_global", (4, 1), (8, 1), _args_histogram_global, _want_histogram,
                tags=(*_T, "atomic", "division", "grid", "loop")),
    # ---- teaching: warp shuffles
    SuiteKernel("warp_sum_down", (2, 1), (16, 1), _args_warp_sum, _want_warp_sum,
                tags=(*_T, "shuffle", "reduction")),
    SuiteKernel("warp_allreduce_xor", (1, 1), (16, 1), _args_warp16, _want_allreduce,
                tags=(*_T, "shuffle", "reduction", "minmax")),
    SuiteKernel("shfl_broadcast", (1, 1), (16, 1), _args_broadcast, _want_broadcast,
                tags=(*_T, "shuffle")),
    SuiteKernel("shfl_width2", (1, 1), (8, 1), _args_width2, _want_width2,
                tags=(*_T, "shuffle")),
    # ---- teaching: atomics
    SuiteKernel("atomic_add_sub", (2, 1), (8, 1), _args_atomic_sum, _want_add_sub,
                tags=(*_T, "atomic", "grid", "loop")),
    SuiteKernel("atomic_minmax", (2, 1), (16, 1), _args_atomic_minmax, _want_minmax,
                tags=(*_T, "atomic", "grid", "loop", "minmax")),
    SuiteKernel("atomic_minmax_u", (1, 1), (16, 1), _args_atomic_minmax_u, _want_minmax_u,
                tags=(*_T, "atomic", "shared", "loop", "unsigned")),
    SuiteKernel("atomic_exch_flag", (2, 1), (8, 1), _args_exch, _want_exch,
                tags=(*_T, "atomic", "grid", "loop", "divergence")),
    SuiteKernel("atomic_cas", (1, 1), (8, 1), _args_cas, _want_cas,
                tags=(*_T, "atomic", "loop", "break")),
    SuiteKernel("atomic_bitwise", (2, 1), (8, 1), _args_bitwise, _want_bitwise,
                tags=(*_T, "atomic", "bits", "grid", "loop", "unsigned")),
    SuiteKernel("atomic_inc_dec", (2, 1), (16, 1), _args_inc_dec, _want_inc_dec,
                tags=(*_T, "atomic", "unsigned")),
    # ---- teaching: control flow
    _elementwise("divergent_if_else", lambda v: 3 * v + 1 if v % 2 else _tdiv(v, 2),
                 (_r(-1000, 1000),), tags=(*_T, "divergence", "division")),
    _elementwise("nested_branches", _nested_branch, (_r(-30, 30),), grid=(3, 1),
                 block=(12, 1), tags=(*_T, "divergence", "nested", "division")),
    _elementwise("nested_loops", _tri_products, (_r(0, 6),), max_n=16, grid=(1, 1),
                 tags=(*_T, "loop", "nested")),
    SuiteKernel("loop_break_continue", (1, 1), (8, 1), _args_break, _want_break,
                tags=(*_T, "loop", "break", "early_exit", "divergence")),
    _elementwise("early_exit", lambda v: _tdiv(1000, v) if v else -1, (_r(-50, 50),),
                 tags=(*_T, "early_exit", "divergence", "division")),
    _elementwise("grid_stride_square", lambda v: v * v, (_r(-1000, 1000),), max_n=60,
                 grid=(4, 1), block=(4, 1), tags=(*_T, "grid", "loop")),
    _elementwise("collatz", _collatz, (_r(1, 50),), max_n=16, grid=(1, 1),
                 tags=(*_T, "loop", "divergence")),
    _elementwise("prime_check", _is_prime, (_r(0, 300),), max_n=16, grid=(1, 1),
                 tags=(*_T, "loop", "break", "division")),
    _elementwise("digit_sum", lambda v: sum(int(d) for d in str(v)), (_r(0, INT_MAX),),
                 tags=(*_T, "loop", "division")),
    _elementwise("ternary_grade", _grade, (_r(0, 100),), tags=(*_T, "ternary")),
    _elementwise("minmax_abs", _minmax_abs, (_r(-1000, 1000), _r(-1000, 1000)), per=4,
                 max_n=20, tags=(*_T, "minmax", "unsigned")),
    # ---- teaching: bits
    _elementwise("bits_popc_clz", _popc_clz_ffs, (_words,), per=3, max_n=30,
                 tags=(*_T, "bits")),
    _elementwise("bits_brev", lambda v: (_brev(v), _brev(v)), (_words,), n_out=2, max_n=16,
                 grid=(1, 1), tags=(*_T, "bits", "loop")),
    _elementwise("bits_shift_var", _shift_var, (_words, _r(0, 31)), n_out=3, max_n=24,
                 block=(12, 1), tags=(*_T, "bits", "unsigned")),
    _elementwise("bits_masks", _masks, (_words,), per=4, max_n=24, block=(12, 1),
                 tags=(*_T, "bits", "unsigned")),
    _elementwise("gray_code", _gray, (_words,), n_out=2, tags=(*_T, "bits", "loop")),
    _elementwise("saturating_add", _sat_add, (_words, _words), tags=(*_T, "unsigned")),
    # ---- teaching: division and multiply-high
    _elementwise("div_const_signed", _div_const_signed, (_r(-100000, 100000),), per=4,
                 max_n=24, block=(12, 1), tags=(*_T, "division")),
    _elementwise("div_const_unsigned", _div_const_unsigned, (_words,), per=4, max_n=24,
                 block=(12, 1), tags=(*_T, "division", "unsigned")),
    _elementwise("div_var", lambda a, b: (_tdiv(a, b), _trem(a, b)),
                 (_r(-10000, 10000), lambda rng, n: [v or 1 for v in _ints(rng, -50, 50, n)]),
                 n_out=2, max_n=30, tags=(*_T, "division")),
    _elementwise("udiv_var",
                 lambda a, b: (_s32(_u32(a) // _u32(b)), _s32(_u32(a) % _u32(b))),
                 (_words, _nonzero_words), n_out=2, max_n=30, tags=(*_T, "division", "unsigned")),
    _elementwise("mulhi", _mulhi, (_words, _words), n_out=2, max_n=30,
                 tags=(*_T, "mulhi", "unsigned")),
    # ---- teaching: hashing (unsigned wraparound)
    SuiteKernel("xorshift32", (2, 1), (16, 1), _args_xorshift, _want_xorshift,
                tags=(*_T, "hash", "bits", "loop", "unsigned")),
    SuiteKernel("fnv1a", (2, 1), (16, 1), _args_fnv, _want_fnv,
                tags=(*_T, "hash", "bits", "atomic", "unsigned")),
    _elementwise("murmur_mix", _fmix32, (_words,), tags=(*_T, "hash", "bits", "unsigned")),
    SuiteKernel("lcg_steps", (2, 1), (16, 1), _args_lcg, _want_lcg,
                tags=(*_T, "hash", "loop", "unsigned")),
    # ---- library: the calculator's checked arithmetic (qgpu/chat), overflow flagged
    SuiteKernel("calc_add", (2, 1), (16, 1), _args_calc_binary(False),
                _want_calc_binary(lambda x, y: _checked(x + y), 1), tags=_CALC,
                library="checked_add"),
    SuiteKernel("calc_sub", (2, 1), (16, 1), _args_calc_binary(False),
                _want_calc_binary(lambda x, y: _checked(x - y), 1), tags=_CALC,
                library="checked_sub"),
    SuiteKernel("calc_mul", (2, 1), (16, 1), _args_calc_binary(False),
                _want_calc_binary(lambda x, y: _checked(x * y), 1), tags=(*_CALC, "mulhi"),
                library="checked_mul"),
    SuiteKernel("calc_floordiv", (2, 1), (16, 1), _args_calc_binary(True),
                _want_calc_binary(_floordiv, 2), tags=(*_CALC, "division"),
                library="floordiv"),
    SuiteKernel("calc_mod", (2, 1), (16, 1), _args_calc_binary(True),
                _want_calc_binary(lambda x, y: (x % y, -1) if y else (None, 1), 2),
                tags=(*_CALC, "division"), library="mod"),
    SuiteKernel("calc_abs", (2, 1), (16, 1), _args_calc_unary(32), _want_calc_abs,
                tags=_CALC, library="checked_abs"),
    SuiteKernel("calc_sum", (1, 1), (4, 1), _args_calc_unary(100, 1), _want_calc_sum,
                tags=(*_CALC, "reduction", "shuffle", "loop"), library="checked_sum"),
    SuiteKernel("calc_cumsum", (1, 1), (1, 1), _args_calc_unary(59), _want_calc_cumsum,
                tags=(*_CALC, "scan", "loop"), library="checked_cumsum"),
    SuiteKernel("calc_dot", (1, 1), (4, 1), _args_calc_dot, _want_calc_dot,
                tags=(*_CALC, "reduction", "shuffle", "mulhi", "loop"), library="checked_dot"),
    SuiteKernel("calc_matmul", (2, 2), (4, 4), _args_calc_matmul, _want_calc_matmul,
                tags=(*_CALC, "matrix", "2d", "grid", "mulhi", "loop"),
                library="checked_matmul"),
    _reduction("calc_min", min, INT_MIN, INT_MAX, block=(4, 1),
               tags=(*_L, "calc", "reduction", "shuffle", "loop"), library="warp_min"),
    _reduction("calc_max", max, INT_MIN, INT_MAX, block=(4, 1),
               tags=(*_L, "calc", "reduction", "shuffle", "loop"), library="warp_max"),
    _reduction("calc_argmin", _argmin, -20, 20, block=(4, 1),
               tags=(*_L, "calc", "reduction", "shuffle", "loop"), library="warp_argmin"),
    _reduction("calc_argmax", _argmax, -20, 20, block=(4, 1),
               tags=(*_L, "calc", "reduction", "shuffle", "loop"), library="warp_argmax"),
)
# fmt: on

_BY_NAME = {k.name: k for k in SUITE}


def source_path(k: SuiteKernel) -> pathlib.Path:
    """The CUDA source file of a suite kernel."""
    return SUITE_DIR / f"{k.name}.cu"


def by_name(name: str) -> SuiteKernel:
    """The suite kernel called name (KeyError names the unknown kernel)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no suite kernel named {name!r}") from None


def by_library(op: str) -> SuiteKernel:
    """The library kernel that implements chat's operation op (e.g. "dot", "matmul")."""
    for k in SUITE:
        if k.library == op:
            return k
    raise KeyError(f"no library kernel for operation {op!r}")
