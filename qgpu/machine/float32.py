"""IEEE-754 binary32 on 32-bit words, bit for bit as an NVIDIA GPU computes it.

The machine's registers hold words; its float instructions read and write them as binary32. Every
backend computes float through this module — the PTX interpreter, the machine interpreter, the
circuit's tests — so they agree by construction, and the tests hold the module itself against
numpy (round to nearest even) and exact rational arithmetic (every rounding mode).

Each operation is computed exactly on integers (Python's are unbounded: a fused multiply-add's
exact value fits one) and rounded once. The GPU's conventions (docs/ISA.md, "Float"):

* a NaN result is the canonical NaN ``0x7FFFFFFF``, whatever NaN came in;
* ``ftz`` flushes subnormal inputs to a zero of the same sign before the operation, and a result
  that is subnormal after rounding to a zero of its sign;
* ``sat`` clamps to [+0, 1], NaN and -0 giving +0;
* min and max return the non-NaN operand (canonical NaN when both are NaN) and order -0 < +0;
* float → integer conversions saturate, NaN giving 0.
"""

from __future__ import annotations

import math
from decimal import ROUND_FLOOR, Decimal, localcontext
from enum import IntEnum
from fractions import Fraction

SIGN = 0x8000_0000
EXPONENT = 0x7F80_0000
FRACTION = 0x007F_FFFF
MAGNITUDE = 0x7FFF_FFFF
INF = 0x7F80_0000
CANONICAL_NAN = 0x7FFF_FFFF
ONE = 0x3F80_0000
MAX_FINITE = 0x7F7F_FFFF
PRECISION = 24  # significand bits, the hidden one included
MIN_QUANTUM = -149  # exponent of the last bit of a subnormal: the smallest step


class Round(IntEnum):
    """Rounding modes, PTX's ``.rn .rz .rm .rp`` (and the integer ``.rni .rzi .rmi .rpi``)."""

    RN = 0  # to nearest, ties to even
    RZ = 1  # towards zero
    RM = 2  # towards -inf
    RP = 3  # towards +inf


class FCmp(IntEnum):
    """Float comparisons of ``setp``: ordered (false when a NaN is involved), unordered (true
    then), ``num`` (neither is NaN) and ``nan`` (either is)."""

    EQ = 0
    NE = 1
    LT = 2
    LE = 3
    GT = 4
    GE = 5
    EQU = 6
    NEU = 7
    LTU = 8
    LEU = 9
    GTU = 10
    GEU = 11
    NUM = 12
    NAN = 13


def is_nan(w: int) -> bool:
    return w & MAGNITUDE > INF


def is_inf(w: int) -> bool:
    return w & MAGNITUDE == INF


def is_zero(w: int) -> bool:
    return w & MAGNITUDE == 0


def is_subnormal(w: int) -> bool:
    return w & EXPONENT == 0 and w & FRACTION != 0


def flush(w: int) -> int:
    """``.ftz`` on one word: a subnormal becomes a zero of its sign."""
    return w & SIGN if is_subnormal(w) else w


def _parts(w: int) -> tuple[int, int, int]:
    """(sign, m, e) with |value| = m · 2^e, for a finite word (zeros give m = 0)."""
    biased = (w >> 23) & 0xFF
    frac = w & FRACTION
    if biased == 0:
        return w >> 31, frac, MIN_QUANTUM
    return w >> 31, frac | 1 << 23, biased - 150


def _overflow(sign: int, rnd: Round) -> int:
    """The result of a value too large for binary32, by rounding mode."""
    to_inf = rnd == Round.RN or (rnd == Round.RP and not sign) or (rnd == Round.RM and sign)
    return sign << 31 | (INF if to_inf else MAX_FINITE)


def _round_bits(sign: int, m: int, shift: int, rnd: Round) -> int:
    """m >> shift rounded by mode (sign says which way is down)."""
    if shift <= 0:
        return m << -shift
    keep, rest = m >> shift, m & ((1 << shift) - 1)
    if rest:
        half = 1 << (shift - 1)
        if rnd == Round.RN:
            keep += rest > half or (rest == half and keep & 1)
        elif rnd == Round.RM:
            keep += sign
        elif rnd == Round.RP:
            keep += 1 - sign
    return keep


