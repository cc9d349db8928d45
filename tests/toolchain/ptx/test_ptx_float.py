"""float32 PTX on the PTX interpreter, bit for bit as an NVIDIA GPU computes it.

Hand-written snippets of every instruction family are checked against references that do not
go through qgpu.machine.float32 where one exists: numpy (round to nearest even), exact rational
arithmetic rounded by the helper ``rounded`` (the directed modes), Python's integer rounding
(conversions); the PTX-specific conventions (canonical NaN, ``.ftz``, ``.sat``) are applied
explicitly. Real CUDA compiled by the project's compiler route (NVRTC or nvcc), and by nvcc with
``-use_fast_math`` (``compile_cuda`` takes no options), runs against numpy float32. The
approximate instructions (ex2/lg2/sin/cos/tanh/rsqrt, div.approx/full, sqrt/rcp.approx) parse
(their fixed algorithms: tests/machine/test_approx.py); double and half precision are rejected
naming the instruction and its line.
"""

from __future__ import annotations

import functools
import math
import shutil
import subprocess
from fractions import Fraction

import numpy as np
import pytest

from qgpu.errors import UnsupportedError
from qgpu.machine import float32 as F
from qgpu.machine.float32 import Round
from qgpu.toolchain.ptx.ast import Module
from qgpu.toolchain.ptx.globals import global_layout
from qgpu.toolchain.ptx.interp import find_kernel
from qgpu.toolchain.ptx.parser import parse_module

from .helpers import Memory, alu, entry, launch, read

CANON = F.CANONICAL_NAN
SIGN = 0x8000_0000
MAG = 0x7FFF_FFFF
MAX_F = Fraction(float(np.finfo(np.float32).max))
TINY = np.float32(np.finfo(np.float32).tiny)  # the smallest normal


def word(x: object) -> int:
    """The binary32 word of a number (a Python float or an np.float32)."""
    return int(np.array(x, dtype=np.float32).view(np.uint32))


def value(w: int) -> np.float32:
    return np.array(w & 0xFFFFFFFF, dtype=np.uint32).view(np.float32)[()]


def expect(x: np.float32) -> int:
    """The word a GPU writes for a numpy result: any NaN is the canonical NaN."""
    return CANON if np.isnan(x) else word(x)


def flush(x: np.float32) -> np.float32:
    """.ftz: a subnormal becomes a zero of its sign."""
    x = np.float32(x)
    return np.float32(math.copysign(0.0, x)) if 0 < abs(x) < TINY else x


def rounded(q: Fraction, mode: Round, zero_sign: int = 0) -> int:
    """The word nearest to an exact rational by mode, found with numpy's nextafter (independent
    of qgpu.machine.float32): numpy gives one neighbour, the mode picks between the two."""
    if q == 0:
        return zero_sign << 31
    neg = q < 0
    if abs(q) > MAX_F:  # overflow: to infinity or the largest finite, by mode
        to_inf = mode == Round.RN and abs(q) >= MAX_F + Fraction(2) ** 103 or \
            mode == (Round.RM if neg else Round.RP)
        big = np.float32(np.inf) if to_inf else np.float32(np.finfo(np.float32).max)
        return word(-big if neg else big)
    r = np.float32(float(q))  # within one step of q (the double rounding may miss)
    if Fraction(float(r)) == q:
        return word(r)
    if Fraction(float(r)) < q:
        lo, hi = r, np.nextafter(r, np.float32(np.inf))
    else:
        lo, hi = np.nextafter(r, np.float32(-np.inf)), r
    if mode == Round.RM or (mode == Round.RZ and not neg):
        pick = lo
    elif mode == Round.RP or mode == Round.RZ:
        pick = hi
    else:
        dl, dh = q - Fraction(float(lo)), Fraction(float(hi)) - q
        pick = lo if dl < dh or (dl == dh and word(lo) % 2 == 0) else hi
    return word(pick) if pick != 0 else (SIGN if neg else 0)


def exact(w: int) -> Fraction:
    return Fraction(float(value(w)))


# -- values ------------------------------------------------------------------------------------
NAN2 = 0x7FC0_0001  # a NaN that is not the canonical one
NEG_NAN = 0xFFC0_0000
SUB = word(np.float32(1e-40))  # subnormal
SUB_MIN = 1  # the smallest subnormal
SPECIAL = [
    word(v) for v in (0.0, -0.0, 1.0, -1.0, 1.5, -2.5, 0.1, 3.0, 1e30, -7e-3, np.inf, -np.inf,
                      3.4028235e38, -3.4028235e38, 2.5, 0.5, -0.5, 16777216.0, 1.17549435e-38)
] + [CANON, NAN2, NEG_NAN, SUB, SUB | SIGN, SUB_MIN]
FINITE = [w for w in SPECIAL if not (math.isnan(value(w)) or math.isinf(value(w)))]
# values where rounding is visible: operands with many significant bits
ODD = [word(v) for v in (1.1, -3.3, 7.77e-3, 12345.679, -0.3, 2.0 ** 24 + 2, 1e-3, 6.1e-39,
                         -1.7e-39, 9.5e35, 0.7)]


def pairs(xs: list[int], ys: list[int] | None = None) -> list[tuple[int, int]]:
    return [(a, b) for a in xs for b in (xs if ys is None else ys)]


# -- the harness -------------------------------------------------------------------------------
def run(lines: str, a: list[int], b: list[int] | None = None,
        c: list[int] | None = None) -> list[tuple[int, ...]]:
    """``alu`` with the results as unsigned words."""
    return [tuple(v & 0xFFFFFFFF for v in r) for r in alu(lines, a, b, c)]


def first(lines: str, a: list[int], b: list[int] | None = None,
          c: list[int] | None = None) -> list[int]:
    return [r[0] for r in run(lines, a, b, c)]


def check(got: list[int], want: list[int], inputs: list) -> None:
    bad = [(i, f"{g:#010x}", f"{w:#010x}") for i, g, w in zip(inputs, got, want, strict=True)
           if g != w]
    assert not bad, bad[:8]


# -- arithmetic --------------------------------------------------------------------------------
def _np_binary(op: str, a: int, b: int) -> np.float32:
    x, y = value(a), value(b)
    with np.errstate(all="ignore"):
        return {"add": x + y, "sub": x - y, "mul": x * y, "div": x / y}[op]


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_add_sub_mul_round_to_nearest_even_as_numpy(op):
    ps = pairs(SPECIAL) + pairs(ODD)
    for spelling in (f"{op}.f32", f"{op}.rn.f32"):
        got = first(f"    {spelling} %r10, %f1, %f2;", *map(list, zip(*ps, strict=True)))
        check(got, [expect(_np_binary(op, a, b)) for a, b in ps], ps)


