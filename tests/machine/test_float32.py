"""qgpu.machine.float32 against references it shares no code with: numpy's float32 arithmetic
(round to nearest even, the hardware's), and exact rational arithmetic rounded by picking among a
value's float32 neighbours (every rounding mode)."""

from fractions import Fraction

import numpy as np
import pytest

from qgpu.machine import float32 as F
from qgpu.machine.float32 import FCmp, Round

RANDOM_PAIRS = 1_000_000  # per instruction, round to nearest
EXACT_PAIRS = 20_000  # per instruction and directed rounding mode (Fraction arithmetic is slow)


def words(*values: float) -> list[int]:
    return [int(np.float32(v).view(np.uint32)) for v in values]


SPECIALS = sorted({
    *words(0.0, -0.0, 1.0, -1.0, 1.5, -2.5, 3.0, 0.1, -0.1, 2.0 ** -126, -(2.0 ** -126),
           65504.0, 16777216.0, 16777217.0, 3.4028235e38, -3.4028235e38, 2.0 ** 127, 0.5,
           np.inf, -np.inf),
    0x0000_0001, 0x8000_0001, 0x007F_FFFF, 0x807F_FFFF, 0x0040_0000, 0x7F7F_FFFE,
    0x7FC0_0000, 0xFFC0_0000, 0x7F80_0001, 0x7FFF_FFFF, 0x3F80_0001, 0x3F7F_FFFF,
})


def operand_samples(n: int, seed: int) -> np.ndarray:
    """Words that exercise every path: random bit patterns (mostly far-apart exponents),
    pairs of nearby magnitudes (cancellation, carries), and subnormal-sized values."""
    rng = np.random.default_rng(seed)
    third = n // 3
    raw = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    near = (rng.integers(0x3E00_0000, 0x4100_0000, size=third, dtype=np.uint64)
            | (rng.integers(0, 2, size=third, dtype=np.uint64) << 31)).astype(np.uint32)
    tiny = (rng.integers(0, 0x0180_0000, size=third, dtype=np.uint64)
            | (rng.integers(0, 2, size=third, dtype=np.uint64) << 31)).astype(np.uint32)
    raw[:third] = near
    raw[third:2 * third] = tiny
    return raw


def canonical(results: np.ndarray) -> np.ndarray:
    """numpy's results with every NaN replaced by the GPU's canonical NaN."""
    return np.where(np.isnan(results.view(np.float32)), np.uint32(F.CANONICAL_NAN),
                    results.view(np.uint32))


