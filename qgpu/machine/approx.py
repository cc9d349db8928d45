"""PTX's approximate float32 instructions as fixed straight-line machine *macros*.

The PTX ISA leaves the bits of ``ex2 lg2 sin cos tanh rsqrt .approx``, ``rcp sqrt div .approx`` and
``div.full`` to the hardware, within stated error bounds. qgpu defines ONE algorithm per
instruction, written once here as a short list of machine instructions (``Step``: an
``isa.Op`` over symbolic registers, float constants as immediates or loaded into registers) with
no branches: special inputs (NaN, infinities, zeros, subnormals and ``.ftz``, overflow and
underflow, negative arguments, huge angles) are chosen with compares and ``SEL``. The same list
runs two ways, so the two interpreters agree bit for bit by construction:

* ``evaluate`` runs it on input words with the machine interpreter's ``alu`` and compare (the
  PTX interpreter's semantics of these instructions: ``toolchain/ptx/float_ops.py``);
* the lowering (``toolchain/lower/select/float_approx.py``) emits the same steps into the IR with
  fresh virtual registers and predicates.

The machine's rules hold for every step: ``a`` is a register (a constant the operation needs
elsewhere than in ``B`` is loaded first with ``add t, r0, imm``), an immediate is only ``B``,
``FFMA``'s addend ``c`` is a register; float steps land in slots 1 and 3 (the layout places
them). The output is written once, by the last step; inputs are never written.

The algorithms, their costs and their measured errors are tabulated in docs/ISA.md ("Float"),
what the CUDA math library makes of them in docs/FLOAT.md; tests/machine/test_approx.py holds
each within the PTX ISA's bound over a million inputs. u is 2^-24.

* ``ex2``: x clamped to [-152, 128] on its word (two integer min); n = round(x) and f = x - n
  (exact) by adding and subtracting a magic 1.5·2^23 + 191; 2^f on [-1/2, 1/2] by a degree-6
  polynomial (constant term 1, relative error 2^-28.9) whose coefficients are scaled by 2^-64;
  2^n applied in an exact step and a rounded one: the magic's low bits hold n + 191, so
  ``shl t, 22`` masked is floor((n+191)/2) << 23, added to the polynomial's word (exact: the
  result is normal), and ``shl t, 23`` minus that is the word of 2^(ceil((n+191)/2) - 127): one
  FMUL rounds once, so subnormal results are right and large ones overflow to infinity. NaN is
  chosen at the end.
* ``lg2``: subnormal inputs (without ``.ftz``) go through ``I2F`` of their word (x·2^149,
  exact); the word minus that of √½ gives k (arithmetic shift) and m in [√½, √2) (the low bits
  plus √½'s word); log2(x) = k + t·P(t), t = m - 1 (exact), P of degree 7 (absolute error
  2^-24.3), one final FFMA. Specials replace k by -inf (zeros, and subnormals under ``.ftz``),
  or by ``x·inf + inf``: +inf for +inf, NaN for every negative input and NaN.
* ``sin``/``cos``: k = round(x/π) from a magic FFMA; r = x - kπ by a two-constant Cody–Waite
  reduction (π rounded down and the float of the rest, both subtracted as k·(-part), so that
  x = ±0 keeps r = ±0; accurate to about 2^-25 for |x| < 2^23); the sign (-1)^k is the magic's
  low bit shifted into the sign bit. sin = r + r³·S(r²), S of degree 3 (absolute error 2^-27.7;
  r² rounded down, so that a zero r keeps its sign through the sum), the sign XORed into r;
  cos = ±(1 + r²·C(r²)), C of degree 3 (absolute error 2^-24.2), the sign XORed into r² and 1.
  For 2^23 <= |x| < inf the reduction has no accurate bits left: sin gives 0 and cos 1 (PTX
  bounds nothing outside [-100π, 100π]); infinities and NaN give NaN through the reduction.
* ``tanh``: x·P(x²)/Q(x²) with P, Q of degree 2 (P(0) = Q(0) = 1: relative error 2^-15 on
  [0, 4.5]); 1/Q is the magic reciprocal seed refined by one cubic step y0·(1 + e + e²),
  e = 1 - Q·y0 (relative error below 1.3e-4); |x| < 2^-12 gives x itself (subnormals pass
  through, as PTX says), 4.5 <= |x| <= inf gives ±1 (1 - tanh(4.5) < 2^-11.9); NaN flows.
* ``rcp``: x scaled by S = 2^(128 - max(E, 1)) (E its exponent field; exact: |x·S| in [2, 4),
  or in [2^-22, 2) for a subnormal x); the magic seed 0x7EF31180 - x (|1 - x·y0| <= 0.0506), a
  cubic step and a Newton step (relative error about 2^-25.8); one FMUL by S rounds once, into
  the subnormals too. Zeros and infinities (and, under ``.ftz``, subnormals) give their sign
  and exponent bits XORed with infinity's; NaN flows through (S is 0).
* ``rsqrt``/``sqrt``: subnormal inputs (without ``.ftz``) as ``I2F`` of twice their word
  (x·2^150, exact); seed 0x5F3759DF - (x >> 1); a cubic step y0·(1 + e/2 + 3e²/8),
  e = 1 - x·y0². rsqrt: a Newton step (relative error about 2^-25.9) and 2^75 back for
  subnormals (an exponent add). sqrt: g = x·y1, then g + (x - g²)·y1/2 (faithful), 2^-75 back.
  Zeros and +inf from their bits, negative inputs (-inf included) NaN.
* ``div.approx``: a·R, R the ``rcp`` above with subnormal results flushed (PTX: "computed as
  a·(1/b)"; |b| > 2^126 gives a signed zero, or NaN for an infinite a).
* ``div.full``: a and b both multiplied by 1/4 when |b| > 2^126 (infinity and NaN included)
  and by 2^24 when b is subnormal (without ``.ftz``), then a·rcp(b): every quotient is one
  rounding of a·R, R within 0.9 ulp (2 ulp over the full range).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from qgpu.machine import float32 as F
from qgpu.machine.float32 import Round
from qgpu.machine.interp import alu, compare
from qgpu.machine.isa import FLOAT_OPS, FTZ, PRED_DEST_OPS, Cmp, Instr, Op

MASK32 = 0xFFFF_FFFF
ZERO = ""
"""The zero register r0 as a macro operand."""
OUTPUT = "out"
"""The register the last step writes: the instruction's destination."""