def _exact_binary(op: str, a: int, b: int) -> Fraction:
    x, y = exact(a), exact(b)
    return {"add": x + y, "sub": x - y, "mul": x * y, "div": x / y if y else None}[op]


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
def test_directed_rounding_against_exact_arithmetic(op, mode):
    rnd = {"rz": Round.RZ, "rm": Round.RM, "rp": Round.RP}[mode]
    ps = pairs(FINITE + ODD)
    got = first(f"    {op}.{mode}.f32 %r10, %f1, %f2;", *map(list, zip(*ps, strict=True)))
    want = []
    for a, b in ps:
        q = _exact_binary(op, a, b)
        if q == 0:  # an exact zero: IEEE's sign rules
            if op == "mul":
                zs = (a ^ b) >> 31
            else:
                bb = b ^ (SIGN if op == "sub" else 0)
                both_zero = exact(a) == 0 and exact(bb) == 0
                zs = ((a | bb) >> 31 if rnd == Round.RM else (a & bb) >> 31) if both_zero \
                    else int(rnd == Round.RM)
            want.append(zs << 31)
        else:
            want.append(rounded(q, rnd))
    check(got, want, ps)


def test_fma_and_mad_round_once():
    triples = [(a, b, c) for a in ODD[:6] for b in ODD for c in (ODD[1], ODD[3], word(1.0),
                                                              word(-1e-30))]
    a, b, c = (list(x) for x in zip(*triples, strict=True))
    for mode, rnd in (("rn", Round.RN), ("rz", Round.RZ), ("rm", Round.RM), ("rp", Round.RP)):
        res = run(f"    fma.{mode}.f32 %r10, %f1, %f2, %f3;\n"
                  f"    mad.{mode}.f32 %r11, %f1, %f2, %f3;", a, b, c)
        want = [rounded(exact(x) * exact(y) + exact(z), rnd) for x, y, z in triples]
        check([r[0] for r in res], want, triples)
        check([r[1] for r in res], want, triples)
    # the one rounding is visible: a·b − a·b rounded is the product's rounding error, not 0
    x = word(1.1)
    got = first("    mul.f32 %f5, %f1, %f1;\n    neg.f32 %f6, %f5;\n"
                "    fma.rn.f32 %r10, %f1, %f1, %f6;", [x])
    assert got == [rounded(exact(x) * exact(x) - exact(F.mul(x, x)), Round.RN)] != [0]
    specials = run("    fma.rn.f32 %r10, %f1, %f2, %f3;",
                   [word(np.inf), word(0.0), CANON, word(np.inf)],
                   [word(0.0), word(1.0), word(1.0), word(1.0)],
                   [word(1.0), word(-0.0), word(1.0), word(-np.inf)])
    assert [r[0] for r in specials] == [CANON, 0, CANON, CANON]


def test_ftz_flushes_subnormal_inputs_and_results():
    tiny = word(np.float32(1e-38))  # normal; tiny * 0.5 is subnormal
    half = word(0.5)
    res = run("    mul.f32 %r10, %f1, %f2;\n    mul.ftz.f32 %r11, %f1, %f2;\n"
              "    add.ftz.f32 %r12, %f1, %f3;\n    add.f32 %r13, %f1, %f3;",
              [tiny, SUB, SUB | SIGN], [half, word(1.0), word(1.0)],
              [word(0.0), word(0.0), word(0.0)])
    assert res[0][:2] == (word(np.float32(1e-38) * np.float32(0.5)), 0)  # result flushed
    assert res[1][1] == 0 and res[1][3] == SUB  # a subnormal input flushed (or kept)
    assert res[1][2] == 0
    assert res[2][1] == SIGN and res[2][2] == 0  # -sub·1 = -0; -0 + 0 = +0


def test_sat_clamps_to_zero_one():
    xs = [word(v) for v in (0.25, 1.5, -3.0, -0.0, np.inf, -np.inf)] + [CANON, NEG_NAN]
    res = run("    add.sat.f32 %r10, %f1, %f3;\n    mul.rz.ftz.sat.f32 %r11, %f1, %f2;\n"
              "    fma.rn.sat.f32 %r12, %f1, %f2, %f3;", xs, [word(1.0)] * len(xs),
              [word(0.0)] * len(xs))
    want = [word(0.25), word(1.0), 0, 0, word(1.0), 0, 0, 0]
    check([r[0] for r in res], want, xs)
    check([r[1] for r in res], want, xs)
    check([r[2] for r in res], want, xs)


def test_neg_and_abs_flip_or_clear_the_sign_and_canonicalise_nan():
    xs = SPECIAL
    res = run("    neg.f32 %r10, %f1;\n    abs.f32 %r11, %f1;\n    neg.ftz.f32 %r12, %f1;\n"
              "    abs.ftz.f32 %r13, %f1;", xs)
    for x, (neg, ab, neg_ftz, abs_ftz) in zip(xs, res, strict=True):
        if math.isnan(value(x)):
            assert (neg, ab, neg_ftz, abs_ftz) == (CANON,) * 4
            continue
        assert (neg, ab) == (x ^ SIGN, x & MAG), hex(x)
        f = word(flush(value(x)))
        assert (neg_ftz, abs_ftz) == (f ^ SIGN, f & MAG), hex(x)


def _min_max_ref(a: int, b: int, smaller: bool, nan_wins: bool = False) -> int:
    x, y = value(a), value(b)
    if np.isnan(x) or np.isnan(y):
        if nan_wins or (np.isnan(x) and np.isnan(y)):
            return CANON
        return b if np.isnan(x) else a
    if x == y == 0:  # -0 < +0
        return (a | b if smaller else a & b) & SIGN
    return a if (x < y) == smaller else b


def test_min_max_with_nan_and_signed_zeros():
    ps = pairs(SPECIAL)
    a, b = (list(x) for x in zip(*ps, strict=True))
    res = run("    min.f32 %r10, %f1, %f2;\n    max.f32 %r11, %f1, %f2;\n"
              "    min.NaN.f32 %r12, %f1, %f2;\n    max.ftz.NaN.f32 %r13, %f1, %f2;", a, b)
    check([r[0] for r in res], [_min_max_ref(x, y, True) for x, y in ps], ps)
    check([r[1] for r in res], [_min_max_ref(x, y, False) for x, y in ps], ps)
    check([r[2] for r in res], [_min_max_ref(x, y, True, True) for x, y in ps], ps)
    want = [_min_max_ref(word(flush(value(x))), word(flush(value(y))), False, True)
            for x, y in ps]
    check([r[3] for r in res], want, ps)


# -- comparisons -------------------------------------------------------------------------------
_ORDERED = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
            "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}


def _compare_ref(cmp: str, a: int, b: int) -> int:
    x, y = float(value(a)), float(value(b))
    nan = math.isnan(x) or math.isnan(y)
    if cmp == "num":
        return int(not nan)
    if cmp == "nan":
        return int(nan)
    if cmp in _ORDERED:
        return int(not nan and _ORDERED[cmp](x, y))
    return int(nan or _ORDERED[cmp[:-1]](x, y))


CMPS = ["eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num",
        "nan"]


