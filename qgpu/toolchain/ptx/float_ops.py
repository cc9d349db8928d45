"""float32 PTX instructions as functions of their source words, for the PTX interpreter.

Every value is computed by ``qgpu.machine.float32`` (the one implementation of the machine's
float arithmetic); this module only decodes the modifiers (``.rn .rz .rm .rp``, ``.rni ..``,
``.ftz``, ``.sat``, ``.NaN``, comparisons) and composes module functions where PTX has an
operation the module does not name:

* ``neg``/``abs``: the GPU computes them as an FADD with a negated / absolute operand (SASS
  ``FADD d, -RZ, -a``), so they are ``-0 + (-a)`` and ``-0 + |a|``: the sign flipped / cleared,
  ``.ftz`` flushing a subnormal operand, and a NaN operand giving the canonical NaN (not the NaN
  with its sign changed, as a bit operation would).
* ``copysign.f32 d, a, b``: the sign of ``a`` (the FIRST source), the magnitude of ``b`` (NVRTC
  writes ``copysignf(x, y)`` as ``copysign.f32 d, y, x``). A bit operation on the GPU (LOP3), so
  a NaN magnitude keeps its payload, and it has no ``.ftz``.
* ``min/max.NaN``: the canonical NaN when either operand is NaN, else ``minimum``/``maximum``.
* ``cvt.rNi.{s,u}64.f32``: the low word is ``to_int(.., bits=64)``; the high word is the floor
  of the rounded value ``round_integral(a)`` scaled by 2^-32 (exact: the rounded value is an
  integer, so the scaled one is 0 or at least 2^-32) and converted with ``.rmi``, which
  saturates exactly where the 64-bit conversion does.
* ``.sat`` of a conversion to f32 and plain ``cvt{.ftz}{.sat}.f32.f32``: ``a + (-0)``, which is
  ``a`` itself for every non-NaN ``a`` (the canonical NaN for a NaN), flushed and clamped by the
  module's ``ftz``/``sat``.
* ``testp.normal``/``.subnormal``: IEEE classes; zero is neither.
* The approximate functions (``ex2 lg2 sin cos tanh rsqrt .approx``, ``rcp sqrt div .approx``,
  ``div.full``) run their macro from ``qgpu.machine.approx``: the machine instructions the
  lowering emits for them, evaluated with the machine interpreter's semantics.
"""

from __future__ import annotations

from collections.abc import Callable

from qgpu.machine import approx
from qgpu.machine import float32 as F
from qgpu.machine.float32 import FCmp, Round
from qgpu.toolchain.ptx.ast import is_signed, type_width

ROUNDING = {"rn": Round.RN, "rz": Round.RZ, "rm": Round.RM, "rp": Round.RP,
            "rni": Round.RN, "rzi": Round.RZ, "rmi": Round.RM, "rpi": Round.RP}
BOOL: dict[str, Callable[[int, int], int]] = {
    "and": lambda p, c: p & c,
    "or": lambda p, c: p | c,
    "xor": lambda p, c: p ^ c,
}
TWO_POW_MINUS_32 = 0x2F80_0000  # 2^-32 as a word
_TESTP: dict[str, Callable[[int], bool]] = {
    "finite": lambda a: not (F.is_nan(a) or F.is_inf(a)),
    "infinite": F.is_inf,
    "number": lambda a: not F.is_nan(a),
    "notanumber": F.is_nan,
    "normal": lambda a: not (F.is_nan(a) or F.is_inf(a) or F.is_zero(a) or F.is_subnormal(a)),
    "subnormal": F.is_subnormal,
}
_SET_TRUE = {"u32": 0xFFFF_FFFF, "s32": 0xFFFF_FFFF, "f32": F.ONE}


def is_f32(mods: tuple[str, ...]) -> bool:
    """True for a float32 instruction (a conversion from or to f32 included)."""
    return "f32" in mods


def rounding(mods: tuple[str, ...]) -> Round:
    """The rounding mode a modifier names; none is round to nearest even."""
    return next((ROUNDING[m] for m in mods if m in ROUNDING), Round.RN)


def compare(mods: tuple[str, ...]) -> Callable[[int, int], bool]:
    """``setp``/``set``'s comparison of two words (the first modifier), with ``.ftz``."""
    cmp, ftz = FCmp[mods[0].upper()], "ftz" in mods

    def fcmp(a: int, b: int) -> bool:
        return F.compare(a, b, cmp, ftz)

    return fcmp


def atomic_add(old: int, b: int, *, signed: bool = False) -> int:
    """``atom/red.add.f32``: rounds to nearest even and flushes subnormal inputs and results."""
    return F.add(old, b, Round.RN, ftz=True)