NAN = F.CANONICAL_NAN
INF = F.INF
NINF = F.SIGN | F.INF
ONE = F.ONE
HALF = 0x3F00_0000
SIGN = F.SIGN
MAGNITUDE = F.MAGNITUDE
EXPONENT = F.EXPONENT
SIGN_EXPONENT = SIGN | EXPONENT
MIN_NORMAL = 0x0080_0000


def word(x: float | Fraction | int) -> int:
    """The binary32 word nearest to a real number (exact for the constants below)."""
    return F.from_fraction(Fraction(x))


@dataclass(frozen=True)
class Step:
    """One machine instruction over symbolic registers: ``d a b c`` name registers (predicates
    where ``isa`` says so; ``ZERO`` is r0), an int ``b`` is the immediate, an int ``c`` is
    FSETP's ftz flag."""

    op: Op
    d: str
    a: str = ZERO
    b: str | int = ZERO
    c: str | int = ZERO
    mod: int = 0

    def text(self) -> str:
        b = f"{self.b & MASK32:#x}" if isinstance(self.b, int) else self.b or "r0"
        c = f", {self.c}" if self.c not in (ZERO, 0) else ""
        return f"{self.op.name.lower()}/{self.mod} {self.d}, {self.a or 'r0'}, {b}{c}"


@dataclass(frozen=True)
class Macro:
    """A straight-line macro: ``steps`` read ``inputs`` and write ``OUTPUT`` last."""

    name: str
    inputs: tuple[str, ...]
    steps: tuple[Step, ...]

    def __post_init__(self) -> None:
        """Check the macro's form: each register read after it is written, each predicate
        selected on after it is set, FFMA's addend a register, the output written by the last
        step only, no input overwritten."""
        written = set(self.inputs) | {ZERO}
        preds: set[str] = set()
        for i, s in enumerate(self.steps):
            reads = [s.a] + ([s.b] if isinstance(s.b, str) else [])
            if s.op == Op.FFMA:
                if not isinstance(s.c, str) or not s.c:
                    raise ValueError(f"{self.name}: step {i}: FFMA's addend must be a register")
                reads.append(s.c)
            if s.op == Op.SEL and s.c not in preds:
                raise ValueError(f"{self.name}: step {i} selects on unset {s.c!r}")
            if s.op == Op.PLOP:
                raise ValueError(f"{self.name}: step {i}: PLOP is not supported in macros")
            for r in reads:
                if r not in written:
                    raise ValueError(f"{self.name}: step {i} reads {r!r} before it is written")
            if s.op in PRED_DEST_OPS:
                preds.add(s.d)
                continue
            if s.d in self.inputs or s.d == ZERO:
                raise ValueError(f"{self.name}: step {i} writes {s.d!r}")
            if (s.d == OUTPUT) != (i == len(self.steps) - 1):
                raise ValueError(f"{self.name}: only the last step writes {OUTPUT!r}")
            written.add(s.d)

    @property
    def float_steps(self) -> int:
        """Steps that need the float unit (slots 1 and 3)."""
        return sum(s.op in FLOAT_OPS for s in self.steps)

    def text(self) -> str:
        return "\n".join(s.text() for s in self.steps)

    def __call__(self, *words: int) -> int:
        return _compiled(self)(*words)