@pytest.mark.parametrize("cmp", CMPS)
def test_setp_all_fourteen_comparisons(cmp):
    ps = pairs(SPECIAL[:8] + [CANON, NAN2, SUB, word(np.inf), word(-np.inf)])
    a, b = (list(x) for x in zip(*ps, strict=True))
    res = run(f"    setp.{cmp}.f32 %p1|%p2, %f1, %f2;\n    selp.u32 %r10, 1, 0, %p1;\n"
              f"    selp.u32 %r11, 1, 0, %p2;\n"
              f"    setp.{cmp}.ftz.f32 %p3, %f1, %f2;\n    selp.u32 %r12, 1, 0, %p3;", a, b)
    want = [_compare_ref(cmp, x, y) for x, y in ps]
    check([r[0] for r in res], want, ps)
    check([r[1] for r in res], [1 - v for v in want], ps)  # q is the negated compare
    want_ftz = [_compare_ref(cmp, word(flush(value(x))), word(flush(value(y)))) for x, y in ps]
    check([r[2] for r in res], want_ftz, ps)


@pytest.mark.parametrize("combine", ["and", "or", "xor"])
def test_setp_combines_with_a_predicate(combine):
    fn = {"and": lambda p, c: p & c, "or": lambda p, c: p | c, "xor": lambda p, c: p ^ c}
    ps = pairs([word(v) for v in (1.0, 2.0, -0.0)] + [CANON])
    a, b = (list(x) for x in zip(*ps, strict=True))
    c = [word(float(i % 2)) for i in range(len(ps))]  # the predicate: c[t] != 0
    res = run(f"    setp.ne.f32 %p3, %f3, 0f00000000;\n"
              f"    setp.ltu.{combine}.f32 %p1|%p2, %f1, %f2, %p3;\n"
              f"    selp.u32 %r10, 1, 0, %p1;\n    selp.u32 %r11, 1, 0, %p2;\n"
              f"    setp.gt.{combine}.ftz.f32 %p4, %f1, %f2, !%p3;\n"
              f"    selp.u32 %r12, 1, 0, %p4;", a, b, c)
    for (x, y), cw, r in zip(ps, c, res, strict=True):
        p, pc = _compare_ref("ltu", x, y), int(value(cw) != 0)
        assert r[:3] == (fn[combine](p, pc), fn[combine](1 - p, pc),
                         fn[combine](_compare_ref("gt", x, y), 1 - pc)), (hex(x), hex(y), pc)


def test_set_writes_all_ones_or_one_point_zero():
    ps = pairs([word(v) for v in (1.0, 2.0)] + [CANON])
    a, b = (list(x) for x in zip(*ps, strict=True))
    res = run("    set.lt.u32.f32 %r10, %f1, %f2;\n    set.gtu.s32.f32 %r11, %f1, %f2;\n"
              "    set.ge.f32.f32 %r12, %f1, %f2;\n    setp.eq.f32 %p1, %f1, %f1;\n"
              "    set.lt.and.ftz.u32.f32 %r13, %f1, %f2, %p1;", a, b)
    for (x, y), r in zip(ps, res, strict=True):
        lt, gtu, ge = (_compare_ref(c, x, y) for c in ("lt", "gtu", "ge"))
        assert r == (lt * 0xFFFFFFFF, gtu * 0xFFFFFFFF, ge * word(1.0), lt * 0xFFFFFFFF)


# -- conversions -------------------------------------------------------------------------------
def _int_ref(x: np.float32, mode: str, bits: int, signed: bool) -> int:
    """float -> integer as PTX defines it: rounded, saturated, NaN -> 0 (as a word)."""
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if np.isnan(x):
        v = 0
    elif np.isinf(x):
        v = lo if x < 0 else hi
    else:
        q = Fraction(float(x))
        v = {"rzi": math.trunc, "rmi": math.floor, "rpi": math.ceil, "rni": round}[mode](q)
        v = min(max(v, lo), hi)
    return v & ((1 << 64) - 1)


INT_SOURCES = [0, 1, -1, 7, 2**24 + 1, 2**24 + 3, -(2**24 + 1), 2**31 - 1, -(2**31), 123456789,
               -98765431, 0x7FFFFFC0, 65535, 65536 * 3 + 1]


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_cvt_integers_to_float_every_width_and_mode(mode):
    rnd = {"rn": Round.RN, "rz": Round.RZ, "rm": Round.RM, "rp": Round.RP}[mode]
    xs = [x & 0xFFFFFFFF for x in INT_SOURCES]
    his = [(x * 2654435761) & 0xFFFFFFFF for x in range(len(xs))]  # high words for 64-bit
    lines = f"""
    cvt.rn.f32.s32 %r13, %r2;
    cvt.{mode}.f32.s32 %r10, %r2;
    cvt.{mode}.f32.u32 %r11, %r2;
    cvt.u64.u32 %rd20, %r3;
    shl.b64 %rd20, %rd20, 32;
    cvt.u64.u32 %rd21, %r2;
    or.b64 %rd20, %rd20, %rd21;
    cvt.{mode}.f32.s64 %r12, %rd20;
    cvt.{mode}.f32.u64 %r13, %rd20;"""
    res = run(lines, xs, his)
    for x, h, r in zip(xs, his, res, strict=True):
        s = x - (1 << 32) if x >> 31 else x
        wide = h << 32 | x
        swide = wide - (1 << 64) if wide >> 63 else wide
        assert r == (rounded(Fraction(s), rnd), rounded(Fraction(x), rnd),
                     rounded(Fraction(swide), rnd), rounded(Fraction(wide), rnd)), hex(x)
    small = run(f"    cvt.u16.u32 %rs1, %r2;\n    cvt.{mode}.f32.s16 %r10, %rs1;\n"
                f"    cvt.{mode}.f32.u16 %r11, %rs1;\n    cvt.{mode}.f32.s8 %r12, %r2;\n"
                f"    cvt.{mode}.f32.u8 %r13, %r2;", xs)
    for x, r in zip(xs, small, strict=True):
        h, b = x & 0xFFFF, x & 0xFF
        sh, sb = h - (h >> 15 << 16), b - (b >> 7 << 8)
        assert r == (word(sh), word(h), word(sb), word(b)), hex(x)


def test_cvt_integer_to_float_rn_matches_numpy_and_sat_clamps():
    xs = [x & 0xFFFFFFFF for x in INT_SOURCES]
    res = run("    cvt.rn.f32.s32 %r10, %r2;\n    cvt.rn.f32.u32 %r11, %r2;\n"
              "    cvt.rn.sat.f32.s32 %r12, %r2;", xs)
    for x, r in zip(xs, res, strict=True):
        s = np.int32(np.uint32(x).view(np.int32))
        assert r[:2] == (word(np.float32(s)), word(np.float32(np.uint32(x))))
        assert r[2] == word(min(max(float(s), 0.0), 1.0))


FLOAT_SOURCES = [word(v) for v in (0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.7, -3.7, 1e10,
                                   -1e10, 4e9, 2.0**31, -2.0**31, 2.0**63, -2.0**63, 1e19, 2.0**64,
                                   -1e30, 255.5, -128.5, 70000.7, np.inf, -np.inf)] + \
    [CANON, NEG_NAN, SUB, SUB | SIGN, word(-4294967296.0 - 512.0)]


