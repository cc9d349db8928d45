"""Launches and independent expectations for the textbook-style kernels in this folder.

Each case is a kernel as a new user would paste it (not adapted to 4-lane warps or the 127-word
memory) with a machine-sized launch. A case either has a reference result that the launch must
reproduce exactly, or names the error the machine backend ("interp") must raise: its kind and a
substring naming the cause. Unsupported PTX must also name its line ("line N").

The PTX backend (an independent interpreter) runs what the lowering rejects for size or for
64-bit arithmetic: for such cases ``ptx="exact"`` says it must return the reference result.
Otherwise it must raise the same kind of error (``ptx_substring`` when its wording differs).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

HERE = Path(__file__).resolve().parent

Args = list[Any]
Reference = Callable[[Args], Args]
ErrorKind = Literal["unsupported", "resource", "launch", "compile"]

MASK32 = 0xFFFFFFFF


@dataclass(frozen=True)
class Case:
    """One launch of one user kernel and what it must give."""

    id: str
    file: str
    kernel: str
    grid: tuple[int, int]
    block: tuple[int, int]
    args: Args
    dynamic_shared: int = 0
    reference: Reference | None = None  # final value of every argument
    error: ErrorKind | None = None  # expected on the machine backend
    substring: str = ""  # the error message must contain it
    ptx: Literal["same", "exact"] = "same"
    ptx_substring: str | None = None  # when the PTX interpreter words it differently
    ptx_step_limit: int | None = None

    @property
    def source(self) -> str:
        return (HERE / self.file).read_text(encoding="utf-8")


# -- helpers -------------------------------------------------------------------------------------

def s32(v: int) -> int:
    """Wrap to a signed 32-bit value, as memory words read back."""
    v &= MASK32
    return v - (1 << 32) if v >> 31 else v


def u32(v: int) -> int:
    return v & MASK32


def rng(name: str) -> random.Random:
    """A generator seeded by the case name (stable across runs and Python versions)."""
    return random.Random(f"user-kernels/{name}")


def ints(name: str, n: int, lo: int, hi: int) -> list[int]:
    r = rng(name)
    return [r.randint(lo, hi) for _ in range(n)]


def decimals(name: str, n: int) -> list[float]:
    """n floats with one decimal in -9.9..9.9 (as a user types them; not exact in binary)."""
    r = rng(name)
    return [r.randint(-99, 99) / 10 for _ in range(n)]


def nearest_float32(x: Fraction) -> float:
    """x rounded to the nearest float32, ties to even, by comparing its two float32
    neighbours exactly (numpy only proposes them)."""
    import numpy as np

    near = np.float32(float(x))
    cands = sorted({Fraction(float(v)) for v in (np.nextafter(near, np.float32(-np.inf)), near,
                                                  np.nextafter(near, np.float32(np.inf)))})
    best = min(cands, key=lambda c: (abs(c - x), int(np.float32(float(c)).view(np.uint32)) & 1))
    return float(best)


def ref_saxpy_float(args: Args) -> Args:
    """y[i] = a * x[i] + y[i] for i < n, each rounded once to float32 (NVVM contracts it into
    one fma; the exact value rounded once is that fma's result)."""
    n, a, x, y = args
    f32 = [[nearest_float32(Fraction(v)) for v in arr] for arr in (x, y)]
    a32 = Fraction(nearest_float32(Fraction(a)))
    out = [nearest_float32(a32 * Fraction(xv) + Fraction(yv)) if i < n else yv
           for i, (xv, yv) in enumerate(zip(*f32, strict=True))]
    return [n, a, f32[0], out]


def final(args: Args, outs: dict[int, list[int]]) -> Args:
    """The expected final arguments: ``args`` with outputs replaced, everything as s32 words."""
    res: Args = []
    for i, a in enumerate(args):
        if i in outs:
            res.append([s32(v) for v in outs[i]])
        elif isinstance(a, dict) and "zeros" in a:
            res.append([0] * a["zeros"])
        elif isinstance(a, dict):  # a typed array such as {"u8": [...]}: its elements
            res.append(list(next(iter(a.values()))))
        elif isinstance(a, list):
            res.append([s32(v) for v in a])
        else:
            res.append(a)
    return res


def tdiv(a: int, b: int) -> int:
    """C division: truncate toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def tmod(a: int, b: int) -> int:
    return a - b * tdiv(a, b)


# -- references ----------------------------------------------------------------------------------

def ref_block_sums(block: int, n: int, src: int, dst: int) -> Reference:
    def ref(args: Args) -> Args:
        data = args[src][:n]
        nblocks = args[dst]["zeros"]
        return final(args, {dst: [sum(data[b * block:(b + 1) * block]) for b in range(nblocks)]})
    return ref


def ref_exclusive_scan(args: Args) -> Args:
    data = args[1]
    out, acc = [], 0
    for v in data:
        out.append(acc)
        acc += v
    return final(args, {0: out})


def ref_histogram(args: Args) -> Args:
    bins = [0] * 8
    for v in args[0][:args[2]]:
        bins[v % 8] += 1  # Python's % is already non-negative
    return final(args, {1: bins})


def ref_stencil_1d(args: Args) -> Args:
    data, n = args[0], args[2]
    padded = [0, 0] + data[:n] + [0, 0]
    return final(args, {1: [sum(padded[i:i + 5]) for i in range(n)]})


def ref_laplace(args: Args) -> Args:
    u, w, h = args[0], args[2], args[3]
    v = list(u)
    for y in range(1, h - 1):
        for x in range(1, w - 1):
            i = y * w + x
            v[i] = u[i - 1] + u[i + 1] + u[i - w] + u[i + w] - 4 * u[i]
    return final(args, {1: v})


def ref_matmul(args: Args) -> Args:
    a, b, n = args[0], args[1], args[3]
    c = [sum(a[r * n + k] * b[k * n + col] for k in range(n)) for r in range(n) for col in range(n)]
    return final(args, {2: c})


def ref_transpose(args: Args) -> Args:
    src, w, h = args[1], args[2], args[3]
    return final(args, {0: [src[y * w + x] for x in range(w) for y in range(h)]})


def ref_saxpy(n_at: int, a_at: int, x_at: int, y_at: int) -> Reference:
    def ref(args: Args) -> Args:
        n, a, x, y = args[n_at], args[a_at], args[x_at], list(args[y_at])
        for i in range(n):
            y[i] = a * x[i] + y[i]
        return final(args, {y_at: y})
    return ref


def ref_row_sums_saturated(args: Args) -> Args:
    m, rows, cols = args[0], args[1]["zeros"], args[2]
    sums = [sum(m[r * cols:(r + 1) * cols]) for r in range(rows)]
    return final(args, {1: [max(-(1 << 31), min((1 << 31) - 1, s)) for s in sums]})


def ref_scale(args: Args) -> Args:
    data, n, f = args[0], args[1], args[2]
    return final(args, {0: [v * f if i < n else v for i, v in enumerate(data)]})


def ref_box3(args: Args) -> Args:
    data, n = args[0], args[2]
    padded = [0] + data[:n] + [0]
    return final(args, {1: [padded[i] + 2 * padded[i + 1] + 3 * padded[i + 2] for i in range(n)]})


def _gcd(a: int, b: int) -> int:
    while b != 0:
        a, b = b, tmod(a, b)
    return abs(a)


def _hash(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x45D9F3B) & MASK32
    x ^= x >> 16
    return x


def ref_helpers(args: Args) -> Args:
    a, b, n = args[0], args[1], args[3]
    out = [min(9, max(1, _gcd(a[i], b[i]))) + (_hash(i) & 0xFF) for i in range(n)]
    return final(args, {2: out})


def ref_divmod(args: Args) -> Args:
    a, b = args[0], args[1]
    q = [tdiv(x, y) for x, y in zip(a, b, strict=True)]
    r = [tmod(x, y) for x, y in zip(a, b, strict=True)]
    uq = [u32(x) // u32(y) for x, y in zip(a, b, strict=True)]
    c = [tdiv(x, 7) + tmod(x, 10) + s32(u32(x) // 3) for x in a]
    return final(args, {2: q, 3: r, 4: uq, 5: c})


def _collatz_steps(v: int) -> int:
    steps = 0
    while v != 1:
        v = 3 * v + 1 if v & 1 else v // 2
        steps += 1
    return steps


def ref_classify(args: Args) -> Args:
    data, out, n = args[0], list(args[1]), args[2]
    for i in range(n):
        if data[i] < 0:
            out[i] = -1
        elif data[i] > 0:
            out[i] = _collatz_steps(data[i])
    return final(args, {1: out})


def ref_sorted(args: Args) -> Args:
    return final(args, {0: sorted(args[0])})


def _bit_tricks(x: int) -> int:
    x = u32(x)
    r = bin(x).count("1")
    r += (32 - x.bit_length()) << 6
    r ^= (x & u32(~x + 1)) << 3
    r += 1000 if x != 0 and not x & (x - 1) else 0
    r ^= int(f"{x:032b}"[::-1], 2)
    ffs = (x & -x).bit_length()
    r += ffs << 12
    r += abs(s32(x))  # (sx + mask) ^ mask, with abs(INT_MIN) wrapping to INT_MIN
    return u32(r)


def ref_bit_tricks(args: Args) -> Args:
    return final(args, {1: [_bit_tricks(x) for x in args[0]]})


def ref_ternary(args: Args) -> Args:
    a, b, n = args[0], args[1], args[3]
    out = []
    for i in range(n):
        x, y = a[i], b[i]
        m, s = max(x, y), abs(x)
        big = 1 if u32(x) > 1000 else 0
        out.append(min(m, 50) + max(s, y) * 2 + big * 100 + (7 if x == y else 0))
    return final(args, {2: out})


def ref_big_unroll(args: Args) -> Args:
    out = []
    for x in args[0]:
        acc = 0
        for k in range(96):
            acc = s32(acc * 3 + (x ^ s32(k * 2654435761)))
            acc ^= acc >> 7  # arithmetic shift of a signed int
        out.append(acc)
    return final(args, {1: out})


def ref_fold40(args: Args) -> Args:
    v = args[0]
    out = []
    for t in range(args[1]["zeros"]):
        h = t
        for k in range(39, -1, -1):
            h = s32(h * 31) ^ v[k]
        out.append(h)
    return final(args, {1: out})


def ref_max_count(args: Args) -> Args:
    data, n = args[0], args[3]
    return final(args, {1: [max([args[1][0]] + data[:n])], 2: [n]})


def ref_matvec(args: Args) -> Args:
    a, x, rows, cols = args[0], args[1], args[3], args[4]
    y = [sum(a[r * cols + c] * x[c] for c in range(cols)) for r in range(rows)]
    return final(args, {2: y})


def s16(v: int) -> int:
    v &= 0xFFFF
    return v - (1 << 16) if v >> 15 else v


def s8(v: int) -> int:
    v &= 0xFF
    return v - (1 << 8) if v >> 7 else v


def s24(v: int) -> int:
    v &= 0xFFFFFF
    return v - (1 << 24) if v >> 23 else v


def ref_last_block(args: Args) -> Args:
    data, nblocks, n = args[0], args[1]["zeros"], args[4]
    partial = [sum(data[b * 8:min(n, (b + 1) * 8)]) for b in range(nblocks)]
    return final(args, {1: partial, 2: [sum(partial)], 3: [nblocks]})


def ref_narrow(args: Args) -> Args:
    key, out = args[2], []
    for v in args[0]:
        c = v & 0xFF
        rot = (tmod(c - 97 + key, 26) + 97) & 0xFF
        s = s16(s16(v) * 3 - 7)
        sc = s8(v >> 3)
        out.append(rot + 1000 * s + sc * 7)
    return final(args, {1: out})


def ref_wide_mul(args: Args) -> Args:
    a, b = args[0], args[1]
    hi = [(x * y) >> 32 for x, y in zip(a, b, strict=True)]
    uhi = [(u32(x) * u32(y)) >> 32 for x, y in zip(a, b, strict=True)]
    fx = [(x * y) >> 16 for x, y in zip(a, b, strict=True)]
    return final(args, {2: hi, 3: uhi, 4: fx})


def _funnel_l(lo: int, hi: int, shift: int) -> int:
    return ((u32(hi) << 32 | u32(lo)) << (shift & 31)) >> 32 & MASK32


def _funnel_r(lo: int, hi: int, shift: int) -> int:
    return ((u32(hi) << 32 | u32(lo)) >> (shift & 31)) & MASK32


def ref_mulhi_funnel(args: Args) -> Args:
    out = []
    for i, (x, y) in enumerate(zip(args[0], args[1], strict=True)):
        r = (x * y) >> 32
        r ^= s32((u32(x) * u32(y)) >> 32)
        r = s32(r + s24(x) * s24(y))
        r = s32(r + _funnel_l(x, y, i))
        r ^= s32(_funnel_r(x, y, 3 * i))
        r = s32(r + ((x + y) >> 1) + ((x + y + 1) >> 1))
        r ^= s32(abs(x))
        out.append(r)
    return final(args, {2: out})


def ref_intrinsics(args: Args) -> Args:
    out = []
    for i, (x, y) in enumerate(zip(args[0], args[1], strict=True)):
        r = (x * y) >> 32
        r ^= s32((u32(x) * u32(y)) >> 32)
        r = s32(r + s24(x) * s24(y))
        r = s32(r + _funnel_l(x, y, i))
        r ^= s32(abs(x - y) + 3)
        r = s32(r + ((x + y) >> 1) + ((x + y + 1) >> 1))
        r ^= s32(abs(x) + abs(u32(x) - u32(y)))
        out.append(r)
    return final(args, {2: out})


def ref_bswap(args: Args) -> Args:
    n = args[2]
    return final(args, {1: [int.from_bytes(u32(v).to_bytes(4, "little"), "big")
                            for v in args[0][:n]]})


def _bitfield(x: int) -> int:
    x = u32(x)
    nib = (x >> 4) & 0xF
    packed = (x & ~0xF00 & MASK32) | ((nib ^ 5) << 8)
    rot = u32(x << 13) | (x >> 19)
    v = {0: packed, 1: rot, 2: u32(packed + rot), 3: nib * 1000, 4: u32(~x), 5: x >> 3}.get(
        x & 7, 42)
    return v ^ (rot & 0xFF)


def ref_bitfields(args: Args) -> Args:
    return final(args, {1: [_bitfield(x) for x in args[0]]})


def ref_pow2div(args: Args) -> Args:
    d = args[0]
    return final(args, {1: [tdiv(v, 8) for v in d], 2: [tmod(v, 8) for v in d],
                        3: [tdiv(v, 1024) for v in d], 4: [tmod(v, 2) for v in d]})


def ref_axpb(args: Args) -> Args:
    x, a, b, n = args[0], args[2], args[3], args[4]
    return final(args, {1: [a * x[i] + b if i < n else 0 for i in range(len(x))]})


def ref_template_reduce(args: Args) -> Args:
    data, n = args[0], args[2]
    nblocks, bs = args[1]["zeros"], 8
    out = []
    for blk in range(nblocks):
        total = 0
        for tid in range(bs):
            i = blk * bs * 2 + tid
            while i < n:
                total += data[i] + (data[i + bs] if i + bs < n else 0)
                i += bs * 2 * nblocks
        out.append(total)
    return final(args, {1: out})


def ref_byte_histogram(args: Args) -> Args:
    bins = [0] * args[2]["zeros"]
    for b in args[0]["u8"][:args[1]]:
        bins[b] += 1
    return final(args, {0: args[0]["u8"], 2: bins})


def ref_popcount3(args: Args) -> Args:
    data, n = args[0], args[2]
    return final(args, {1: [bin(v & 7).count("1") for v in data[:n]]})


def ref_single_pass(args: Args) -> Args:
    data, n, nblocks = args[0], args[3], args[1]["zeros"]
    partial = [sum(data[b * 8:min(n, (b + 1) * 8)]) for b in range(nblocks)]
    return final(args, {1: partial, 2: [sum(partial)]})


def ref_compact_positive(args: Args) -> Args:
    # atomicAdd hands out slots in the machine's documented order: lanes, then warps, in order
    kept = [v for v in args[0][:args[2]] if v > 0]
    return final(args, {1: kept + [0] * (args[1]["zeros"] - len(kept))})


def ref_tile_total(args: Args) -> Args:
    return final(args, {1: [sum(args[0][:args[2]])]})


def ref_poly(args: Args) -> Args:
    c = [3, -2, 0, 5, 1]
    return final(args, {1: [s32(sum(ck * x ** k for k, ck in enumerate(c))) if i < args[2] else 0
                            for i, x in enumerate(args[0])]})


def ref_int4_add(args: Args) -> Args:
    n = 4 * args[3]
    return final(args, {2: [a + b for a, b in zip(args[0][:n], args[1][:n], strict=True)]
                        + [0] * (args[2]["zeros"] - n)})


def _caesar(c: int, shift: int) -> int:
    for base in (ord("a"), ord("A")):
        if base <= c < base + 26:
            return base + (c - base + shift) % 26
    return c


def ref_caesar(args: Args) -> Args:
    text, n, shift = args[0]["u8"], args[2], args[3]
    out = args[1]["u8"]
    return final(args, {1: [_caesar(c, shift) for c in text[:n]] + out[n:]})


def ref_gray(args: Args) -> Args:
    p = args[0]["u8"]
    return final(args, {1: [(77 * p[4 * i] + 150 * p[4 * i + 1] + 29 * p[4 * i + 2]) >> 8
                            for i in range(args[2] * args[3])]})


def ref_depth(args: Args) -> Args:
    nx, ny, nz = args[2], args[3], args[4]
    vol = args[0][:nx * ny * nz]
    return final(args, {1: [v * (i // (nx * ny) + 1) for i, v in enumerate(vol)]})


def ref_saturate(args: Args) -> Args:
    data, n, gain = args[0]["s16"], args[2], args[3]
    return final(args, {1: [max(-32768, min(32767, v * gain)) for v in data[:n]]})


def ref_compact(args: Args) -> Args:
    data, n = args[0], args[3]
    kept = [v for v in data[:n] if v % 3 == 0]
    return final(args, {1: kept + [0] * (args[1]["zeros"] - len(kept)), 2: [len(kept)]})


def ref_block_stats(args: Args) -> Args:
    data, out = args[0], []
    for b in range(len(data) // 8):
        chunk = data[b * 8:(b + 1) * 8]
        bits = 0
        for v in chunk:
            bits |= v & 0xFF
        out += [min(chunk), max(chunk), bits, 7]  # warps run in order: thread 7 swaps last
    return final(args, {1: out})


def ref_two_sum(args: Args) -> Args:
    data, n, targets = args[0], args[1], args[2]
    found = []
    for target in targets:
        result = -1
        for j in range(n):
            if data[j] > target + 100:
                continue
            ks = [k for k in range(j + 1, n) if data[j] + data[k] == target]
            if ks:
                result = j * 100 + ks[0]
                break
        found.append(result)
    return final(args, {3: found})


def ref_avg64(args: Args) -> Args:
    a, b, d = args[0], args[1], args[3]
    return final(args, {2: [s32(tdiv(x + y, d)) for x, y in zip(a, b, strict=True)]})


def ref_checksum24(args: Args) -> Args:
    v = args[0]
    out = []
    for t in range(args[1]["zeros"]):
        h = t
        for k in range(23, -1, -1):
            h = s32(h * 31) ^ v[k]
        out.append(h)
    return final(args, {1: out})


def ref_midpoint(args: Args) -> Args:
    lo, hi, n = args[0], args[1], args[3]
    return final(args, {2: [tdiv(lo[i] + hi[i], 2) for i in range(n)]})


def ref_sat_add(args: Args) -> Args:
    a, b, n = args[0], args[1], args[3]
    return final(args, {2: [max(-(1 << 31), min((1 << 31) - 1, a[i] + b[i])) for i in range(n)]})


def ref_average_scaled(args: Args) -> Args:
    a, b, scale, n = args[0], args[1], args[3], args[4]
    return final(args, {2: [(s32(a[i] * scale) + s32(b[i] * scale)) >> 1 for i in range(n)]})


def ref_isqrt(args: Args) -> Args:
    return final(args, {1: [math.isqrt(v) for v in args[0][:args[2]]]})


def ref_global_ids(args: Args) -> Args:
    n = args[0]["zeros"]
    return final(args, {0: [t * 10 + t // 8 + 1000 + 10000 for t in range(n)]})


def ref_fnv1a64(args: Args) -> Args:
    data, n = args[0], args[3]
    lo, hi = [], []
    h = 14695981039346656037
    for i in range(n):
        h = ((h ^ u32(data[i])) * 1099511628211) & (1 << 64) - 1
        lo.append(h & MASK32)
        hi.append(h >> 32)
    return final(args, {1: lo, 2: hi})


def ref_bits64(args: Args) -> Args:
    out = []
    for h, lo in zip(args[0], args[1], strict=True):
        x = (u32(h) << 32) | u32(lo)
        ffs = (x & -x).bit_length()
        out.append(bin(x).count("1") + 100 * (64 - x.bit_length()) + 10000 * ffs)
    return final(args, {2: out})


def ref_fx_div(args: Args) -> Args:
    a, b, n = args[0], args[1], args[3]
    return final(args, {2: [tdiv(a[i] << 16, b[i]) for i in range(n)]})


# -- the cases -----------------------------------------------------------------------------------

_BIT_INPUTS = [0, 1, 2, 3, 12, 0x80000000, 0xFFFFFFFF, 0x7FFFFFFF, 1024, 0x00F0F000, 96, 0x55555555,
               0xDEADBEEF, 7, 0x40000000, 12345]
_TERN_A = [5, -7, 2000, -3000, 50, 60, 0, -1, 1001, 1000, 3, 49]
_TERN_B = [5, 2, -5, 4000, 50, 70, 0, -1, 3, 999, 3, 51]

CASES: list[Case] = [
    # ---- reductions -----------------------------------------------------------------------------
    Case("reduce_sum_dynamic", "reduce_sum_dynamic.cu", "reduce", (3, 1), (16, 1),
         [ints("reduce", 40, -500, 500), {"zeros": 3}, 40], dynamic_shared=16 * 4,
         reference=ref_block_sums(16, 40, 0, 1)),
    Case("reduce_forgot_dynamic_shared", "reduce_sum_dynamic.cu", "reduce", (3, 1), (16, 1),
         [ints("reduce", 40, -500, 500), {"zeros": 3}, 40], dynamic_shared=0,
         error="launch", substring="shared address 0"),
    Case("reduce_dynamic_shared_too_big", "reduce_sum_dynamic.cu", "reduce", (3, 1), (16, 1),
         [ints("reduce", 40, -500, 500), {"zeros": 3}, 40], dynamic_shared=256 * 4,
         error="resource", substring="1024 bytes of shared memory"),
    Case("reduce_interleaved_mod", "reduce_interleaved_mod.cu", "reduce0", (4, 1), (8, 1),
         [ints("reduce0", 32, -1000, 1000), {"zeros": 4}],
         reference=ref_block_sums(8, 32, 0, 1)),
    Case("reduce_256_static", "reduce_256_static.cu", "reduce_static", (2, 1), (16, 1),
         [ints("reduce256", 40, -9, 9), {"zeros": 2}, 40],
         error="resource", substring="1024 bytes of shared memory"),
    Case("reduce_warp_unrolled", "reduce_warp_unrolled.cu", "reduce5", (2, 1), (8, 1),
         [ints("reduce5", 32, -99, 99), {"zeros": 2}], dynamic_shared=8 * 4,
         error="launch", substring="shared address 128"),
    Case("warp_shuffle_sum", "warp_shuffle_sum.cu", "warp_sum", (1, 1), (16, 1),
         [ints("shfl", 16, -50, 50), {"zeros": 1}, 16],
         error="unsupported", substring="32-lane segments"),
    Case("warp_lane_index", "warp_lane_index.cu", "per_warp_sums", (1, 1), (16, 1),
         [ints("lane", 16, 0, 9), {"zeros": 4}],
         error="unsupported", substring="warpSize"),
    Case("matvec_rows", "matvec_rows.cu", "matvec", (2, 1), (4, 4),
         [ints("matvec_a", 42, -20, 20), ints("matvec_x", 7, -5, 5), {"zeros": 6}, 6, 7],
         reference=ref_matvec),
    # ---- scans ----------------------------------------------------------------------------------
    Case("scan_hillis_steele", "scan_hillis_steele.cu", "scan_naive", (1, 1), (16, 1),
         [{"zeros": 16}, ints("hs", 16, -100, 100), 16], dynamic_shared=2 * 16 * 4,
         reference=ref_exclusive_scan),
    Case("scan_blelloch", "scan_blelloch.cu", "prescan", (1, 1), (8, 1),
         [{"zeros": 16}, ints("blelloch", 16, -100, 100), 16], dynamic_shared=16 * 4,
         reference=ref_exclusive_scan),
    # ---- histograms -----------------------------------------------------------------------------
    Case("histogram_shared", "histogram_shared.cu", "histogram_shared", (2, 1), (8, 1),
         [ints("histo", 45, -30, 30), {"zeros": 8}, 45], reference=ref_histogram),
    Case("histogram_uchar", "histogram_uchar.cu", "histo_kernel", (2, 1), (8, 1),
         [{"u8": ints("uchar", 40, 0, 31)}, 40, {"zeros": 32}], reference=ref_byte_histogram),
    Case("histogram_uchar_256_bins", "histogram_uchar.cu", "histo_kernel", (1, 1), (8, 1),
         [{"u8": ints("uchar", 16, 0, 255)}, 16, {"zeros": 32}],
         error="launch", substring="outside memory", ptx_substring="outside global memory"),
    # ---- stencils -------------------------------------------------------------------------------
    Case("stencil_1d_shared", "stencil_1d_shared.cu", "stencil_1d", (3, 1), (8, 1),
         [ints("stencil1d", 20, -50, 50), {"zeros": 20}, 20], reference=ref_stencil_1d),
    Case("stencil_2d", "stencil_2d.cu", "laplace", (2, 2), (4, 4),
         [ints("laplace", 30, -20, 20), {"zeros": 30}, 6, 5], reference=ref_laplace),
    # ---- matrices -------------------------------------------------------------------------------
    Case("matmul_naive", "matmul_naive.cu", "matMul", (2, 2), (4, 4),
         [ints("mm_a", 25, -9, 9), ints("mm_b", 25, -9, 9), {"zeros": 25}, 5],
         reference=ref_matmul),
    Case("matmul_tiled", "matmul_tiled.cu", "matmul_tiled", (2, 2), (3, 3),
         [ints("mt_a", 36, -9, 9), ints("mt_b", 36, -9, 9), {"zeros": 36}, 6],
         reference=ref_matmul),
    Case("transpose_naive", "transpose.cu", "transposeNaive", (2, 1), (4, 4),
         [{"zeros": 32}, ints("tn", 32, -99, 99), 8, 4], reference=ref_transpose),
    Case("transpose_shared", "transpose.cu", "transposeCoalesced", (2, 2), (4, 4),
         [{"zeros": 30}, ints("ts", 30, -99, 99), 6, 5], reference=ref_transpose),
    # ---- index types ----------------------------------------------------------------------------
    Case("saxpy_size_t", "saxpy_size_t.cu", "saxpy", (2, 1), (16, 1),
         [20, 3, ints("sx", 20, -99, 99), ints("sy", 20, -99, 99)],
         reference=ref_saxpy(0, 1, 2, 3)),
    Case("saxpy_grid_stride", "saxpy_grid_stride.cu", "saxpy_gs", (2, 1), (8, 1),
         [45, -7, ints("gx", 45, -99, 99), ints("gy", 45, -99, 99)],
         reference=ref_saxpy(0, 1, 2, 3)),
    Case("loop_int64_index", "loop_int64_index.cu", "scale_inplace", (2, 1), (4, 1),
         [ints("i64", 20, -99, 99), 18, 3],
         error="unsupported", substring="div.u64", ptx="exact", reference=ref_scale),
    Case("dot_int64", "dot_int64.cu", "dot64", (1, 1), (4, 1),
         [ints("da", 8, -9, 9), ints("db", 8, -9, 9), {"zeros": 2}, 8],
         error="unsupported", substring="64-bit atomic"),
    Case("sum_longlong_clamp", "sum_longlong_clamp.cu", "row_sums_saturated", (1, 1), (4, 1),
         [[1 << 30, 1 << 30, 5, -3, 0, 1] + [-(1 << 30)] * 6 + ints("ll", 12, -99, 99),
          {"zeros": 4}, 6],
         reference=ref_row_sums_saturated),
    Case("saxpy_float", "saxpy_float.cu", "saxpy_f", (1, 1), (8, 1),
         [7, 2.5, decimals("fx", 8), decimals("fy", 8)], reference=ref_saxpy_float),
    # ---- unsupported language features ----------------------------------------------------------
    Case("constant_lut", "constant_lut.cu", "popcount3", (1, 1), (8, 1),
         [ints("lut", 8, 0, 99), {"zeros": 8}, 8], reference=ref_popcount3),
    Case("local_array_unrolled", "local_array_unrolled.cu", "box3", (2, 1), (8, 1),
         [ints("box3", 13, -50, 50), {"zeros": 13}, 13], reference=ref_box3),
    Case("local_array_sort", "local_array_sort.cu", "sort8_per_thread", (1, 1), (4, 1),
         [ints("sort8", 32, -99, 99), {"zeros": 32}, 4],
         error="unsupported", substring="local array"),
    Case("device_helpers", "device_helpers.cu", "helpers", (2, 1), (8, 1),
         [ints("ga", 12, -60, 60), ints("gb", 12, -60, 60), {"zeros": 12}, 12],
         reference=ref_helpers),
    Case("device_noinline", "device_noinline.cu", "apply", (1, 1), (8, 1),
         [ints("noinl", 8, -9, 9), {"zeros": 8}, 8],
         error="unsupported", substring="device function that was not inlined"),
    Case("device_recursive", "device_recursive.cu", "fib_kernel", (1, 1), (8, 1),
         [ints("fib", 8, 0, 10), {"zeros": 8}],
         error="unsupported", substring="device function that was not inlined"),
    Case("printf_debug", "printf_debug.cu", "add_debug", (1, 1), (8, 1),
         [ints("pa", 8, 0, 9), ints("pb", 8, 0, 9), {"zeros": 8}, 8],
         error="unsupported", substring="printf"),
    Case("ballot_count", "ballot_count.cu", "count_positive", (1, 1), (16, 1),
         [ints("ballot", 16, -5, 5), {"zeros": 1}], error="unsupported", substring="warp vote"),
    Case("shfl_legacy", "shfl_legacy.cu", "legacy_shfl", (1, 1), (4, 1),
         [[1, 2, 3, 4]], error="compile", substring="__shfl_down"),
    # ---- arithmetic and control flow ------------------------------------------------------------
    Case("divmod", "divmod.cu", "divmod", (1, 1), (8, 1),
         [[100, -100, 7, -7, 123456, -2147483647, 0, 99],
          [7, 7, -3, -3, 1000, 10, 5, -100],
          {"zeros": 8}, {"zeros": 8}, {"zeros": 8}, {"zeros": 8}],
         reference=ref_divmod),
    Case("early_return", "early_return.cu", "classify", (2, 1), (8, 1),
         [[6, -3, 0, 27, 1, 7, -100, 0, 9, 16, 5, 3], [99] * 12, 10], reference=ref_classify),
    Case("odd_even_sort_shared", "odd_even_sort_shared.cu", "odd_even_sort", (1, 1), (16, 1),
         [ints("oes", 16, -99, 99)], reference=ref_sorted),
    Case("bit_tricks", "bit_tricks.cu", "bit_tricks", (1, 1), (16, 1),
         [_BIT_INPUTS, {"zeros": 16}], reference=ref_bit_tricks),
    Case("ternary_minmax", "ternary_minmax.cu", "ternary_ops", (2, 1), (8, 1),
         [_TERN_A, _TERN_B, {"zeros": 12}, 12], reference=ref_ternary),
    Case("atomic_cas_max", "atomic_cas_max.cu", "max_and_count", (2, 1), (8, 1),
         [ints("casmax", 12, -1000, 1000), [-(1 << 31)], {"zeros": 1}, 12],
         reference=ref_max_count),
    # ---- more textbook patterns ----------------------------------------------------------------
    Case("threadfence_reduction", "threadfence_reduction.cu", "sum_single_pass", (3, 1), (8, 1),
         [ints("tf", 20, -99, 99), {"zeros": 3}, {"zeros": 1}, 20], reference=ref_single_pass),
    Case("last_block_ticket", "last_block_ticket.cu", "sum_last_block", (3, 1), (8, 1),
         [ints("ticket", 20, -99, 99), {"zeros": 3}, {"zeros": 1}, {"zeros": 1}, 20],
         reference=ref_last_block),
    Case("syncwarp_reduce", "syncwarp_reduce.cu", "reduce_syncwarp", (2, 1), (16, 1),
         [ints("syncwarp", 32, -99, 99), {"zeros": 2}],
         error="unsupported", substring="__syncwarp"),
    Case("shfl_xor_allreduce", "shfl_xor_allreduce.cu", "warp_max", (1, 1), (8, 1),
         [ints("bfly", 8, -99, 99), {"zeros": 8}],
         error="unsupported", substring="32-lane segments"),
    Case("narrow_types", "narrow_types.cu", "narrow", (1, 1), (16, 1),
         [[97, 122, 65, 0, 255, 300, -1, -200, 40000, -40000, 32767, -32768, 1 << 20, 98, 120,
           7], {"zeros": 16}, 3],
         reference=ref_narrow),
    Case("wide_multiply", "wide_multiply.cu", "wide_mul", (1, 1), (8, 1),
         [[1 << 30, -(1 << 31), 123456789, -987654, 65536, -1, 0x7FFFFFFF, 77],
          [4, 3, 987654321, 123456, 65536, -1, 0x7FFFFFFF, -77],
          {"zeros": 8}, {"zeros": 8}, {"zeros": 8}],
         reference=ref_wide_mul),
    Case("mulhi_funnel", "mulhi_funnel.cu", "mulhi_funnel", (1, 1), (16, 1),
         [ints("mf_a", 14, -(1 << 31), (1 << 31) - 1) + [-(1 << 31), 0x7FFFFFFF],
          ints("mf_b", 14, -(1 << 31), (1 << 31) - 1) + [-1, 0x7FFFFFFF], {"zeros": 16}],
         reference=ref_mulhi_funnel),
    Case("intrinsics_sad", "intrinsics.cu", "intrinsics", (1, 1), (8, 1),
         [ints("in_a", 8, -(1 << 20), 1 << 20), ints("in_b", 8, -(1 << 20), 1 << 20),
          {"zeros": 8}],
         error="unsupported", substring="sad", ptx="exact", reference=ref_intrinsics),
    Case("byte_swap", "byte_swap.cu", "bswap32", (1, 1), (8, 1),
         [[0x11223344, 0xDEADBEEF, 0, -1, 0x80, 0x01000000, 12345678, 0x7F00FF01],
          {"zeros": 8}, 8],
         reference=ref_bswap),
    Case("bitfields_switch", "bitfields.cu", "bitfields", (1, 1), (16, 1),
         [ints("bits", 16, 0, MASK32), {"zeros": 16}], reference=ref_bitfields),
    Case("signed_pow2_div", "signed_pow2_div.cu", "pow2div", (2, 1), (8, 1),
         [[-17, 17, -8, 8, -1, 0, 1, -2147483647, -(1 << 31), 2147483647, -1025, 1023, -1024,
           5000, -5000, -9]] + [{"zeros": 16}] * 4,
         reference=ref_pow2div),
    Case("bitonic_sort_shared", "bitonic_sort_shared.cu", "bitonic_sort", (1, 1), (16, 1),
         [ints("bitonic", 16, -99, 99)], reference=ref_sorted),
    Case("restrict_ldg", "restrict_ldg.cu", "axpb", (2, 1), (8, 1),
         [ints("ldg", 14, -99, 99), {"zeros": 14}, -3, 11, 14], reference=ref_axpb),
    Case("template_reduce", "template_reduce.cu", "reduce_t", (2, 1), (8, 1),
         [ints("tmpl", 45, -99, 99), {"zeros": 2}, 45], reference=ref_template_reduce),
    Case("struct_param", "struct_param.cu", "affine", (1, 1), (8, 1),
         [ints("affine", 8, -9, 9), {"zeros": 8}, 3, 8],
         error="unsupported", substring="struct"),
    Case("device_global_counter", "device_global_counter.cu", "compact_positive", (1, 1),
         (8, 1), [ints("dgc", 8, -9, 9), {"zeros": 8}, 8], reference=ref_compact_positive),
    Case("compact_scan", "compact_scan.cu", "compact", (1, 1), (16, 1),
         [ints("compact", 16, -30, 30), {"zeros": 16}, {"zeros": 1}, 14], reference=ref_compact),
    Case("shared_atomics", "shared_atomics.cu", "block_stats", (2, 1), (8, 1),
         [ints("satom", 16, -5000, 5000), {"zeros": 8}], reference=ref_block_stats),
    Case("nested_loops_break", "nested_loops_break.cu", "two_sum", (1, 1), (8, 1),
         [[3, 9, -4, 12, 7, 0, 5, 250, -6, 1], 10, [12, 5, 8, -10, 1000, 257, 4, 21],
          {"zeros": 8}],
         reference=ref_two_sum),
    Case("div_64bit", "div_64bit.cu", "avg64", (1, 1), (8, 1),
         [[0x7FFFFFFF, -(1 << 31), 5, -5, 100, 7, 0, -1],
          [0x7FFFFFFF, -(1 << 31), 6, 6, -300, 7, 0, -1], {"zeros": 8}, 2],
         error="unsupported", substring="64-bit division", ptx="exact", reference=ref_avg64),
    Case("matmul_tiled_bounds", "matmul_tiled_bounds.cu", "MatrixMulTiled", (2, 2), (4, 4),
         [ints("mtb_a", 25, -9, 9), ints("mtb_b", 25, -9, 9), {"zeros": 25}, 5],
         reference=ref_matmul),
    Case("checksum24_spills", "checksum24.cu", "checksum24", (1, 1), (8, 1),
         [ints("ck24", 24, -(1 << 31), (1 << 31) - 1), {"zeros": 8}], reference=ref_checksum24),
    # ---- cooperative groups, constants, vector types, char data, 3-D, C++ names -----------------
    Case("cg_block_reduce", "cg_block_reduce.cu", "block_reduce_cg", (3, 1), (8, 1),
         [ints("cgblock", 20, -99, 99), {"zeros": 3}, 20], dynamic_shared=8 * 4,
         reference=ref_block_sums(8, 20, 0, 1)),
    Case("cg_tile_reduce", "cg_tile_reduce.cu", "tile_reduce", (2, 1), (8, 1),
         [ints("cgtile", 16, -99, 99), {"zeros": 1}, 14], reference=ref_tile_total),
    Case("cg_tile32_reduce", "cg_tile32_reduce.cu", "tile_reduce", (2, 1), (8, 1),
         [ints("cgtile", 16, -99, 99), {"zeros": 1}, 14],
         error="unsupported", substring="32-lane segments"),
    Case("constant_polynomial", "constant_polynomial.cu", "poly_eval", (2, 1), (8, 1),
         [ints("poly4", 14, -20, 20), {"zeros": 14}, 12], reference=ref_poly),
    Case("vector_int4_add", "vector_int4_add.cu", "add_int4", (1, 1), (4, 1),
         [ints("v4a", 16, -999, 999), ints("v4b", 16, -999, 999), {"zeros": 16}, 3],
         reference=ref_int4_add),
    Case("caesar_cipher", "caesar_cipher.cu", "caesar", (2, 1), (8, 1),
         [{"u8": list(b"Hello, World! xyz")}, {"u8": [0] * 17}, 15, 3], reference=ref_caesar),
    Case("rgba_grayscale", "rgba_grayscale.cu", "rgba_to_gray", (1, 1), (4, 3),
         [{"u8": ints("rgba", 48, 0, 255)}, {"u8": [0] * 12}, 4, 3], reference=ref_gray),
    Case("volume_3d", "volume_3d.cu", "scale_by_depth", (1, 1, 2), (3, 2, 2),
         [ints("vol", 24, -50, 50), {"zeros": 24}, 3, 2, 4], reference=ref_depth),
    Case("namespace_template", "namespace_template.cu", "axpy", (2, 1), (8, 1),
         [3, ints("nsx", 14, -99, 99), ints("nsy", 14, -99, 99), 14],
         reference=ref_saxpy(3, 0, 1, 2)),
    Case("short_saturate", "short_saturate.cu", "gain_saturate", (2, 1), (8, 1),
         [{"s16": [100, -100, 20000, -20000, 32767, -32768, 0, 1, 16384, -16385, 7, -7, 3, 5]},
          {"s16": [0] * 14}, 14, 3], reference=ref_saturate),
    # ---- launches sized for a real GPU ----------------------------------------------------------
    Case("launch_block_256", "saxpy_size_t.cu", "saxpy", (1, 1), (256, 1),
         [20, 3, ints("sx", 20, -99, 99), ints("sy", 20, -99, 99)],
         error="resource", substring="256 threads"),
    Case("launch_block_16x16", "matmul_naive.cu", "matMul", (1, 1), (16, 16),
         [ints("mm_a", 25, -9, 9), ints("mm_b", 25, -9, 9), {"zeros": 25}, 5],
         error="resource", substring="256 threads"),
    Case("launch_grid_40", "saxpy_size_t.cu", "saxpy", (40, 1), (4, 1),
         [20, 3, ints("sx", 20, -99, 99), ints("sy", 20, -99, 99)],
         error="resource", substring="40 blocks"),
    Case("launch_arrays_too_big", "saxpy_grid_stride.cu", "saxpy_gs", (4, 1), (16, 1),
         [64, 2, ints("big_x", 64, -9, 9), ints("big_y", 64, -9, 9)],
         error="resource", substring="global memory holds 127 words"),
    Case("index_3d", "index_3d.cu", "global_ids", (2, 1), (4, 2), [{"zeros": 16}],
         reference=ref_global_ids),
    Case("clock_timing", "clock_timing.cu", "timed_loop", (1, 1), (4, 1),
         [{"zeros": 4}, {"zeros": 2}], error="unsupported", substring="%clock64"),
    Case("syncthreads_count", "syncthreads_count.cu", "count_block", (1, 1), (8, 1),
         [[1, -2, 3, 200, 0, 5, -1, 4], {"zeros": 2}],
         error="unsupported", substring="bar.red"),
    Case("fnv1a_64", "fnv1a_64.cu", "fnv1a64", (1, 1), (8, 1),
         [ints("fnv", 8, -(1 << 31), (1 << 31) - 1), {"zeros": 8}, {"zeros": 8}, 8],
         reference=ref_fnv1a64),
    Case("bits_64", "bits_64.cu", "bits64", (1, 1), (8, 1),
         [[0, 1, -1, 2147483647, 5, 0, 7, 3], [0, 0, -1, 5, -(1 << 31), 1, 0, 3], {"zeros": 8}],
         error="unsupported", substring="bfi.b64", ptx="exact", reference=ref_bits64),
    # ---- 64-bit intermediates that a user expects to be exact --------------------------------
    Case("midpoint_int64", "midpoint_int64.cu", "midpoint", (1, 1), (8, 1),
         [[-7, 5, -5, 0, 7, 2147483647, -(1 << 31), 1 << 30],
          [-8, 6, 6, 0, 8, 2147483647, -(1 << 31), 1 << 30], {"zeros": 8}, 8],
         reference=ref_midpoint),
    Case("average_scaled", "average_scaled.cu", "average_scaled", (1, 1), (8, 1),
         [[2147483647, 1 << 30, -7, 5, -2147483647, 3, 0, 1],
          [2147483647, 1 << 30, -8, 6, -2147483647, -3, 0, 2], {"zeros": 8}, 1, 8],
         reference=ref_average_scaled),
    Case("isqrt_binary_search", "isqrt_binary_search.cu", "isqrt_bs", (1, 1), (8, 1),
         [[0, 1, 2, 15, 16, 99999, 1000000, 123456789], {"zeros": 8}, 8],
         reference=ref_isqrt),
    Case("saturating_add_int64", "saturating_add_int64.cu", "sat_add", (1, 1), (8, 1),
         [[2147483647, 2147483647, -(1 << 31), 5, -5, 0, 7, -7],
          [2147483647, 1, -(1 << 31), 6, 6, 0, 8, -8], {"zeros": 8}, 8],
         reference=ref_sat_add),
    Case("fixed_point_div", "fixed_point_div.cu", "fx_div", (1, 1), (8, 1),
         [[1 << 20, 3, -(1 << 20), 5, -5, 100000, 7, -7], [3, 2, 7, 6, 6, 3, 8, -8],
          {"zeros": 8}, 8],
         error="unsupported", substring="64-bit division", ptx="exact", reference=ref_fx_div),
    # ---- faults and limits ----------------------------------------------------------------------
    Case("spin_wait", "spin_wait.cu", "spin", (1, 1), (4, 1), [[0], {"zeros": 4}],
         error="launch", substring="did not finish within", ptx_step_limit=20_000),
    Case("oob_read_last_array", "oob_read.cu", "shift_left_last", (1, 1), (8, 1),
         [{"zeros": 8}, ints("oob", 8, -9, 9), 8],
         error="launch", substring="out of bounds of every argument array"),
    Case("oob_read_into_next_array", "oob_read.cu", "shift_left", (1, 1), (8, 1),
         [ints("oob", 8, -9, 9), {"zeros": 8}, 8],
         error="launch", substring="out of bounds"),
    Case("unsigned_index_underflow_const", "stencil_unsigned_edges.cu", "blur3", (1, 1), (8, 1),
         [{"zeros": 8}, ints("blur", 8, -9, 9), 8],
         error="launch", substring="global address"),
    Case("unsigned_index_underflow", "diff_unsigned.cu", "backward_diff", (1, 1), (8, 1),
         [{"zeros": 8}, ints("bdiff", 8, -9, 9), 8],
         error="launch", substring="global address"),
    Case("barrier_divergent", "barrier_divergent.cu", "bad_barrier", (1, 1), (16, 1),
         [ints("bar", 16, -9, 9)], error="launch", substring="__syncthreads() reached by"),
    Case("unrolled_polynomial", "unrolled_polynomial.cu", "big_unroll", (1, 1), (8, 1),
         [ints("poly", 8, -1000, 1000), {"zeros": 8}], reference=ref_big_unroll),
    Case("many_live_values", "many_live_values.cu", "fold40", (1, 1), (4, 1),
         [ints("fold", 40, -1000, 1000), {"zeros": 4}], error="resource",
         substring="registers live at once", ptx="exact", reference=ref_fold40),
]