def _saturate(w: int) -> int:
    """``.sat`` on a result: clamped to [+0, 1], NaN to +0 (a + (-0) is a)."""
    return F.add(w, F.SIGN, Round.RN, ftz=False, sat=True)


def semantics(op: str, mods: tuple[str, ...],
              n_src: int) -> tuple[Callable[..., int], str, list[int]]:
    """A float32 ALU instruction as (function of its source words, result type, source
    widths), the interpreter's ``_semantics`` contract (selp: whether the first is taken)."""
    rnd, ftz, sat = rounding(mods), "ftz" in mods, "sat" in mods
    words = [32] * n_src
    if op == "mov":
        return (lambda a: a), "f32", words
    if op == "selp":
        return bool, "f32", [32, 32, 1]
    if op in ("add", "sub", "mul"):
        arith = {"add": F.add, "sub": F.sub, "mul": F.mul}[op]

        def binary(a: int, b: int) -> int:
            return arith(a, b, rnd, ftz, sat)

        return binary, "f32", words
    if op in ("fma", "mad"):
        return (lambda a, b, c: F.fma(a, b, c, rnd, ftz, sat)), "f32", words
    if op == "neg":
        return (lambda a: F.add(F.SIGN, a ^ F.SIGN, Round.RN, ftz)), "f32", words
    if op == "abs":
        return (lambda a: F.add(F.SIGN, a & F.MAGNITUDE, Round.RN, ftz)), "f32", words
    if op in ("min", "max"):
        pick = F.minimum if op == "min" else F.maximum
        nan = "NaN" in mods

        def min_max(a: int, b: int) -> int:
            if nan and (F.is_nan(a) or F.is_nan(b)):
                return F.CANONICAL_NAN
            return pick(a, b, ftz)

        return min_max, "f32", words
    fixed = approx.for_instruction(op, mods)
    if fixed is not None:  # one fixed algorithm: the macro the lowering emits
        return fixed, "f32", words
    if op == "div":
        return (lambda a, b: F.divide(a, b, rnd, ftz)), "f32", words
    if op == "sqrt":
        return (lambda a: F.sqrt(a, rnd, ftz)), "f32", words
    if op == "rcp":
        return (lambda a: F.reciprocal(a, rnd, ftz)), "f32", words
    if op == "copysign":
        return (lambda a, b: a & F.SIGN | b & F.MAGNITUDE), "f32", words
    if op == "testp":
        test = _TESTP[mods[0]]
        return (lambda a: int(test(a))), "pred", words
    if op == "set":
        return _set(mods), mods[-2], [32, 32, 1][:n_src]
    if op == "cvt":
        return _convert(mods, rnd, ftz, sat)
    raise AssertionError(f"{op}.{'.'.join(mods)}: not a float32 instruction the parser accepts")


def _set(mods: tuple[str, ...]) -> Callable[..., int]:
    """``set.cmp[.bool][.ftz].dtype.f32``: all ones (u32, s32) or 1.0 (f32) when true."""
    fcmp = compare(mods)
    combine = next((BOOL[m] for m in mods if m in BOOL), None)
    true = _SET_TRUE[mods[-2]]

    def set_(a: int, b: int, c: int = 0) -> int:
        p = int(fcmp(a, b))
        if combine is not None:
            p = combine(p, c)
        return true if p else 0

    return set_


def _convert(mods: tuple[str, ...], rnd: Round, ftz: bool,
             sat: bool) -> tuple[Callable[..., int], str, list[int]]:
    dtype, atype = mods[-2:]
    if dtype == atype:  # cvt{.irnd}{.ftz}{.sat}.f32.f32
        if not any(m in ROUNDING for m in mods):
            return (lambda a: F.add(a, F.SIGN, Round.RN, ftz, sat)), "f32", [32]

        def integral(a: int) -> int:
            w = F.round_integral(a, rnd, ftz)
            return _saturate(w) if sat else w

        return integral, "f32", [32]
    if dtype == "f32":  # from an integer
        bits, signed = type_width(atype), is_signed(atype)

        def from_int(x: int) -> int:
            w = F.from_int(x, signed, rnd, bits)
            return _saturate(w) if sat else w

        return from_int, "f32", [bits]
    bits, signed = type_width(dtype), is_signed(dtype)  # to an integer: saturating, NaN -> 0
    if bits <= 32:
        return (lambda a: F.to_int(a, signed, rnd, ftz, bits)), dtype, [32]

    def to_int64(a: int) -> int:
        low = F.to_int(a, signed, rnd, ftz, 64)
        scaled = F.mul(F.round_integral(a, rnd, ftz), TWO_POW_MINUS_32)
        return F.to_int(scaled, signed, Round.RM) << 32 | low

    return to_int64, dtype, [32]