@pytest.mark.parametrize("mode", ["rni", "rzi", "rmi", "rpi"])
def test_cvt_float_to_integers_saturates_and_nan_is_zero(mode):
    xs = FLOAT_SOURCES
    res = run(f"    cvt.{mode}.s32.f32 %r10, %f1;\n    cvt.{mode}.u32.f32 %r11, %f1;\n"
              f"    cvt.{mode}.s16.f32 %r12, %f1;\n    cvt.{mode}.u8.f32 %r13, %f1;", xs)
    for x, r in zip(xs, res, strict=True):
        v = value(x)
        s16 = _int_ref(v, mode, 16, True)
        want = (_int_ref(v, mode, 32, True) & 0xFFFFFFFF, _int_ref(v, mode, 32, False),
                (s16 | (0xFFFF0000 if s16 & 0x8000 else 0)) & 0xFFFFFFFF,
                _int_ref(v, mode, 8, False))
        assert r == want, (v, [hex(g) for g in r], [hex(w) for w in want])
    wide = run(f"    cvt.{mode}.s64.f32 %rd20, %f1;\n    cvt.{mode}.u64.f32 %rd21, %f1;\n"
               f"    cvt.u32.u64 %r10, %rd20;\n    shr.u64 %rd22, %rd20, 32;\n"
               f"    cvt.u32.u64 %r11, %rd22;\n    cvt.u32.u64 %r12, %rd21;\n"
               f"    shr.u64 %rd23, %rd21, 32;\n    cvt.u32.u64 %r13, %rd23;", xs)
    for x, r in zip(xs, wide, strict=True):
        s, u = _int_ref(value(x), mode, 64, True), _int_ref(value(x), mode, 64, False)
        assert r == (s & 0xFFFFFFFF, s >> 32, u & 0xFFFFFFFF, u >> 32), value(x)


def test_cvt_float_to_integer_ftz_flushes_first():
    xs = [SUB, SUB | SIGN]
    res = run("    cvt.rpi.s32.f32 %r10, %f1;\n    cvt.rpi.ftz.s32.f32 %r11, %f1;\n"
              "    cvt.rmi.s32.f32 %r12, %f1;\n    cvt.rmi.ftz.sat.s32.f32 %r13, %f1;", xs)
    assert res == [(1, 0, 0, 0), (0, 0, 0xFFFFFFFF, 0)]


def test_cvt_float_to_float_rounds_to_integral_values():
    xs = FLOAT_SOURCES + [word(v) for v in (0.49999997, -0.49999997, 8388607.5, 1e-3)]
    res = run("    cvt.rni.f32.f32 %r10, %f1;\n    cvt.rzi.f32.f32 %r11, %f1;\n"
              "    cvt.rmi.f32.f32 %r12, %f1;\n    cvt.rpi.f32.f32 %r13, %f1;", xs)
    for x, r in zip(xs, res, strict=True):
        v = value(x)
        assert r == tuple(expect(f(v)) for f in (np.rint, np.trunc, np.floor, np.ceil)), v
    res = run("    cvt.rpi.ftz.f32.f32 %r10, %f1;\n    cvt.ftz.f32.f32 %r11, %f1;\n"
              "    cvt.sat.f32.f32 %r12, %f1;\n    cvt.rni.ftz.sat.f32.f32 %r13, %f1;", xs)
    for x, r in zip(xs, res, strict=True):
        v, fv = value(x), flush(value(x))
        sat = 0 if np.isnan(v) else word(min(max(v, np.float32(0)), np.float32(1)) + 0)
        sat_int = 0 if np.isnan(v) else word(min(max(np.rint(fv), 0), 1) + 0)
        assert r == (expect(np.ceil(fv)), expect(fv), sat, sat_int), v


# -- classification, copysign, division, roots -------------------------------------------------
def test_testp_classes():
    xs = SPECIAL
    tests = ["finite", "infinite", "number", "notanumber", "normal", "subnormal"]
    lines = "".join(f"    testp.{t}.f32 %p1, %f1;\n    selp.u32 %r{20 + i}, 1, 0, %p1;\n"
                    f"    shl.b32 %r{20 + i}, %r{20 + i}, {i};\n"
                    f"    or.b32 %r10, %r10, %r{20 + i};\n" for i, t in enumerate(tests))
    for x, got in zip(xs, first(lines, xs), strict=True):
        v = value(x)
        sub = v != 0 and abs(v) < TINY
        flags = [np.isfinite(v), np.isinf(v), not np.isnan(v), np.isnan(v),
                 np.isfinite(v) and v != 0 and not sub, sub]
        assert got == sum(int(f) << i for i, f in enumerate(flags)), hex(x)


def test_copysign_takes_the_sign_of_the_first_operand():
    ps = pairs([word(v) for v in (1.5, -2.0, 0.0, -0.0, np.inf)] + [CANON, NEG_NAN, SUB])
    a, b = (list(x) for x in zip(*ps, strict=True))
    got = first("    copysign.f32 %r10, %f1, %f2;", a, b)
    # the magnitude of b with a's sign: numpy's copysign(b, a) (a bit operation: a NaN
    # magnitude keeps its payload)
    check(got, [word(np.copysign(value(y), value(x))) for x, y in ps], ps)


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_div_sqrt_rcp_correctly_rounded(mode):
    rnd = {"rn": Round.RN, "rz": Round.RZ, "rm": Round.RM, "rp": Round.RP}[mode]
    ps = pairs(FINITE + ODD)
    a, b = (list(x) for x in zip(*ps, strict=True))
    res = run(f"    div.{mode}.f32 %r10, %f1, %f2;\n    rcp.{mode}.f32 %r11, %f2;\n"
              f"    sqrt.{mode}.f32 %r12, %f1;", a, b)
    for (x, y), r in zip(ps, res, strict=True):
        fx, fy = exact(x), exact(y)
        sign = (x ^ y) >> 31
        if fy == 0:
            want_div = CANON if fx == 0 else sign << 31 | 0x7F800000
            want_rcp = (y & SIGN) | 0x7F800000
        else:
            want_div = rounded(fx / fy, rnd, sign)
            want_rcp = rounded(1 / fy, rnd, y >> 31)
        if mode == "rn":  # numpy divides correctly rounded too
            assert want_div == expect(_np_binary("div", x, y))
        assert r[:2] == (want_div, want_rcp), (value(x), value(y))
        if fx < 0:
            want_sqrt = CANON
        elif fx == 0:
            want_sqrt = x
        else:  # bracket the root between neighbours: lo² <= x < hi²
            guess = np.float32(np.sqrt(np.float64(value(x))))
            lo = guess if exact(word(guess)) ** 2 <= fx else np.nextafter(guess, np.float32(0))
            hi = lo if exact(word(lo)) ** 2 == fx else np.nextafter(lo, np.float32(np.inf))
            if rnd == Round.RN:
                want_sqrt = word(np.sqrt(value(x)))
            else:
                want_sqrt = word(hi if rnd == Round.RP else lo)
        assert r[2] == want_sqrt, (mode, value(x))