def round_value(sign: int, m: int, e: int, rnd: Round = Round.RN, ftz: bool = False) -> int:
    """The word nearest (by ``rnd``) to (-1)^sign · m · 2^e, m ≥ 0 an integer; 0 gives a zero of
    that sign."""
    if m == 0:
        return sign << 31
    q = max(e + m.bit_length() - PRECISION, MIN_QUANTUM)  # the result's last bit
    keep = _round_bits(sign, m, q - e, rnd)
    if keep >> PRECISION:  # rounding carried into a new top bit
        keep >>= 1
        q += 1
    if keep < 1 << (PRECISION - 1):  # subnormal (q is MIN_QUANTUM) or zero
        return sign << 31 if ftz else sign << 31 | keep
    biased = q + 150
    if biased >= 0xFF:
        return _overflow(sign, rnd)
    return sign << 31 | biased << 23 | (keep & FRACTION)


def _finish(w: int, sat: bool) -> int:
    """``.sat`` on a result (``.ftz`` flushed it already: round_value does for a subnormal
    result, every other result is an operand flushed on the way in, a zero or a special)."""
    if sat:
        if is_nan(w) or w & SIGN:
            return 0
        return min(w, ONE)
    return w


def fma(a: int, b: int, c: int | None, rnd: Round = Round.RN, ftz: bool = False,
        sat: bool = False) -> int:
    """a · b + c rounded once; ``c=None`` is the product alone (``mul``), which differs from
    adding -0 only in the sign of a zero under ``.rm``."""
    if ftz:
        a, b = flush(a), flush(b)
        c = None if c is None else flush(c)
    if is_nan(a) or is_nan(b) or (c is not None and is_nan(c)):
        return _finish(CANONICAL_NAN, sat)
    ps = (a ^ b) >> 31
    if is_inf(a) or is_inf(b):
        if is_zero(a) or is_zero(b):
            return _finish(CANONICAL_NAN, sat)
        if c is not None and is_inf(c) and c >> 31 != ps:
            return _finish(CANONICAL_NAN, sat)
        return _finish(ps << 31 | INF, sat)
    if c is not None and is_inf(c):
        return _finish(c, sat)
    _, ma, ea = _parts(a)
    _, mb, eb = _parts(b)
    mp, ep = ma * mb, ea + eb
    if c is None:
        return _finish(round_value(ps, mp, ep, rnd, ftz), sat)
    sc, mc, ec = _parts(c)
    if mp == 0 and mc == 0:  # zero plus zero: its sign by IEEE's rule
        zs = (ps | sc) if rnd == Round.RM else (ps & sc)
        return _finish(zs << 31, sat)
    e = min(ep, ec)
    total = (-mp if ps else mp) << (ep - e)
    total += (-mc if sc else mc) << (ec - e)
    if total == 0:  # exact cancellation: +0, or -0 rounding down
        return _finish(SIGN if rnd == Round.RM else 0, sat)
    return _finish(round_value(int(total < 0), abs(total), e, rnd, ftz), sat)


def add(a: int, b: int, rnd: Round = Round.RN, ftz: bool = False, sat: bool = False) -> int:
    return fma(a, ONE, b, rnd, ftz, sat)


def sub(a: int, b: int, rnd: Round = Round.RN, ftz: bool = False, sat: bool = False) -> int:
    return fma(a, ONE, b ^ SIGN, rnd, ftz, sat)


def mul(a: int, b: int, rnd: Round = Round.RN, ftz: bool = False, sat: bool = False) -> int:
    return fma(a, b, None, rnd, ftz, sat)


def _order_key(w: int) -> int:
    """An integer that orders non-NaN words by value, -0 before +0 (min/max's order)."""
    return -(w & MAGNITUDE) - 1 if w & SIGN else w


def _value_key(w: int) -> int:
    """An integer that orders non-NaN words by value, -0 equal to +0 (comparisons' order)."""
    return -(w & MAGNITUDE) if w & SIGN else w


def minimum(a: int, b: int, ftz: bool = False) -> int:
    """``min.f32``: the smaller operand, the non-NaN one when one is NaN."""
    return _pick(a, b, ftz, smaller=True)


def maximum(a: int, b: int, ftz: bool = False) -> int:
    """``max.f32``: the larger operand, the non-NaN one when one is NaN."""
    return _pick(a, b, ftz, smaller=False)