def evaluate(macro: Macro, *words: int) -> int:
    """Run a macro on input words with the machine interpreter's semantics."""
    return _compiled(macro)(*words)


@functools.cache
def _compiled(macro: Macro) -> Callable[..., int]:
    """The macro as a function of its input words (each step a closure over the interpreter's
    ``alu`` and compare)."""
    program: list[Callable[[dict[str, int], dict[str, bool]], None]] = []
    for s in macro.steps:
        program.append(_step(s))
    inputs = macro.inputs

    def run(*words: int) -> int:
        regs = {ZERO: 0}
        for name, w in zip(inputs, words, strict=True):
            regs[name] = w & MASK32
        preds: dict[str, bool] = {}
        for fn in program:
            fn(regs, preds)
        return regs[OUTPUT]

    return run


def _step(s: Step) -> Callable[[dict[str, int], dict[str, bool]], None]:
    op, d, a, b, c, mod = s.op, s.d, s.a, s.b, s.c, s.mod
    imm = b & MASK32 if isinstance(b, int) else None
    if op in (Op.SETP, Op.FSETP):
        ins = Instr(op, mod=mod, c=int(c) if isinstance(c, int) else 0)

        def set_predicate(regs: dict[str, int], preds: dict[str, bool]) -> None:
            preds[d] = compare(ins, regs[a], imm if imm is not None else regs[b])

        return set_predicate
    if op == Op.SEL:
        negated = bool(mod & 1)

        def select(regs: dict[str, int], preds: dict[str, bool]) -> None:
            regs[d] = regs[a] if preds[c] != negated else (imm if imm is not None else regs[b])

        return select
    def arith(regs: dict[str, int], preds: dict[str, bool]) -> None:
        regs[d] = alu(op, regs[a], imm if imm is not None else regs[b],
                      regs[c] if isinstance(c, str) and c else 0, mod) & MASK32

    return arith


class _Build:
    """Collects a macro's steps; each method appends one and returns its destination's name."""

    def __init__(self, name: str, inputs: tuple[str, ...]) -> None:
        self.name, self.inputs = name, inputs
        self.steps: list[Step] = []

    def _new(self, pred: bool) -> str:
        return f"{'p' if pred else 't'}{len(self.steps)}"

    def op(self, op: Op, a: str = ZERO, b: str | int = ZERO, c: str | int = ZERO,
           mod: int = 0) -> str:
        d = self._new(op in PRED_DEST_OPS)
        self.steps.append(Step(op, d, a, b, c, mod))
        return d

    def load(self, w: int) -> str:
        return self.op(Op.ADD, ZERO, w)

    def setp(self, cmp: Cmp, a: str, b: str | int) -> str:
        return self.op(Op.SETP, a, b, mod=cmp)

    def sel(self, pred: str, if_true: str, if_false: str | int, negate: bool = False) -> str:
        """``pred ? if_true : if_false`` (``negate``: on the predicate's negation)."""
        return self.op(Op.SEL, if_true, if_false, pred, mod=int(negate))

    def horner(self, x: str, coeffs: list[int], mod: int = Round.RN) -> str:
        """c[0] + x·(c[1] + x·(... + x·c[-1])): one FFMA per coefficient after the first two,
        the highest an immediate, each addend loaded just before its FFMA."""
        acc = self.op(Op.FFMA, x, coeffs[-1], self.load(coeffs[-2]), mod=mod)
        for cw in reversed(coeffs[:-2]):
            acc = self.op(Op.FFMA, acc, x, self.load(cw), mod=mod)
        return acc

    def done(self) -> Macro:
        last = self.steps[-1]
        self.steps[-1] = Step(last.op, OUTPUT, last.a, last.b, last.c, last.mod)
        return Macro(self.name, self.inputs, tuple(self.steps))


def _scaled(w: int, k: int) -> int:
    """A normal float's word times 2^k (exact)."""
    return w + (k << 23)


# --- ex2 ------------------------------------------------------------------------------------
EX2_MAGIC = 0x4B40_00BF  # 1.5·2^23 + 191: t = magic + round(x) holds n + 191 in its low bits
EX2_POLY = [ONE, 0x3F31_7218, 0x3E75_FDEE, 0x3D63_5774, 0x3C1D_96A6, 0x3AAF_9F29, 0x3920_FDDD]
"""2^f ≈ 1 + f·q(f) on [-1/2, 1/2] (minimax relative error 2^-28.9, q of degree 5)."""
EX2_SCALE = -64  # the polynomial's coefficients carry 2^-64, given back by floor((n+191)/2)