def test_div_sqrt_rcp_specials_and_ftz():
    xs = [word(v) for v in (np.inf, -np.inf, 0.0, -0.0, -4.0, 1.0)] + [CANON, SUB]
    ys = [word(v) for v in (np.inf, 2.0, -0.0, 3.0, 2.0, 0.0)] + [word(1.0), word(1.0)]
    res = run("    div.rn.f32 %r10, %f1, %f2;\n    sqrt.rn.f32 %r11, %f1;\n"
              "    rcp.rn.ftz.f32 %r12, %f1;\n    div.rz.ftz.f32 %r13, %f1, %f2;", xs, ys)
    with np.errstate(all="ignore"):
        for x, y, r in zip(xs, ys, res, strict=True):
            fx, fy = flush(value(x)), flush(value(y))
            assert r[:2] == (expect(value(x) / value(y)), expect(np.sqrt(value(x))))
            assert r[2] == expect(flush(np.float32(1) / fx))
            if np.isfinite(fx / fy) and fx / fy != 0:
                continue  # finite quotients are checked by the rounding tests
            assert r[3] == expect(fx / fy), (value(x), value(y))


# -- data movement, variables, shared memory, atomics ------------------------------------------
def test_moves_selects_bit_casts_and_immediates():
    xs = [word(v) for v in (1.5, -2.0)] + [NAN2]
    res = run("    mov.f32 %f5, 0fBF800000;\n    mov.b32 %r10, %f5;\n"
              "    setp.gt.f32 %p1, %f1, 0f00000000;\n    selp.f32 %f6, %f1, 0f40490FDB, %p1;\n"
              "    mov.b32 %r11, %f6;\n    mov.b32 %f7, %r2;\n    mov.f32 %f8, %f7;\n"
              "    mov.b32 %r12, %f8;\n    add.f32 %f9, %f1, 0f3F800000;\n"
              "    mov.b32 %r13, %f9;", xs)
    pi = 0x40490FDB
    assert [r[0] for r in res] == [0xBF800000] * 3
    assert [r[1] for r in res] == [xs[0], pi, pi]  # mov/selp keep the bits (NaN payloads too)
    assert [r[2] for r in res] == xs
    assert [r[3] for r in res] == [word(2.5), word(-1.0), CANON]


VECTOR = """
    .reg .f32 %f<16>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [k_param_0];
    ld.param.f32 %f9, [k_param_1];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 16;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd3];
    mul.rn.f32 %f5, %f1, %f9;
    ld.global.v2.f32 {%f6, _}, [%rd3+8];
    add.f32 %f7, %f6, %f4;
    st.global.v4.f32 [%rd3], {%f5, %f7, %f2, %f1};
    st.global.v2.f32 [%rd3+16], {0f3F800000, %f9};
    ret;
"""


def test_vector_loads_stores_and_float_parameters():
    m = parse_module(entry(VECTOR, ".param .u64 k_param_0, .param .f32 k_param_1"))
    xs = [word(v) for v in (1.5, -2.0, 0.25, 3.0)]
    mem = Memory()
    mem.array(3)  # a 16-byte aligned vector
    p = mem.array(xs + [0, 0])
    got = read(launch(m, "k", [p, word(1.25)], mem, block=(1, 1)), p, 6)
    want = [word(np.float32(1.5) * np.float32(1.25)), word(np.float32(0.25) + np.float32(3.0)),
            xs[1], xs[0], word(1.0), word(1.25)]
    assert [g & 0xFFFFFFFF for g in got] == want


MODULE_VARS = """
.global .align 4 .f32 gscale = 0f3FC00000;
.const .align 4 .f32 ctab[3] = {0f3F000000, 0fBF800000, 0f40000000};
.const .align 4 .b8 cbytes[8] = {0, 0, 128, 63, 0, 0, 0, 192};
"""
MODULE_BODY = """
    .reg .f32 %f<16>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .shared .align 4 .f32 s[2];
    ld.param.u64 %rd1, [k_param_0];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    mov.u64 %rd3, ctab;
    add.s64 %rd4, %rd3, %rd2;
    ld.const.f32 %f1, [%rd4];
    ld.global.f32 %f2, [gscale];
    mul.f32 %f3, %f1, %f2;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, s;
    add.s32 %r4, %r3, %r2;
    st.shared.f32 [%r4], %f3;
    bar.sync 0;
    xor.b32 %r5, %r2, 4;
    add.s32 %r6, %r3, %r5;
    ld.shared.f32 %f4, [%r6];
    ld.const.f32 %f5, [cbytes+4];
    add.f32 %f6, %f4, %f5;
    ld.const.f32 %f7, [ctab+8];
    mul.f32 %f8, %f7, %f6;
    add.s64 %rd5, %rd1, %rd2;
    st.global.f32 [%rd5], %f8;
    ret;
"""


def test_module_variables_initialisers_and_shared_arrays():
    m = parse_module(entry(MODULE_BODY, decls=MODULE_VARS))
    assert m.global_vars["gscale"].init == bytes.fromhex("0000c03f")
    assert m.global_vars["ctab"].type == "f32" and m.global_vars["ctab"].element_bits == 32
    assert m.global_vars["ctab"].init == bytes.fromhex("0000003f000080bf00000040")
    mem = Memory()
    out = mem.array(2)
    layout = global_layout(find_kernel(m, "k"), m)
    for i, v in layout.initial_words().items():
        mem.words[i] = v - (1 << 32) if v >> 31 else v  # what the host places
    got = read(launch(m, "k", [out], mem, block=(2, 1),
                      allocations=mem.allocations + layout.allocations), out, 2)
    tab = [np.float32(v) * np.float32(1.5) for v in (0.5, -1.0)]
    # thread t reads its partner's shared word, adds cbytes' second float (-2) and scales
    # by ctab[2] (2)
    assert [g & 0xFFFFFFFF for g in got] == [word((p + np.float32(-2.0)) * np.float32(2.0))
                                             for p in (tab[1], tab[0])]


def test_shuffle_moves_float_words():
    res = run("    shfl.sync.bfly.b32 %f5, %f1, 1, 7199, -1;\n    mov.b32 %r10, %f5;",
              [word(float(i) + 0.5) for i in range(4)])
    assert [r[0] for r in res] == [word(v) for v in (1.5, 0.5, 3.5, 2.5)]