def numpy_op(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x, y = a.view(np.float32), b.view(np.float32)
    with np.errstate(all="ignore"):
        out = {"add": np.add, "sub": np.subtract, "mul": np.multiply,
               "div": np.divide}[name](x, y)
    return canonical(out)


OURS = {"add": F.add, "sub": F.sub, "mul": F.mul, "div": F.divide}


def check(ours: np.ndarray, ref: np.ndarray, a: np.ndarray, b: np.ndarray | None,
          what: str) -> None:
    bad = np.flatnonzero(ours != ref)
    if bad.size:
        i = bad[0]
        operands = f"{int(a[i]):#010x}" + ("" if b is None else f", {int(b[i]):#010x}")
        pytest.fail(f"{what}: {bad.size} of {len(ours)} differ; first ({operands}) gives "
                    f"{int(ours[i]):#010x}, the reference {int(ref[i]):#010x}")


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_round_to_nearest_matches_numpy_on_every_special_pair(name):
    a = np.array([x for x in SPECIALS for _ in SPECIALS], dtype=np.uint32)
    b = np.array([y for _ in SPECIALS for y in SPECIALS], dtype=np.uint32)
    ours = np.array([OURS[name](int(x), int(y)) for x, y in zip(a, b, strict=True)],
                    dtype=np.uint32)
    check(ours, numpy_op(name, a, b), a, b, name)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_round_to_nearest_matches_numpy_on_a_million_random_pairs(name):
    a, b = operand_samples(RANDOM_PAIRS, 1), operand_samples(RANDOM_PAIRS, 2)
    op = OURS[name]
    pairs = zip(a.tolist(), b.tolist(), strict=True)
    ours = np.fromiter((op(x, y) for x, y in pairs), dtype=np.uint32, count=len(a))
    check(ours, numpy_op(name, a, b), a, b, name)


def test_sqrt_matches_numpy_on_every_special_and_a_million_random_words():
    a = np.concatenate([np.array(SPECIALS, dtype=np.uint32), operand_samples(RANDOM_PAIRS, 3)])
    ours = np.fromiter((F.sqrt(x) for x in a.tolist()), dtype=np.uint32, count=len(a))
    with np.errstate(all="ignore"):
        ref = canonical(np.sqrt(a.view(np.float32)))
    check(ours, ref, a, None, "sqrt")


# --- every rounding mode, against exact rationals ---------------------------------------------

MAX = Fraction(float(np.float32(3.4028235e38)))
OVERFLOW_MIDPOINT = Fraction(2) ** 128 - Fraction(2) ** 103  # between MAX and 2^128


def exact(w: int) -> Fraction:
    return Fraction(F.to_float(w))


def neighbours(v: Fraction) -> list[Fraction]:
    """float32 values around v, including the two that bracket it (v finite, |v| ≤ 2^128)."""
    near = np.float32(float(v)) if abs(v) <= MAX else np.float32(np.sign(float(v)) * 3.4e38)
    out = {near}
    for _ in range(2):
        out |= {np.nextafter(x, np.float32(d)) for x in list(out) for d in (np.inf, -np.inf)}
    return sorted(Fraction(float(x)) for x in out if np.isfinite(x))


def reference_round(v: Fraction, rnd: Round) -> int:
    """The binary32 word of v by mode, chosen among v's neighbours (v nonzero)."""
    if abs(v) > MAX:
        up_inf = rnd == Round.RN and abs(v) >= OVERFLOW_MIDPOINT
        sign = v < 0
        to_inf = up_inf or (rnd == Round.RP and not sign) or (rnd == Round.RM and sign)
        if rnd == Round.RN and not up_inf:
            to_inf = False
        return words(float(np.copysign(np.inf if to_inf else float(MAX), float(v))))[0]
    cands = neighbours(v)
    below = max(c for c in cands if c <= v)
    above = min(c for c in cands if c >= v)
    if rnd == Round.RZ:
        pick = below if v > 0 else above
    elif rnd == Round.RM:
        pick = below
    elif rnd == Round.RP:
        pick = above
    else:
        pick = below if v - below < above - v else above if above - v < v - below else (
            below if words(float(below))[0] & 1 == 0 else above)
    word = words(float(pick))[0]
    if pick == 0:  # rounded to zero: the sign of v
        word = 0x8000_0000 if v < 0 else 0
    return word


def finite_samples(n: int, seed: int) -> list[int]:
    return [w for w in operand_samples(n * 2, seed).tolist()
            if not (F.is_nan(w) or F.is_inf(w))][:n]


EXACT_OPS = {
    "add": (lambda a, b, c, r: F.add(a, b, r), lambda a, b, c: exact(a) + exact(b)),
    "mul": (lambda a, b, c, r: F.mul(a, b, r), lambda a, b, c: exact(a) * exact(b)),
    "fma": (lambda a, b, c, r: F.fma(a, b, c, r), lambda a, b, c: exact(a) * exact(b) + exact(c)),
    "div": (lambda a, b, c, r: F.divide(a, b, r),
            lambda a, b, c: exact(a) / exact(b) if exact(b) else None),
}


@pytest.mark.parametrize("rnd", list(Round), ids=lambda r: r.name.lower())
@pytest.mark.parametrize("name", list(EXACT_OPS))
def test_every_rounding_mode_matches_exact_arithmetic(name, rnd):
    ours_op, value_of = EXACT_OPS[name]
    a, b, c = (finite_samples(EXACT_PAIRS, s) for s in (4, 5, 6))
    if name == "fma":  # products near the addend, so that the sum cancels and rounds
        c = [F.mul(x, y) ^ (F.SIGN if i % 2 else 0) if i % 3 else z
             for i, (x, y, z) in enumerate(zip(a, b, c, strict=True))]
    checked = 0
    for x, y, z in zip(a, b, c, strict=True):
        v = value_of(x, y, z)
        if v is None or v == 0:
            continue
        got, want = ours_op(x, y, z, rnd), reference_round(v, rnd)
        assert got == want, (f"{name}.{rnd.name.lower()}({x:#010x}, {y:#010x}, {z:#010x}) = "
                             f"{got:#010x}, exact rounding gives {want:#010x}")
        checked += 1
    assert checked > EXACT_PAIRS * 0.9


@pytest.mark.parametrize("rnd", list(Round), ids=lambda r: r.name.lower())
def test_sqrt_and_int_to_float_in_every_rounding_mode(rnd):
    for w in finite_samples(EXACT_PAIRS // 4, 7):
        w &= F.MAGNITUDE
        if w == 0:
            continue
        got = F.sqrt(w, rnd)
        v = float(np.sqrt(np.float64(F.to_float(w))))  # the double root brackets the exact one
        x = Fraction(v)
        below = [c for c in neighbours(x) if c * c <= exact(w)]
        above = [c for c in neighbours(x) if c * c >= exact(w)]
        lo, hi = max(below), min(above)
        if lo == hi:
            want = words(float(lo))[0]
        elif rnd in (Round.RZ, Round.RM):
            want = words(float(lo))[0]
        elif rnd == Round.RP:
            want = words(float(hi))[0]
        else:  # the midpoint's square against the operand decides (no ties: irrational)
            mid = (lo + hi) / 2
            want = words(float(lo if mid * mid > exact(w) else hi))[0]
        assert got == want, f"sqrt.{rnd.name.lower()}({w:#010x}) = {got:#010x}, want {want:#010x}"
    rng = np.random.default_rng(8)
    for x in rng.integers(-(1 << 31), 1 << 31, size=EXACT_PAIRS // 4).tolist() + [
            0, 1, -1, (1 << 31) - 1, -(1 << 31), (1 << 24) + 1, (1 << 25) + 3]:
        for signed in (True, False):
            value = x if signed else x & 0xFFFF_FFFF
            got = F.from_int(x & 0xFFFF_FFFF, signed, rnd)
            want = 0 if value == 0 else reference_round(Fraction(value), rnd)
            assert got == want, f"cvt.{rnd.name.lower()}.f32 of {value}: {got:#x} != {want:#x}"


# --- the sign of zero, overflow, ftz and sat ---------------------------------------------------

ONE, TWO, MAXW, INF, NAN = *words(1.0, 2.0, 3.4028235e38, np.inf), F.CANONICAL_NAN
NEG = F.SIGN
TINY = 0x0000_0001  # the smallest subnormal


@pytest.mark.parametrize("rnd,zero", [(Round.RN, 0), (Round.RZ, 0), (Round.RP, 0),
                                      (Round.RM, NEG)])
def test_exact_cancellation_gives_plus_zero_except_rounding_down(rnd, zero):
    assert F.add(ONE, ONE | NEG, rnd) == zero
    assert F.sub(TWO, TWO, rnd) == zero
    assert F.fma(ONE, TWO, TWO | NEG, rnd) == zero
    assert F.add(0, NEG, rnd) == zero  # +0 + -0
    assert F.add(NEG, NEG, rnd) == NEG and F.add(0, 0, rnd) == 0
    assert F.mul(0, ONE, rnd) == 0 and F.mul(NEG, ONE, rnd) == NEG  # a product keeps its sign


@pytest.mark.parametrize("rnd,pos,neg", [
    (Round.RN, INF, INF | NEG), (Round.RZ, MAXW, MAXW | NEG),
    (Round.RM, MAXW, INF | NEG), (Round.RP, INF, MAXW | NEG)])
def test_overflow_by_rounding_mode(rnd, pos, neg):
    assert F.mul(MAXW, TWO, rnd) == pos
    assert F.mul(MAXW | NEG, TWO, rnd) == neg
    assert F.add(MAXW, MAXW, rnd) == pos


def test_invalid_operations_give_the_canonical_nan():
    assert F.add(INF, INF | NEG) == NAN
    assert F.mul(0, INF) == NAN
    assert F.fma(INF, ONE, INF | NEG) == NAN
    assert F.fma(0, INF, ONE) == NAN
    assert F.divide(0, NEG) == NAN and F.divide(INF, INF) == NAN
    assert F.sqrt(ONE | NEG) == NAN and F.sqrt(NEG) == NEG
    for payload in (0x7FC0_0000, 0xFFC0_0001, 0x7F80_0001):
        assert F.add(payload, ONE) == NAN and F.mul(ONE, payload) == NAN


def test_ftz_flushes_inputs_and_results_to_signed_zero():
    assert F.add(TINY, TINY) == 2 and F.add(TINY, TINY, ftz=True) == 0
    assert F.add(TINY | NEG, NEG, ftz=True) == NEG
    half_min_normal = words(2.0 ** -127)[0]
    assert F.mul(half_min_normal, ONE) == half_min_normal  # a subnormal result
    assert F.mul(words(2.0 ** -63)[0], words(2.0 ** -64)[0], ftz=True) == 0
    assert F.mul(words(-(2.0 ** -63))[0], words(2.0 ** -64)[0], ftz=True) == NEG
    assert F.minimum(TINY, ONE, ftz=True) == 0
    assert F.compare(TINY, 0, FCmp.EQ, ftz=True) and not F.compare(TINY, 0, FCmp.EQ)
    assert F.to_int(TINY, True, Round.RP) == 1 and F.to_int(TINY, True, Round.RP, ftz=True) == 0


def test_sat_clamps_to_zero_one_and_nan_to_zero():
    assert F.add(ONE, ONE, sat=True) == ONE
    assert F.add(ONE | NEG, 0, sat=True) == 0
    assert F.mul(0, ONE | NEG, sat=True) == 0  # -0 → +0
    assert F.add(INF, INF | NEG, sat=True) == 0
    half = words(0.5)[0]
    assert F.mul(half, ONE, sat=True) == half


# --- min, max, compares, conversions -------------------------------------------------------


def test_min_max_take_the_number_and_order_minus_zero_first():
    assert F.minimum(NAN, ONE) == ONE and F.maximum(ONE, 0x7FC0_0000) == ONE
    assert F.minimum(0x7FC0_0000, 0xFFC0_0000) == NAN
    assert F.minimum(0, NEG) == NEG and F.minimum(NEG, 0) == NEG
    assert F.maximum(0, NEG) == 0 and F.maximum(NEG, 0) == 0
    a = np.array(SPECIALS, dtype=np.uint32)
    for x in a.tolist():
        for y in a.tolist():
            if F.is_nan(x) or F.is_nan(y) or F.is_zero(x) and F.is_zero(y):
                continue
            fx, fy = F.to_float(x), F.to_float(y)
            assert F.to_float(F.minimum(x, y)) == min(fx, fy)
            assert F.to_float(F.maximum(x, y)) == max(fx, fy)


def test_compares_follow_ptx_ordered_and_unordered_rules():
    import operator
    base = {FCmp.EQ: operator.eq, FCmp.NE: operator.ne, FCmp.LT: operator.lt,
            FCmp.LE: operator.le, FCmp.GT: operator.gt, FCmp.GE: operator.ge}
    for x in SPECIALS:
        for y in SPECIALS:
            fx, fy = F.to_float(x), F.to_float(y)
            nan = fx != fx or fy != fy
            for cmp, fn in base.items():
                assert F.compare(x, y, cmp) == (not nan and fn(fx, fy))
                assert F.compare(x, y, FCmp(cmp + FCmp.EQU)) == (nan or fn(fx, fy))
            assert F.compare(x, y, FCmp.NUM) == (not nan)
            assert F.compare(x, y, FCmp.NAN) == nan


@pytest.mark.parametrize("rnd,fn", [(Round.RN, np.rint), (Round.RZ, np.trunc),
                                    (Round.RM, np.floor), (Round.RP, np.ceil)])
def test_float_to_int_rounds_and_saturates(rnd, fn):
    a = np.concatenate([np.array(SPECIALS, dtype=np.uint32), operand_samples(100_000, 9),
                        np.array(words(0.5, 1.5, 2.5, -0.5, -1.5, 2147483520.0, 2147483648.0,
                                       -2147483648.0, 4294967040.0, 4294967296.0),
                                 dtype=np.uint32)])
    with np.errstate(all="ignore"):
        r = fn(a.view(np.float32).astype(np.float64))
    for signed, lo, hi in ((True, -(1 << 31), (1 << 31) - 1), (False, 0, (1 << 32) - 1)):
        want = np.where(np.isnan(r), 0, np.clip(np.nan_to_num(r, posinf=hi, neginf=lo), lo, hi))
        want = want.astype(np.int64) & 0xFFFF_FFFF
        got = np.array([F.to_int(x, signed, rnd) for x in a.tolist()], dtype=np.int64)
        check(got, want, a, None, f"cvt.{rnd.name.lower()}i.{'s' if signed else 'u'}32.f32")
    assert F.to_int(words(300.0)[0], True, rnd, bits=8) == 127
    assert F.to_int(words(-300.0)[0], False, rnd, bits=16) == 0
    assert F.to_int(words(-300.0)[0], True, rnd, bits=8) == (-128) & 0xFFFF_FFFF


@pytest.mark.parametrize("rnd,fn", [(Round.RN, np.rint), (Round.RZ, np.trunc),
                                    (Round.RM, np.floor), (Round.RP, np.ceil)])
def test_round_to_integral_keeps_the_sign_of_zero(rnd, fn):
    a = np.concatenate([np.array(SPECIALS, dtype=np.uint32), operand_samples(100_000, 10)])
    got = np.array([F.round_integral(x, rnd) for x in a.tolist()], dtype=np.uint32)
    with np.errstate(invalid="ignore"):
        want = canonical(fn(a.view(np.float32)))
    check(got, want, a, None, f"cvt.r{rnd.name[1].lower()}i.f32")


# --- host I/O ------------------------------------------------------------------------------


def test_decimals_round_directly_to_float32_not_through_a_double():
    # just above the midpoint 1 + 2^-24 between 1.0 and the next float: a double rounds it
    # onto the midpoint, which then ties to 1.0; rounded directly, it gives the next float
    midpoint = "1.000000059604644775390625"
    above = midpoint + "0001"
    assert float(above) == float(midpoint) and words(float(above))[0] == ONE
    assert F.from_decimal(midpoint) == ONE and F.from_decimal(above) == ONE + 1
    assert F.from_decimal("0.1") == words(0.1)[0]
    assert F.from_decimal("nan") == NAN and F.from_decimal("-inf") == INF | NEG
    assert F.from_decimal("-0") == NEG and F.from_decimal(3) == words(3.0)[0]
    assert F.from_decimal("1e39") == INF and F.from_decimal("1e-50") == 0
    assert F.from_decimal(16777217) == words(16777216.0)[0]  # C's int → float: nearest even


def test_shortest_decimal_round_trips_and_matches_numpy():
    for w in list(SPECIALS) + operand_samples(20_000, 11).tolist():
        text = F.shortest(w)
        if F.is_nan(w):
            assert text == "nan"
            continue
        assert F.from_decimal(text) == w, (hex(w), text)
        ours = float(text)
        theirs = float(np.format_float_scientific(np.float32(F.to_float(w)), unique=True))
        assert ours == theirs, (hex(w), text)
    assert [F.shortest(w) for w in words(0.1, 3.0, 1.0 / 3.0, -0.0, np.inf)] == [
        "0.1", "3.0", "0.33333334", "-0.0", "inf"]
    assert F.shortest(TINY) == "1e-45" and F.shortest(MAXW) == "3.4028235e+38"