def _ex2(ftz: bool) -> Macro:
    b = _Build("ex2.approx" + ".ftz" * ftz, ("x",))
    xc = b.op(Op.MINU, "x", word(-152))  # negative words below -152 (and -inf, -NaN) -> -152
    xc = b.op(Op.MIN, xc, word(128))  # positive words above 128 (and +inf, +NaN) -> 128
    t = b.op(Op.FADD, xc, EX2_MAGIC)
    n = b.op(Op.FSUB, t, EX2_MAGIC)
    f = b.op(Op.FSUB, xc, n)  # exact, in [-1/2, 1/2]
    p = b.horner(f, [_scaled(c, EX2_SCALE) for c in EX2_POLY])  # 2^f · 2^-64
    u = b.op(Op.SHL, t, 23)  # (n + 191) << 23
    h = b.op(Op.SHL, t, 22)
    v = b.op(Op.AND, h, 0xFF80_0000)  # floor((n + 191) / 2) << 23
    r1 = b.op(Op.ADD, p, v)  # 2^f · 2^(floor((n+191)/2) - 64), normal
    s2 = b.op(Op.SUB, u, v)  # 2^(ceil((n+191)/2) - 127), normal
    r = b.op(Op.FMUL, r1, s2, mod=Round.RN | (FTZ if ftz else 0))
    a = b.op(Op.AND, "x", MAGNITUDE)
    nan = b.setp(Cmp.HI, a, INF)
    b.sel(nan, r, NAN, negate=True)
    return b.done()


# --- lg2 ------------------------------------------------------------------------------------
SQRT_HALF = 0x3F35_04F3
LG2_POLY = [0x3FB8_AA39, 0xBF38_AADD, 0x3EF6_3DB2, 0xBEB8_5D5A, 0x3E92_CB52, 0xBE80_090C,
            0x3E72_9367, 0xBE15_3E11]
"""log2(1 + t) ≈ t·P(t) on [√½ - 1, √2 - 1] (minimax absolute error 2^-24.3, P of degree 7)."""


def _lg2(ftz: bool) -> Macro:
    b = _Build("lg2.approx" + ".ftz" * ftz, ("x",))
    xx = "x"
    if not ftz:  # a subnormal's word as an integer is x·2^149: I2F normalizes it
        small = b.setp(Cmp.LO, "x", MIN_NORMAL)
        xs = b.op(Op.I2F, "x", mod=Round.RN)
        xs = b.op(Op.SUB, xs, 149 << 23)
        xx = b.sel(small, xs, "x")
    d = b.op(Op.SUB, xx, SQRT_HALF)
    k = b.op(Op.SRA, d, 23)  # the exponent of x / √½, rounded down
    m = b.op(Op.AND, d, 0x007F_FFFF)
    m = b.op(Op.ADD, m, SQRT_HALF)  # x's significand scaled into [√½, √2)
    ef = b.op(Op.I2F, k, mod=Round.RN | 4)  # I2F_SIGNED
    t = b.op(Op.FSUB, m, ONE)  # exact
    p = b.horner(t, LG2_POLY)
    # specials: -inf for zeros (and subnormals under .ftz), +inf for +inf, NaN for the rest
    lowest = MIN_NORMAL if ftz else 1
    a = b.op(Op.AND, "x", MAGNITUDE)
    zero = b.setp(Cmp.LO, a, lowest)
    u = b.op(Op.SUB, "x", lowest)
    ok = b.setp(Cmp.LO, u, INF - lowest)  # lowest <= x < +inf
    inf = b.load(INF)
    sp = b.op(Op.FFMA, "x", INF, inf)  # x·inf + inf: +inf for +inf, NaN for x < 0 and NaN
    sp = b.sel(zero, sp, NINF, negate=True)
    ef = b.sel(ok, ef, sp)
    b.op(Op.FFMA, p, t, ef)
    return b.done()


# --- sin, cos -------------------------------------------------------------------------------
MAGIC = 0x4B40_0000  # 1.5·2^23: magic + k holds k's parity in its low bit
INV_PI = 0x3EA2_F983  # float(1/π)
PI_HI = 0x4049_0FDA  # π rounded down: both parts positive, so k·(-part) is -0 for k = 0
PI_LO = 0x3422_2169  # float(π - PI_HI)
SIN_POLY = [0xBE2A_AAA4, 0x3C08_8734, 0xB94F_AFBF, 0x362E_794A]
"""sin(r) ≈ r + r³·S(r²) on [-π/2, π/2] (minimax absolute error 2^-27.7, S of degree 3)."""
COS_POLY = [0xBEFF_FFE9, 0x3D2A_A7D9, 0xBAB5_9C80, 0x37C2_8D4E]
"""cos(r) ≈ 1 + r²·C(r²) on [-π/2, π/2] (minimax absolute error 2^-24.2, C of degree 3)."""
TRIG_LIMIT = 0x4B00_0000  # 2^23: from there on, finite x gives sin 0 and cos 1