ATOMIC = """
    .reg .pred %p<4>;
    .reg .f32 %f<8>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .shared .align 4 .f32 acc;
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd2, [k_param_1];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra WAIT;
    st.shared.f32 [acc], 0f00000000;
WAIT:
    bar.sync 0;
    atom.global.add.f32 %f2, [%rd2], %f1;
    add.s64 %rd5, %rd2, 12;
    add.s64 %rd6, %rd5, %rd3;
    st.global.f32 [%rd6], %f2;
    red.shared.add.f32 [acc], %f1;
    mov.b32 %r3, %f1;
    atom.global.exch.b32 %r2, [%rd2+4], %r3;
    st.global.u32 [%rd6+32], %r2;
    bar.sync 0;
    @%p1 bra DONE;
    ld.shared.f32 %f3, [acc];
    st.global.f32 [%rd2+8], %f3;
DONE:
    ret;
"""


def test_atomic_float_add_global_and_shared_in_lane_order():
    m = parse_module(entry(ATOMIC, ".param .u64 k_param_0, .param .u64 k_param_1"))
    # a subnormal input, then a subnormal sum (1.5e-38 - 1.45e-38): both flushed to zero
    xs = [np.float32(v) for v in (1e-40, 1.5e-38, -1.45e-38, 0.1, 1e8, -1e8, 0.3, 2.5)]
    mem = Memory()
    src = mem.array([word(x) for x in xs])
    out = mem.array(3 + 2 * len(xs))  # sum, exchanged word, shared sum, add's olds, exch's
    got = [g & 0xFFFFFFFF for g in read(launch(m, "k", [src, out], mem, block=(8, 1)), out,
                                          3 + 2 * len(xs))]
    total, olds = np.float32(0), []
    for x in xs:  # lanes apply in order, warp after warp; the subnormal input is flushed
        olds.append(word(total))
        total = flush(total + flush(x))
    assert got[0] == word(total) and got[2] == word(total)
    assert got[3:3 + len(xs)] == olds
    # exch swaps float words bit for bit: each lane gets the previous lane's value
    assert got[1] == word(xs[-1]) and got[3 + len(xs):] == [0] + [word(x) for x in xs[:-1]]


# -- rejections --------------------------------------------------------------------------------
REGS = ("    .reg .pred %p<3>;\n    .reg .f32 %f<8>;\n    .reg .b32 %r<8>;\n"
        "    .reg .b64 %rd<4>;\n")
APPROX = ["div.approx.f32 %f1, %f2, %f3;", "div.approx.ftz.f32 %f1, %f2, %f3;",
          "div.full.f32 %f1, %f2, %f3;", "div.full.ftz.f32 %f1, %f2, %f3;",
          "sqrt.approx.f32 %f1, %f2;", "sqrt.approx.ftz.f32 %f1, %f2;",
          "rcp.approx.f32 %f1, %f2;", "rcp.approx.ftz.f32 %f1, %f2;",
          "rsqrt.approx.f32 %f1, %f2;", "rsqrt.approx.ftz.f32 %f1, %f2;",
          "ex2.approx.f32 %f1, %f2;", "ex2.approx.ftz.f32 %f1, %f2;",
          "lg2.approx.f32 %f1, %f2;", "lg2.approx.ftz.f32 %f1, %f2;",
          "sin.approx.f32 %f1, %f2;", "sin.approx.ftz.f32 %f1, %f2;",
          "cos.approx.f32 %f1, %f2;", "cos.approx.ftz.f32 %f1, %f2;",
          "tanh.approx.f32 %f1, %f2;"]


def reject(body: str, params: str = ".param .u64 k_param_0", decls: str = "") -> str:
    with pytest.raises(UnsupportedError) as err:
        find_kernel(parse_module(entry(REGS + body, params, decls)), "k")
    assert err.value.kind == "unsupported"
    return err.value.message


@pytest.mark.parametrize("line", APPROX)
def test_approximate_instructions_parse(line):
    """The approximate forms are accepted: each runs its fixed macro (qgpu/machine/approx.py;
    tests/machine/test_approx.py and tests/toolchain/test_float_approx.py hold them)."""
    find_kernel(parse_module(entry(REGS + "    mov.f32 %f2, 0f3F800000;\n    mov.f32 %f3, "
                                   "0f40000000;\n    " + line, ".param .u64 k_param_0")), "k")


@pytest.mark.parametrize(("body", "line", "words"), [
    ("    .reg .f64 %fd<4>;\n    cvt.f64.f32 %fd1, %f1;\n    mul.f64 %fd2, %fd1, %fd1;", 12,
     "double precision (`cvt.f64.f32`)"),
    ("    .reg .f64 %fd<4>;\n    mul.f64 %fd2, %fd1, 0d3FE0000000000000;", 12,
     "double precision (`mul.f64`)"),
    ("    .reg .f64 %fd<4>;\n    mov.b64 %fd1, %rd1;", 11, "double precision (`.reg .f64` "
     "registers)"),
    ("    mov.b64 %rd1, 0d3FE0000000000000;", 11, "double precision (the literal "
     "`0d3FE0000000000000`)"),
    ("    .reg .f16 %h<2>;\n    cvt.rn.f16.f32 %h1, %f1;", 12, "half precision (`cvt.rn.f16.f32`)"),
    ("    .reg .b16 %rs<2>;\n    cvt.rn.bf16.f32 %rs1, %f1;", 12, "bfloat16 (`cvt.rn.bf16.f32`)"),
    ("    .reg .b16 %rs<2>;\n    mov.b16 %rs1, 0f3F800000;", 12, "float literal `0f3F800000` in "
     "an integer instruction"),
    ("    add.s32 %r1, %r2, 0f3F800000;", 11, "in an integer instruction"),
    ("    add.f32 %f1, %f2, 1.5;", 11, "decimal floating-point literal `1.5`"),
    ("    cvt.s32.f32 %r1, %f1;", 11, "without its rounding modifier"),
    ("    cvt.f32.s32 %f1, %r1;", 11, "without its rounding modifier"),
    ("    cvt.rn.f32.f32 %f1, %f2;", 11, "modifier .rn"),
    ("    cvt.rni.f32.s32 %f1, %r1;", 11, "modifier .rni"),
    ("    add.rni.f32 %f1, %f2, %f3;", 11, "modifier .rni"),
    ("    fma.f32 %f1, %f2, %f3, %f4;", 11, "`fma.f32`"),
    ("    min.xorsign.abs.f32 %f1, %f2, %f3;", 11, "modifier .xorsign"),
    ("    setp.lo.f32 %p1, %f2, %f3;", 11, "modifier .lo"),
    ("    atom.global.min.f32 %f1, [%rd1], %f2;", 11, "atomic type .f32"),
    ("    slct.f32.s32 %f1, %f2, %f3, %r1;", 11, "`slct.f32.s32`"),
    ("    testp.finite.f32 %r1, %f1;", 11, "is not a predicate"),
])
def test_other_float_formats_and_malformed_float_ptx(body, line, words):
    msg = reject(body)
    assert msg.startswith(f"line {line}: ") and words in msg, msg