def _pick(a: int, b: int, ftz: bool, smaller: bool) -> int:
    if ftz:
        a, b = flush(a), flush(b)
    if is_nan(a):
        return CANONICAL_NAN if is_nan(b) else b
    if is_nan(b):
        return a
    a_first = _order_key(a) <= _order_key(b)
    return a if a_first == smaller else b


def compare(a: int, b: int, cmp: FCmp, ftz: bool = False) -> bool:
    """``setp.cmp.f32``."""
    if ftz:
        a, b = flush(a), flush(b)
    nan = is_nan(a) or is_nan(b)
    if cmp == FCmp.NUM:
        return not nan
    if cmp == FCmp.NAN:
        return nan
    if nan:
        return cmp >= FCmp.EQU
    x, y = _value_key(a), _value_key(b)
    base = FCmp(cmp - FCmp.EQU) if cmp >= FCmp.EQU else cmp
    return {FCmp.EQ: x == y, FCmp.NE: x != y, FCmp.LT: x < y, FCmp.LE: x <= y,
            FCmp.GT: x > y, FCmp.GE: x >= y}[base]


def _to_integer(sign: int, m: int, e: int, rnd: Round) -> int:
    """(-1)^sign · m · 2^e rounded to an integer by mode."""
    return (-1 if sign else 1) * _round_bits(sign, m, -e, rnd)


def to_int(w: int, signed: bool, rnd: Round, ftz: bool = False, bits: int = 32) -> int:
    """``cvt.rNi.{s,u}bits.f32`` as a word: rounded to an integer, saturated to the type's
    range, NaN → 0."""
    if ftz:
        w = flush(w)
    if is_nan(w):
        return 0
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if is_inf(w):
        value = lo if w & SIGN else hi
    else:
        value = min(max(_to_integer(*_parts(w), rnd), lo), hi)
    return value & 0xFFFF_FFFF


def from_int(x: int, signed: bool, rnd: Round = Round.RN, bits: int = 32) -> int:
    """``cvt.rnd.f32.{s,u}bits``: the integer in the low ``bits`` of word ``x``."""
    x &= (1 << bits) - 1
    if signed and x >> (bits - 1):
        x -= 1 << bits
    return round_value(int(x < 0), abs(x), 0, rnd)


def round_integral(w: int, rnd: Round, ftz: bool = False) -> int:
    """``cvt.rNi.f32.f32``: the integer nearest by mode, as a float (a zero keeps the sign)."""
    if ftz:
        w = flush(w)
    if is_nan(w):
        return CANONICAL_NAN
    sign, m, e = _parts(w)
    if is_inf(w) or e >= 0:
        return w
    r = _to_integer(sign, m, e, rnd)
    return round_value(sign, abs(r), 0, Round.RN)


def divide(a: int, b: int, rnd: Round = Round.RN, ftz: bool = False) -> int:
    """``div.rnd.f32``: a / b correctly rounded."""
    if ftz:
        a, b = flush(a), flush(b)
    if is_nan(a) or is_nan(b):
        return CANONICAL_NAN
    sign = (a ^ b) >> 31
    if (is_inf(a) and is_inf(b)) or (is_zero(a) and is_zero(b)):
        return CANONICAL_NAN
    if is_inf(a) or is_zero(b):
        return sign << 31 | INF
    if is_inf(b) or is_zero(a):
        return sign << 31
    _, ma, ea = _parts(a)
    _, mb, eb = _parts(b)
    return from_fraction(Fraction(ma, mb) * Fraction(2) ** (ea - eb), rnd, ftz, sign)