def _trig(name: str, ftz: bool) -> Macro:
    b = _Build(f"{name}.approx" + ".ftz" * ftz, ("x",))
    fz = FTZ if ftz else 0
    # x = kπ + r, k = round(x/π), |r| <= π/2; sin(x) = (-1)^k sin(r), cos(x) = (-1)^k cos(r)
    t = b.op(Op.FFMA, "x", INV_PI, b.load(MAGIC), mod=Round.RN | fz)  # magic + k
    k = b.op(Op.FSUB, t, MAGIC)
    r = b.op(Op.FFMA, k, PI_HI | SIGN, "x", mod=Round.RN | fz)  # x - k·PI_HI (x = ±0: ±0)
    r = b.op(Op.FFMA, k, PI_LO | SIGN, r)
    sign = b.op(Op.SHL, t, 31)  # k's parity as a sign
    a = b.op(Op.AND, "x", MAGNITUDE)
    if name == "sin":
        r = b.op(Op.XOR, r, sign)
        # r² rounded down, so that a zero r gives -0: then r + r³·S(r²) keeps a zero's sign
        r2 = b.op(Op.FFMA, r, r, b.load(SIGN), mod=Round.RM)
        p = b.horner(r2, SIN_POLY)
        r3 = b.op(Op.FMUL, r2, r)
        v = b.op(Op.FFMA, p, r3, r, mod=Round.RN | fz)  # r + r³·S(r²)
        u = b.op(Op.SUB, a, TRIG_LIMIT)
        huge = b.setp(Cmp.LO, u, INF - TRIG_LIMIT)  # 2^23 <= |x| < inf: 0
        b.sel(huge, v, 0, negate=True)
    else:
        r2 = b.op(Op.FMUL, r, r)
        p = b.horner(r2, COS_POLY)
        r2 = b.op(Op.XOR, r2, sign)
        one = b.op(Op.OR, sign, ONE)
        v = b.op(Op.FFMA, p, r2, one, mod=Round.RN | fz)  # ±(1 + r²·C(r²))
        u = b.op(Op.SUB, a, TRIG_LIMIT)
        huge = b.setp(Cmp.LO, u, INF - TRIG_LIMIT)  # 2^23 <= |x| < inf: 1
        b.sel(huge, v, ONE, negate=True)
    return b.done()


# --- tanh -----------------------------------------------------------------------------------
TANH_P = [ONE, 0x3DD5_5599, 0x3A3E_5A07]  # 1 + p1·s + p2·s², s = x²
TANH_Q = [ONE, 0x3EDF_EEDD, 0x3C5A_E709]  # 1 + q1·s + q2·s²
"""tanh(x) ≈ x·P(x²)/Q(x²) on [0, 4.5] (minimax relative error 2^-15.0)."""
RCP_MAGIC = 0x7EF3_1180  # 1/b ≈ magic - b on the words: |1 - b·y0| <= 0.0506
TANH_SATURATE = 0x4090_0000  # 4.5
TANH_TINY = 0x3980_0000  # 2^-12


def _tanh() -> Macro:
    b = _Build("tanh.approx", ("x",))
    s = b.op(Op.FMUL, "x", "x")
    a = b.op(Op.AND, "x", MAGNITUDE)
    q = b.op(Op.FFMA, s, TANH_Q[2] ^ SIGN, b.load(TANH_Q[1] ^ SIGN))
    p = b.op(Op.FFMA, s, TANH_P[2], b.load(TANH_P[1]))
    q = b.op(Op.FFMA, q, s, b.load(ONE | SIGN))  # -Q
    one = b.load(ONE)
    p = b.op(Op.FFMA, p, s, one)
    y = b.op(Op.SUB, b.load(RCP_MAGIC ^ SIGN), q)  # the seed of 1/Q (positive)
    e = b.op(Op.FFMA, q, y, one)  # 1 - Q·y0
    n = b.op(Op.FMUL, p, "x")
    u = b.op(Op.SUB, a, TANH_SATURATE)
    big = b.setp(Cmp.LO, u, INF + 1 - TANH_SATURATE)  # 4.5 <= |x| <= inf
    w = b.op(Op.FFMA, e, e, e)
    r = b.op(Op.FMUL, n, y)
    sign = b.op(Op.AND, "x", SIGN)
    sign = b.op(Op.OR, sign, one)
    r = b.op(Op.FFMA, r, w, r)  # x·P/Q·(1 - e³); NaN for NaN
    tiny = b.setp(Cmp.LO, a, TANH_TINY)
    r = b.sel(big, sign, r)
    b.sel(tiny, "x", r)
    return b.done()