def test_double_messages_say_why_and_what_to_do():
    msg = reject("    .reg .f64 %fd<4>;\n    cvt.f64.f32 %fd1, %f1;")
    assert "the machine computes in float32" in msg and "`x * 0.5` → `x * 0.5f`" in msg
    assert "`exp` → `expf`" in msg
    msg = reject("    ret;", params=".param .f64 k_param_0")
    assert msg.startswith("line 5: double precision (kernel parameter type `.f64`)"), msg
    with pytest.raises(UnsupportedError, match="double precision"):
        parse_module(entry("ret;", decls=".shared .align 8 .f64 sd[2];"))
    m = parse_module(entry(REGS + "    ld.global.f32 %f1, [gd];\n    ret;",
                           decls=".global .align 8 .f64 gd = 0d3FF0000000000000;"))
    with pytest.raises(UnsupportedError, match=r"`gd` \(__device__ variable: double precision"):
        launch(m, "k", [0], Memory())


# -- real CUDA ---------------------------------------------------------------------------------
CUDA = r"""
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void dot(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, a[i] * b[i]);
}
extern "C" __global__ void dot_shared(const float* a, const float* b, float* out, int n) {
    __shared__ float s;
    if (threadIdx.x == 0) s = 0.0f;
    __syncthreads();
    if (threadIdx.x < n) atomicAdd(&s, a[threadIdx.x] * b[threadIdx.x]);
    __syncthreads();
    if (threadIdx.x == 0) out[0] = s;
}
extern "C" __global__ void mathf(const float* x, const float* y, float* o, int* oi) {
    int t = threadIdx.x;
    float a = x[t], b = y[t];
    o[16*t+0] = fminf(a, b);
    o[16*t+1] = fmaxf(a, b);
    o[16*t+2] = fabsf(a);
    o[16*t+3] = floorf(a);
    o[16*t+4] = ceilf(a);
    o[16*t+5] = truncf(a);
    o[16*t+6] = roundf(a);
    o[16*t+7] = rintf(a);
    o[16*t+8] = copysignf(a, b);
    o[16*t+9] = (float)oi[4*t];
    o[16*t+10] = fdimf(a, b);
    o[16*t+11] = __saturatef(a);
    o[16*t+12] = -a;
    o[16*t+13] = a * b - a;
    o[16*t+14] = (float)(unsigned)oi[4*t+1];
    o[16*t+15] = fmaf(a, b, 1.0f);
    oi[4*t+2] = (int)a;
    oi[4*t+3] = (unsigned)b;
}
extern "C" __global__ void divsqrt(const float* x, const float* y, float* o) {
    int t = threadIdx.x;
    o[2*t] = sqrtf(x[t]);
    o[2*t+1] = x[t] / y[t];
}
extern "C" __global__ void nan_cmp(const float* x, const float* y, int* o) {
    int t = threadIdx.x;
    float a = x[t], b = y[t];
    o[4*t+0] = isnan(a);
    o[4*t+1] = a < b;
    o[4*t+2] = !(a >= b);
    o[4*t+3] = isinf(a) + 2 * isfinite(b);
}
extern "C" __global__ void expk(const float* x, float* o) { o[threadIdx.x] = expf(x[threadIdx.x]); }
extern "C" __global__ void fexpk(const float* x, float* o) {
    o[threadIdx.x] = __expf(x[threadIdx.x]);
}
extern "C" __global__ void sink(const float* x, float* o) { o[threadIdx.x] = sinf(x[threadIdx.x]); }
extern "C" __global__ void fdividek(const float* x, float* o) {
    o[threadIdx.x] = __fdividef(x[threadIdx.x], 3.0f);
}
extern "C" __global__ void tenth(const float* x, float* o) {
    o[threadIdx.x] = x[threadIdx.x] * 0.1;
}
"""


def _compile(fast: bool) -> str:
    """PTX of CUDA: the project's route (``compile_cuda``: NVRTC, else nvcc), or nvcc with
    -use_fast_math (``compile_cuda`` takes no compiler options)."""
    if not fast:
        from qgpu.toolchain.cuda import available_compilers

        if not available_compilers():
            pytest.skip("no CUDA compiler")
        return _compile_plain()
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc for -use_fast_math")
    from qgpu.toolchain.cuda import NVCC_OPTIONS

    return _nvcc_fast(nvcc, NVCC_OPTIONS)


@functools.cache
def _compile_plain() -> str:
    from qgpu.toolchain.cuda import compile_cuda

    return compile_cuda(CUDA, filename="floats.cu").ptx


@functools.cache
def _nvcc_fast(nvcc: str, options: tuple[str, ...]) -> str:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "floats.cu")
        src.write_text(CUDA, encoding="utf-8")
        subprocess.run([nvcc, *options, "-use_fast_math", "-o", str(Path(tmp, "out.ptx")),
                        str(src)], check=True, capture_output=True, timeout=300)
        return Path(tmp, "out.ptx").read_text(encoding="utf-8")


@functools.cache
def compiled(fast: bool) -> Module:
    return parse_module(_compile(fast))


X = np.array([1.5, -2.25, 2.5, 0.1, -0.0, 7.5, 100.0, 1e-3, -0.5, 3.0e38, 0.49999997, -1e30,
              np.inf, np.nan, 2.0, -6.5], np.float32)
Y = np.array([2.0, 0.5, -1.0, 0.3, 4.0, -3.5, 0.25, 9.0, 0.7, 2.0, -1.0, 3.0, 1.0, 5.0, np.nan,
              -0.0], np.float32)
INTS = [7, -3, 16777217, 2**31 - 1, -(2**31), 123456789, 0, 5, -1, 1 << 30, 3, 99, 12, -77, 1,
        2]


def _words(xs: np.ndarray) -> list[int]:
    return [word(x) for x in xs]


@pytest.mark.parametrize("fast", [False, True], ids=["plain", "fast-math"])
def test_cuda_saxpy_and_dot_products(fast):
    m = compiled(fast)
    mem = Memory()
    n = 12
    px, py = mem.array(_words(X[:n])), mem.array(_words(Y[:n]))
    a = np.float32(2.5)
    got = read(launch(m, "saxpy", [n, word(a), px, py], mem, block=(8, 1), grid=(2, 1)), py, n)
    # NVVM contracts a*x+y into one fma.rn: round once, from the exact value
    want = [rounded(Fraction(float(a)) * Fraction(float(x)) + Fraction(float(y)), Round.RN)
            for x, y in zip(X[:n], Y[:n], strict=True)]
    if fast:
        want = [word(flush(value(w))) for w in want]
    assert [g & 0xFFFFFFFF for g in got] == want
    for kernel in ("dot", "dot_shared"):
        mem = Memory()
        pa, pb, out = mem.array(_words(X[:8])), mem.array(_words(Y[:8])), mem.array(1)
        got = read(launch(m, kernel, [pa, pb, out, 8], mem, block=(8, 1)), out, 1)
        total = np.float32(0)
        for x, y in zip(X[:8], Y[:8], strict=True):  # lanes add in order; atomics flush
            total = flush(total + flush(x * y))
        assert got[0] & 0xFFFFFFFF == word(total), kernel