def sqrt(a: int, rnd: Round = Round.RN, ftz: bool = False) -> int:
    """``sqrt.rnd.f32``: correctly rounded; sqrt(-0) = -0, negative → NaN."""
    if ftz:
        a = flush(a)
    if is_nan(a) or (a & SIGN and not is_zero(a)):
        return CANONICAL_NAN
    if is_zero(a) or is_inf(a):
        return a
    _, m, e = _parts(a)
    if e & 1:
        m, e = m << 1, e - 1
    scale = 60  # 2·scale extra bits: far more than the 24 + 2 the rounding needs
    root = math.isqrt(m << (2 * scale))
    sticky = int(root * root != m << (2 * scale))
    return round_value(0, root << 1 | sticky, e // 2 - scale - 1, rnd, ftz)


def reciprocal(a: int, rnd: Round = Round.RN, ftz: bool = False) -> int:
    """``rcp.rnd.f32``: 1 / a correctly rounded."""
    return divide(ONE, a, rnd, ftz)


def from_fraction(x: Fraction, rnd: Round = Round.RN, ftz: bool = False,
                  sign: int | None = None) -> int:
    """The word nearest (by mode) to an exact rational; ``sign`` gives a zero's sign."""
    if x == 0:
        return (sign or 0) << 31
    s = int(x < 0) if sign is None else sign
    p, q = abs(x.numerator), x.denominator
    k = PRECISION + 2 + q.bit_length() - p.bit_length()  # ≥ 26 quotient bits
    quotient, rest = divmod(p << k, q) if k >= 0 else divmod(p, q << -k)
    return round_value(s, quotient << 1 | int(rest != 0), -k - 1, rnd, ftz)


# --- host I/O: decimals and Python floats -----------------------------------------------------


def from_decimal(text: str | Decimal | int | float) -> int:
    """A number as C would round it to float: a decimal (``"0.1"``, ``"2.5e-3"``) or an int to
    the nearest binary32 directly (never through a double), ``"nan"``, ``"inf"``, ``"-inf"``."""
    if isinstance(text, float):
        if math.isnan(text):
            return CANONICAL_NAN
        if math.isinf(text):
            return INF | (SIGN if text < 0 else 0)
        return from_fraction(Fraction(text), sign=int(math.copysign(1, text) < 0))
    value = Decimal(text) if isinstance(text, str) else Decimal(text)
    if value.is_nan():
        return CANONICAL_NAN
    if value.is_infinite():
        return INF | (SIGN if value < 0 else 0)
    return from_fraction(Fraction(value), sign=int(value.is_signed()))


def to_float(w: int) -> float:
    """The word's value as a Python float (exact: every binary32 is a double)."""
    if is_nan(w):
        return math.nan
    if is_inf(w):
        return -math.inf if w & SIGN else math.inf
    sign, m, e = _parts(w)
    return math.copysign(math.ldexp(m, e), -1.0 if sign else 1.0)


def shortest(w: int) -> str:
    """The shortest decimal that reads back as this word (``repr`` style: ``1.5``, ``3.0``,
    ``1e-45``, ``inf``, ``-inf``, ``nan``)."""
    if is_nan(w) or is_inf(w):
        return repr(to_float(w))
    x = to_float(w)
    if x == 0:
        return repr(x)
    with localcontext() as ctx:
        ctx.prec = 200  # exact: a binary32 has at most 112 significant decimal digits
        exact = Decimal(x)
        for digits in range(1, 10):
            step = Decimal(1).scaleb(exact.adjusted() - digits + 1)  # the last digit's unit
            down = int(exact.quantize(step, rounding=ROUND_FLOOR).scaleb(-step.adjusted()))
            fits = [n for n in (down, down + 1) if from_decimal(n * step) == w]
            if fits:  # the nearer one; a tie goes to the even last digit, as numpy's does
                best = min(fits, key=lambda n: (abs(n * step - exact), n % 2))
                return repr(float(best * step))
    raise AssertionError(f"no decimal of 9 digits reads back as {w:#010x}")  # binary32 needs ≤ 9


class Float32(float):
    """A binary32 result on the host: equal to its exact value, printed as the shortest decimal
    that reads back as the same word (``repr(Float32(0.1f)) == "0.1"``, where the double's
    repr would be 0.10000000149011612); ``bits`` is the word."""

    bits: int

    def __new__(cls, word: int) -> Float32:
        value = super().__new__(cls, to_float(word))
        value.bits = word & 0xFFFF_FFFF
        return value

    def __repr__(self) -> str:
        return shortest(self.bits)

    __str__ = __repr__

    def json(self) -> float | str:
        """For JSON: a number that prints as ``repr`` does, non-finite values as the strings
        ``"nan"``, ``"inf"``, ``"-inf"``."""
        return repr(self) if is_nan(self.bits) or is_inf(self.bits) else float(repr(self))