# --- rcp, div -------------------------------------------------------------------------------
def _rcp(b: _Build, x: str, ftz: bool, flush: bool) -> str:
    """1/x (see the module's notes); ``ftz`` treats subnormal inputs as zeros, ``flush`` flushes
    subnormal results. Returns the result's register."""
    e = b.op(Op.AND, x, EXPONENT)
    em = b.op(Op.MAX, e, MIN_NORMAL)
    scale = b.op(Op.SUB, b.load(INF), em)  # 2^(128 - max(E, 1)); 0 for infinities and NaN
    xs = b.op(Op.FMUL, x, scale, mod=Round.RN | (FTZ if ftz else 0))  # ±[2, 4) for normal x
    one = b.load(ONE)
    y = b.op(Op.SUB, b.load(RCP_MAGIC ^ SIGN), xs)  # -y0
    d = b.op(Op.FFMA, xs, y, one)  # 1 - xs·y0
    w = b.op(Op.FFMA, d, d, d)
    y = b.op(Op.FFMA, y, w, y)  # -y0·(1 + d + d²)
    d = b.op(Op.FFMA, xs, y, one)
    y = b.op(Op.FFMA, y, d, y)  # -y2
    scale = b.op(Op.XOR, scale, SIGN)
    r = b.op(Op.FMUL, y, scale, mod=Round.RN | (FTZ if flush else 0))
    # zeros and infinities (subnormals too under .ftz): the sign and exponent XOR infinity's
    xa = b.op(Op.AND, x, MAGNITUDE)
    swapped = b.op(Op.XOR, xa, INF)
    z = b.op(Op.MINU, e if ftz else xa, swapped)
    special = b.setp(Cmp.EQ, z, 0)
    sp = b.op(Op.AND, x, SIGN_EXPONENT)
    sp = b.op(Op.XOR, sp, INF)
    return b.sel(special, sp, r)


def _rcp_macro(ftz: bool) -> Macro:
    b = _Build("rcp.approx" + ".ftz" * ftz, ("x",))
    _rcp(b, "x", ftz, ftz)
    return b.done()


def _div_approx(ftz: bool) -> Macro:
    b = _Build("div.approx" + ".ftz" * ftz, ("a", "b"))
    r = _rcp(b, "b", ftz, True)
    b.op(Op.FMUL, "a", r, mod=Round.RN | (FTZ if ftz else 0))
    return b.done()


DIV_FULL_BIG = 0x7E80_0000  # 2^126


def _div_full(ftz: bool) -> Macro:
    b = _Build("div.full" + ".ftz" * ftz, ("a", "b"))
    ba = b.op(Op.AND, "b", MAGNITUDE)
    big = b.setp(Cmp.HI, ba, DIV_FULL_BIG)
    scale = b.sel(big, b.load(word(0.25)), ONE)
    if not ftz:
        small = b.setp(Cmp.LO, ba, MIN_NORMAL)
        scale = b.sel(small, b.load(word(2 ** 24)), scale)
    a = b.op(Op.FMUL, "a", scale)
    d = b.op(Op.FMUL, "b", scale)
    r = _rcp(b, d, ftz, ftz)
    b.op(Op.FMUL, a, r, mod=Round.RN | (FTZ if ftz else 0))
    return b.done()


# --- rsqrt, sqrt ----------------------------------------------------------------------------
RSQRT_MAGIC = 0x5F37_59DF
RSQRT_SUBNORMAL = 75 << 23  # subnormal x is taken as x·2^150: rsqrt gets 2^75 back


def _rsqrt_seed(b: _Build, ftz: bool) -> tuple[str, str, str, str | None]:
    """(xx, -xx, y1, small): xx is x, or x·2^150 for a subnormal x (``small``, without .ftz);
    y1 ≈ 1/√xx after the cubic step, relative error about 1e-4 (+NaN stays NaN)."""
    xx, small = "x", None
    if not ftz:
        small = b.setp(Cmp.LO, "x", MIN_NORMAL)
        xs = b.op(Op.I2F, "x", mod=Round.RN)  # x·2^149
        xs = b.op(Op.ADD, xs, MIN_NORMAL)  # x·2^150
        xx = b.sel(small, xs, "x")
    h = b.op(Op.SHR, xx, 1)
    y = b.op(Op.SUB, b.load(RSQRT_MAGIC), h)
    xn = b.op(Op.XOR, xx, SIGN)
    one = b.load(ONE)
    t = b.op(Op.FMUL, xn, y)
    e = b.op(Op.FFMA, t, y, one)  # 1 - x·y0²
    c = b.op(Op.FFMA, e, word(0.375), b.load(HALF))
    c = b.op(Op.FMUL, e, c)
    y = b.op(Op.FFMA, y, c, y)  # y0·(1 + e/2 + 3e²/8)
    return xx, xn, y, small


def _zero_or_inf(b: _Build, ftz: bool) -> str:
    """The predicate x ∈ {±0, ±inf} (±subnormal too under .ftz)."""
    xa = b.op(Op.AND, "x", MAGNITUDE)
    swapped = b.op(Op.XOR, xa, INF)
    low = b.op(Op.AND, "x", EXPONENT) if ftz else xa
    z = b.op(Op.MINU, low, swapped)
    return b.setp(Cmp.EQ, z, 0)