@pytest.mark.parametrize("fast", [False, True], ids=["plain", "fast-math"])
def test_cuda_math_functions(fast):
    """fminf fmaxf fabsf floorf ceilf truncf roundf rintf copysignf (float)int fdimf
    __saturatef -x a*b-a (float)unsigned fmaf (int)x (unsigned)x. No input or result is
    subnormal, so -use_fast_math's .ftz forms give the same values."""
    m = compiled(fast)
    ints = [INTS[t // 2] if t % 2 == 0 else INTS[-1 - t // 2] for t in range(32)]
    got: list[int] = []
    goti: list[int] = []
    for c in range(0, 16, 4):  # 4 threads a launch: 16 result words each, 127 words of memory
        mem = Memory()
        px, py = mem.array(_words(X[c:c + 4])), mem.array(_words(Y[c:c + 4]))
        out = mem.array(16 * 4)
        oi = mem.array([v for t in range(c, c + 4) for v in (ints[2 * t], ints[2 * t + 1], 0, 0)])
        run_ = launch(m, "mathf", [px, py, out, oi], mem, block=(4, 1))
        got += [g & 0xFFFFFFFF for g in read(run_, out, 64)]
        goti += [g & 0xFFFFFFFF for g in read(run_, oi, 16)]
    with np.errstate(all="ignore"):
        for t, (a, b) in enumerate(zip(X, Y, strict=True)):
            wa, wb = word(a), word(b)
            i0, i1 = ints[2 * t], ints[2 * t + 1]
            half_away = np.float32(math.copysign(math.floor(abs(float(a)) + 0.5), a)) \
                if np.isfinite(a) else a
            want = [
                _min_max_ref(wa, wb, True), _min_max_ref(wa, wb, False), expect(np.abs(a)),
                expect(np.floor(a)), expect(np.ceil(a)), expect(np.trunc(a)), expect(half_away),
                expect(np.rint(a)), word(np.copysign(a, b)) if not np.isnan(a) else
                (wa & MAG) | (wb & SIGN), word(np.float32(i0)),
                expect(a - b if a > b else np.float32(0) if a <= b else np.float32(np.nan)),
                0 if np.isnan(a) else word(min(max(a, np.float32(0)), np.float32(1)) + 0),
                (wa ^ SIGN) if not np.isnan(a) else CANON,
                expect(np.float32(a * b) - a), word(np.float32(i1 & 0xFFFFFFFF)),
                expect(np.float32(np.float64(a) * np.float64(b) + 1))
                if not (np.isfinite(a) and np.isfinite(b)) else
                rounded(Fraction(float(a)) * Fraction(float(b)) + 1, Round.RN),
            ]
            assert got[16 * t:16 * t + 16] == want, (t, a, b, [hex(g) for g in
                                                               got[16 * t:16 * t + 16]])
            assert goti[4 * t + 2:4 * t + 4] == [_int_ref(a, "rzi", 32, True) & 0xFFFFFFFF,
                                                 _int_ref(b, "rzi", 32, False)], (a, b)


def test_cuda_division_and_square_root():
    m = compiled(False)
    mem = Memory()
    px, py, out = mem.array(_words(X)), mem.array(_words(Y)), mem.array(32)
    got = [g & 0xFFFFFFFF for g in read(launch(m, "divsqrt", [px, py, out], mem,
                                               block=(16, 1)), out, 32)]
    with np.errstate(all="ignore"):
        assert got == [w for a, b in zip(X, Y, strict=True)
                       for w in (expect(np.sqrt(a)), expect(a / b))]


@pytest.mark.parametrize("fast", [False, True], ids=["plain", "fast-math"])
def test_cuda_nan_comparisons(fast):
    m = compiled(fast)
    mem = Memory()
    px, py, out = mem.array(_words(X)), mem.array(_words(Y)), mem.array(64)
    got = read(launch(m, "nan_cmp", [px, py, out], mem, block=(16, 1)), out, 64)
    for t, (a, b) in enumerate(zip(X, Y, strict=True)):
        if fast:
            a, b = flush(a), flush(b)
        want = [int(np.isnan(a)), int(a < b), int(not a >= b),
                int(np.isinf(a)) + 2 * int(np.isfinite(b))]
        assert got[4 * t:4 * t + 4] == want, (a, b)


@pytest.mark.parametrize("fast", [False, True], ids=["plain", "fast-math"])
@pytest.mark.parametrize(("kernel", "plain", "fast_math"), [
    ("expk", None, None),  # ex2.approx.ftz (and .approx under fast math) run
    ("fexpk", None, None),
    ("fdividek", None, None),  # div.approx
    ("sink", "`.local`", None),  # sinf's slow path keeps a local array; sin.approx runs
    ("divsqrt", None, None),
    ("tenth", "double precision (`cvt.f64.f32`)", "double precision (`cvt.ftz.f64.f32`)"),
])
def test_cuda_functions_outside_the_subset_are_rejected_clearly(fast, kernel, plain, fast_math):
    m = compiled(fast)
    words = fast_math if fast else plain
    if words is None:
        find_kernel(m, kernel)  # runs (test_cuda_division_and_square_root)
        return
    with pytest.raises(UnsupportedError) as err:
        find_kernel(m, kernel)
    msg = err.value.message
    assert msg.startswith("line ") and words in msg, msg
    if "approx" in words:
        assert "is not supported yet" in msg


@pytest.mark.parametrize("fast", [False, True], ids=["plain", "fast-math"])
def test_cuda_float_mnemonics(fast):
    """What NVVM writes for the kernels above (docs and the report list them)."""
    text = _compile(fast)
    if "NVVM" not in text[:2000]:  # clang writes other forms
        pytest.skip("the PTX does not come from NVVM (NVRTC or nvcc)")
    seen = {ln.split()[0] for ln in text.splitlines()
            if ln.strip() and ("f32" in ln.split()[0] or "f64" in ln.split()[0])
            and not ln.lstrip().startswith((".", "//"))}
    if fast:
        assert {"mul.ftz.f32", "fma.rn.ftz.f32", "setp.lt.ftz.f32", "min.ftz.f32",
                "div.approx.ftz.f32", "sqrt.approx.ftz.f32", "ex2.approx.ftz.f32",
                "atom.global.add.f32", "cvt.rzi.ftz.s32.f32"} <= seen, seen
    else:
        assert {"fma.rn.f32", "div.rn.f32", "sqrt.rn.f32", "copysign.f32", "add.rz.f32",
                "cvt.rzi.f32.f32", "cvt.rni.f32.f32", "cvt.rn.f32.s32", "setp.gtu.f32",
                "atom.shared.add.f32", "ld.param.f32", "selp.f32"} <= seen, seen


def test_lowering_a_float_kernel_never_crashes():
    """The lowering either handles a float kernel or rejects it with UnsupportedError (it
    learns float32 separately): never another exception."""
    from qgpu.toolchain.lower import lower_kernel

    m = compiled(False)
    for k in m.kernels:
        try:
            lower_kernel(k, m)
        except UnsupportedError as err:
            assert err.message.startswith("line "), err.message