def _rsqrt(ftz: bool) -> Macro:
    b = _Build("rsqrt.approx" + ".ftz" * ftz, ("x",))
    xx, xn, y, small = _rsqrt_seed(b, ftz)
    t = b.op(Op.FMUL, xn, y)
    e = b.op(Op.FFMA, t, y, b.load(ONE))
    yh = b.op(Op.SUB, y, MIN_NORMAL)  # y/2 (y is far above the subnormals)
    y = b.op(Op.FFMA, yh, e, y)  # y1·(1 + e/2)
    if small is not None:  # 2^75 back for a subnormal x
        y = b.op(Op.ADD, y, b.sel(small, ZERO, RSQRT_SUBNORMAL, negate=True))
    special = _zero_or_inf(b, ftz)
    sp = b.op(Op.AND, "x", SIGN_EXPONENT) if ftz else "x"
    sp = b.op(Op.XOR, sp, INF)  # ±0 -> ±inf, +inf -> +0 (-inf: NaN below)
    r = b.sel(special, sp, y)
    neg = b.setp(Cmp.HI, "x", SIGN | (MIN_NORMAL - 1 if ftz else 0))
    b.sel(neg, r, NAN, negate=True)
    return b.done()


def _sqrt(ftz: bool) -> Macro:
    b = _Build("sqrt.approx" + ".ftz" * ftz, ("x",))
    xx, xn, y, small = _rsqrt_seed(b, ftz)
    g = b.op(Op.FMUL, xx, y)  # √xx, relative error 1e-4
    gn = b.op(Op.XOR, g, SIGN)
    r = b.op(Op.FFMA, gn, g, xx)  # xx - g²
    yh = b.op(Op.SUB, y, MIN_NORMAL)
    s = b.op(Op.FFMA, r, yh, g)  # g + (xx - g²)·y1/2 (a root is never subnormal)
    if small is not None:  # 2^-75 back for a subnormal x (the root is normal: exact)
        s = b.op(Op.SUB, s, b.sel(small, ZERO, RSQRT_SUBNORMAL, negate=True))
    special = _zero_or_inf(b, ftz)
    sp = b.op(Op.AND, "x", SIGN_EXPONENT) if ftz else "x"  # ±0, +inf (and -inf: NaN below)
    r = b.sel(special, sp, s)
    neg = b.setp(Cmp.HI, "x", SIGN | (MIN_NORMAL - 1 if ftz else 0))
    b.sel(neg, r, NAN, negate=True)
    return b.done()


# --- the table ------------------------------------------------------------------------------
_BUILDERS: dict[str, Callable[[bool], Macro]] = {
    "ex2": _ex2, "lg2": _lg2, "sin": lambda ftz: _trig("sin", ftz),
    "cos": lambda ftz: _trig("cos", ftz), "tanh": lambda ftz: _tanh(), "rsqrt": _rsqrt,
    "rcp": _rcp_macro, "sqrt": _sqrt, "div.approx": _div_approx, "div.full": _div_full,
}
OPCODES = ("ex2", "lg2", "sin", "cos", "tanh", "rsqrt", "rcp", "sqrt", "div")
"""The PTX opcodes with approximate forms (``div`` has ``.approx`` and ``.full``)."""


def kind(opcode: str, mods: tuple[str, ...]) -> str | None:
    """The macro's key for an instruction (``div.full``, ``ex2``...), or None when the
    instruction is not an approximate one (``div.rn``...)."""
    if opcode == "div":
        return "div.approx" if "approx" in mods else "div.full" if "full" in mods else None
    if opcode in OPCODES and "approx" in mods:
        return opcode
    return None


def _build(key: str, ftz: bool) -> Macro:
    """The macro as its builder writes it (dataflow order)."""
    return _BUILDERS[key](ftz)


@functools.cache
def macro(key: str, ftz: bool) -> Macro:
    """The macro of ``key`` (``kind``'s answer) with or without ``.ftz`` (tanh has none), its
    steps in ``ORDER``."""
    built = _build(key, ftz)
    order = ORDER.get(built.name)
    if order is None:
        return built
    by_name = {s.d: s for s in built.steps}
    names = order.split()
    if sorted(names) != sorted(by_name):
        raise ValueError(f"approx.ORDER[{built.name!r}] names other steps than the macro "
                         f"(regenerate it: python -m tests.machine.approx_order)")
    return Macro(built.name, built.inputs, tuple(by_name[n] for n in names))


def for_instruction(opcode: str, mods: tuple[str, ...]) -> Macro | None:
    key = kind(opcode, mods)
    return None if key is None else macro(key, "ftz" in mods)


ORDER: dict[str, str] = {
    "ex2.approx": (
        "t0 t5 t1 t7 t2 t3 t4 t6 t8 t23 t9 t10 t11 t12 t13 t18 t14 t15 t19 t16 t20 t17 "
        "p24 t21 t22 out"
    ),
    "ex2.approx.ftz": (
        "t0 t5 t1 t7 t2 t3 t4 t6 t8 t23 t9 t10 t11 t12 t13 t18 t14 t15 t19 t16 t20 t17 "
        "p24 t21 t22 out"
    ),
    "lg2.approx": (
        "t1 t2 t28 p0 t3 t4 t6 t5 t8 t7 t10 t12 t9 t11 t13 t14 t26 t15 t16 t17 t18 t19 "
        "t20 t21 t24 p27 t22 t23 p25 t29 t30 t31 out"
    ),
    "lg2.approx.ftz": (
        "t0 t1 t4 t2 t24 t3 t6 t5 t8 t7 t9 t22 p23 t10 t11 t12 t13 t14 t20 t15 t16 t17 "
        "p21 t18 t19 t25 t26 t27 out"
    ),
    "sin.approx": "t0 t1 t2 t5 t3 t6 t12 t4 t7 t18 t8 t9 t10 t11 p19 t13 t14 t15 t16 t17 out",
    "sin.approx.ftz": "t0 t1 t2 t5 t3 t6 t12 t4 t7 t18 t8 t9 t10 t11 p19 t13 t14 t15 t16 t17 out",
    "cos.approx": "t0 t1 t2 t12 t5 t3 t8 t4 t7 t6 t9 t10 t11 t17 t14 t13 t15 t16 p18 out",
    "cos.approx.ftz": "t0 t1 t2 t12 t5 t3 t8 t4 t7 t6 t9 t10 t11 t17 t14 t13 t15 t16 p18 out",
    "tanh.approx": (
        "t0 t4 t18 t1 t8 t2 t3 t6 t7 t14 t5 t9 t10 t13 t11 t17 t12 t16 t20 t19 p15 t22 "
        "p21 out"
    ),
    "rsqrt.approx": (
        "t1 t8 t2 p0 t3 t5 t4 t6 t7 t9 t10 t11 t12 t13 t14 t16 t18 t15 t17 t19 t20 t21 "
        "t22 t23 t24 p25 t26 t27 p28 out"
    ),
    "rsqrt.approx.ftz": (
        "t0 t4 t3 t1 t2 t5 t6 t7 t8 t9 t10 t11 t12 t13 t14 t15 t16 t17 t18 t19 p20 t21 "
        "t22 t23 p24 out"
    ),
    "sqrt.approx": (
        "p0 t1 t2 t3 t4 t7 t5 t6 t9 t8 t10 t11 t12 t13 t14 t15 t16 p27 t17 t18 t19 t20 "
        "t21 t22 t23 t24 p25 t26 out"
    ),
    "sqrt.approx.ftz": (
        "t1 p23 t7 t0 t2 t3 t5 t4 t6 t8 t16 t9 t10 t14 t11 t12 t13 t17 t15 t18 t21 t19 "
        "p20 t22 out"
    ),
    "rcp.approx": "t0 t1 t2 t3 t6 t4 t7 t13 t5 t8 t9 t10 t11 t12 t19 t14 t15 t16 t17 p18 t20 out",
    "rcp.approx.ftz": (
        "t2 t0 t1 t3 t6 t4 t7 t13 t5 t8 t9 t10 t11 t12 t19 t14 t15 t16 t17 p18 t20 out"
    ),
    "div.approx": (
        "t0 t2 t5 t1 t3 t6 t4 t13 t7 t8 t9 t10 t11 t12 t14 t15 t16 t17 p18 t19 t20 t21 "
        "out"
    ),
    "div.approx.ftz": (
        "t0 t2 t5 t1 t3 t6 t4 t13 t7 t8 t9 t10 t11 t12 t14 t15 t16 t17 p18 t19 t20 t21 "
        "out"
    ),
    "div.full": (
        "t0 p4 t14 p1 t5 t2 t3 t6 t8 t9 t11 t10 t12 t13 t15 t16 t22 t17 t18 t19 t20 t21 "
        "t23 t24 t25 t26 p27 t7 t28 t29 t30 out"
    ),
    "div.full.ftz": (
        "t12 t0 p1 t11 t2 t3 t5 t6 t4 t8 t7 t9 t10 t13 t14 t15 t16 t17 t18 t19 t20 t21 "
        "t22 t23 p24 t25 t26 t27 out"
    ),
}
"""Program order of each macro's steps (by destination name): the builders write them in
dataflow order, and the lowering packs a basic block greedily in program order, so the order of
independent steps decides which values cross ROM blocks (each costs write-back tokens). These
orders are a local search's best on generated tokens (tests/machine/approx_order.py, which
prints this table)."""
