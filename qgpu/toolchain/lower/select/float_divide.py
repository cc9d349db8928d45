"""div, sqrt and rcp on float32 (``.rn .rz .rm .rp``, with or without ``.ftz``): the machine has
no divider and no square root, so each becomes a short sequence of its float and integer
instructions whose result is, for every input, the word ``qgpu/machine/float32.py``'s
``divide``/``sqrt``/``reciprocal`` return (canonical NaN, subnormals rounded once at their own
position or flushed under ``.ftz``). ``.approx`` and ``.full`` are ``float_approx``'s macros.

Each instruction is a *fast path* — straight-line code for operands in a box where every
intermediate value is a normal float, ending in a branch — and a *slow path* for every input
(specials, subnormals, quotients that overflow or are subnormal), which scales the operands with
exact integer operations on their words. Constant operands are computed here instead (all of
them: the result; a divisor: its correctly rounded reciprocal, so that ``x / 3.0f`` is 14
instructions). Why each step is exact (u = 2^-24, the unit roundoff of round to nearest):

Division ``x = a / b`` (``rcp`` is ``1 / b`` with the same steps, q0 = y1):

1. Seed: ``y0 = M - b`` on the words (M = 0x7EF31180) is 1/b to within |1 - b*y0| <= 0.05052
   for every b whose exponent keeps ``y0`` normal (checked over all 2^23 significands). One cubic
   step ``y1 = y0 (1 + e + e^2)``, e = 1 - b*y0 (two FFMAs), has b*y1 = 1 - e^3 up to roundings:
   |1 - b*y1| <= 1.2897e-4 =: d.
2. ``q0 = a*y1``, ``r0 = a - b*q0``, ``z = q0 + r0*y1`` (exactly, before the FFMA rounds it)
   satisfies |z - x| <= x (d + u + du)^2 < 0.56 * 2^-25 x, so ``q1 = RN(z)`` is *faithful*:
   one of the two floats around x (the next ones out are at least 2^-25 x away). A quotient of
   two 24-bit significands is never within 2^-24 of a power of two from below, so q1 lies in
   x's binade.
3. ``r1 = a - b*q1`` (one FFMA) is exact: a multiple of ulp(q1) ulp(b) below |b| ulp(q1) in
   magnitude, 24 bits hold it. ``x - q1 = r1 / b`` exactly.
4. Rounding, decided exactly. Directed modes: ``FFMA.mode(-r1/8, -y1, q1)`` — the addend
   r1*y1/8, exact inside the FFMA, has the sign of x - q1, is zero only when x = q1 and is below
   ulp(q1)/7, so q1 plus it lies between the same two floats as x and every directed mode rounds
   both alike. Nearest: x is never a midpoint (a 25-bit significand times a 24-bit one has more
   than 24 bits), so RN(x) is q1 unless |x - q1| > ulp(q1)/2, i.e. |r1| > |b| ulp(q1)/2 — an
   integer comparison of two non-negative floats, the second made exactly by adding q1's exponent
   to b's word. Where it holds, ``FFMA(RN(-1.25 r1), -y1, q1)`` moves exactly one ulp towards x:
   its addend 1.25 (x - q1)(1 +- 1.3e-4) lies strictly between ulp/2 and 3ulp/2.

The fast path takes |a|, |b| in [2^-63, 2^63) (|b| in [2^-126, 2^122) for rcp): there every value
above is normal, b*ulp(q1)/2 is a normal float, r1's grid is above 2^-149 and x is normal.

The slow path works on magnitudes: specials are ``a * rb`` (one FMUL: rb is b with zero and
infinity swapped, so a*rb is a/b for every special pair, NaN included); finite operands are
normalized (CLZ for subnormals) to significands A, B in [1, 2) and an exponent difference k. The
result's last bit has exponent qe = max(E, -126) - 23 (E the result's exponent, known from k and
whether A < B); A is scaled by 2^(k - qe) so that X = A/B counts units of that last place: X in
[2^23, 2^24) for a normal result, below 2^23 for a subnormal one (at most down to 2^-3: every X
in (0, 1/2) rounds alike). Steps 1-3 give X's faithful q1 and exact r1, the directed step RZ(X),
FRND trunc(X) = c, and ``rc = A - c*B`` in [0, B) is exact: rounding c to an integer by mode
needs only rc against B/2 (a tie: c's parity) or against 0. The word is then ``(qe + 149) << 23``
plus that integer, which carries into the exponent as IEEE does; a word at or above infinity's
is an overflow, infinity or the largest float by mode.

Square root ``s = sqrt(a)``:

1. Seed ``y0 = Ms - (a >> 1)`` (Ms = 0x5F374757), |1 - a*y0^2| <= 0.0682 =: e over all
   significands of both exponent parities; ``y1 = y0 + y0 e (1/2 + 3e/8)`` (FFMA, FMUL, FFMA)
   has relative error r <= 1.04e-4 (5e^3/16 and roundings).
2. ``g = a*y1``, ``s = g - (g*g - a) * y1/2``: |s - sqrt(a)| <= (1.5 r^2 + O(ur)) sqrt(a)
   < 0.55 * 2^-25 sqrt(a), so ``s`` is faithful.
3. Rounding from the signs of FFMAs (an FFMA rounds a nonzero value to a nonzero one of the same
   sign, here, and gives +0 only for an exact zero). Nearest: with s_up, s_dn the neighbours of
   s, a - s*s_up and a - s*s_dn are multiples of the square of the gap, so sqrt(a) is above the
   upper midpoint iff a - s*s_up > 0 and below the lower one iff a - s*s_dn <= 0 (sqrt(a) is
   never a midpoint). Directed: ``FFMA.mode((s*s - a)/4, -y1/2, s)`` ((s*s - a)/4 is exact for
   a >= 2^-78).

The fast path takes a in [2^-78, 2^128); the slow path handles specials (NaN and negatives give
NaN, +-0 and +inf are unchanged), normalizes a to A in [1/2, 2) with an even exponent change 2j,
runs the same steps on A and adds j to the exponent (a square root is never subnormal).

The order of emission is the schedule the slot packer keeps: a register written back between
ROM blocks costs the model a frame per lane, far more than a block, so the box tests end in
predicates inside their blocks and the dependent float operations go in pairs (slots 1 and 3).
"""

from __future__ import annotations

from qgpu.machine.float32 import (
    CANONICAL_NAN,
    EXPONENT,
    FRACTION,
    INF,
    MAGNITUDE,
    MAX_FINITE,
    ONE,
    SIGN,
    Round,
    divide,
    reciprocal,
    sqrt,
)
from qgpu.machine.isa import Cmp, Op, PredOp, TermKind
from qgpu.toolchain.lower.ir import ZERO, VTerm
from qgpu.toolchain.lower.select.core import MASK32, _s32
from qgpu.toolchain.ptx.ast import Instr

RCP_MAGIC = 0x7EF3_1180
RSQRT_MAGIC = 0x5F37_4757
MINUS_FIVE_QUARTERS = 0xBFA0_0000
MINUS_EIGHTH = 0xBE00_0000
THREE_EIGHTHS = 0x3EC0_0000
HALF = 0x3F00_0000
QUARTER = 0x3E80_0000
MINUS_ZERO = SIGN
ULP_SHIFT = 23
# Fast boxes (exponent fields): division |a|, |b| in [2^-63, 2^63); rcp |b| in [2^-126, 2^122);
# sqrt a in [2^-78, 2^128) (positive).
DIV_BOX = (64 << 23, 126 << 23)
RCP_BOX = (1 << 23, 248 << 23)
SQRT_BOX = (49 << 23, 206 << 23)


class FloatDivide:
    """div/sqrt/rcp.{rn,rz,rm,rp}{.ftz}.f32 (a mixin of Selector)."""

    def float_div(self, ins: Instr) -> None:
        # a guarded div, sqrt or rcp arrives inside the walk's branch around it
        self.float_rounded(ins, "div")

    def float_rcp(self, ins: Instr) -> None:
        self.float_rounded(ins, "rcp")

    def float_sqrt(self, ins: Instr) -> None:
        self.float_rounded(ins, "sqrt")

    # --- the shared frame ------------------------------------------------------------------
    def float_rounded(self, ins: Instr, kind: str) -> None:
        """Fast path in the current block, a branch to the slow path when the operands are
        outside the fast box, both ending in one join block."""
        rounding = [m for m in ins.mods if m in ("rn", "rz", "rm", "rp")]
        rnd = Round[rounding[0].upper()] if rounding else Round.RN
        ftz = "ftz" in ins.mods
        d = self.dest(ins.operands[0])
        consts = [self.constant(op) for op in ins.operands[1:]]
        if all(c is not None for c in consts):  # computed here, as the PTX interpreter would
            words = [c & MASK32 for c in consts]
            value = {"div": divide, "sqrt": sqrt, "rcp": reciprocal}[kind](*words, rnd, ftz)
            self.emit(Op.ADD, d, ZERO, imm=_s32(value), bi=True)
        else:
            divisor = consts[-1] & MASK32 if kind == "div" and consts[-1] is not None else None
            if divisor is not None and not self._in_div_box(divisor):
                divisor = None  # a special or extreme constant: the general code
            srcs = [self.reg_in(op) for op in
                    (ins.operands[1:2] if divisor is not None else ins.operands[1:])]
            res = d if d not in srcs else self.new_vreg()
            slow, join = self.new_block(f"f{kind}_slow"), self.new_block(f"f{kind}_join")
            if kind == "sqrt":
                out = self.fsqrt_fast(srcs[0], res, rnd)
            elif divisor is not None:
                out = self.fdiv_const_fast(srcs[0], divisor, res, rnd)
            else:
                out = self.fdiv_fast(srcs[0] if kind == "div" else None, srcs[-1], res, rnd)
            self.set_term(VTerm(TermKind.BRA, slow, join, out))
            self.switch(slow)
            if kind == "sqrt":
                self.fsqrt_slow(srcs[0], res, rnd, ftz)
            else:
                self.fdiv_slow(srcs[0] if kind == "div" else None,
                               None if divisor is not None else srcs[-1], res, rnd, ftz,
                               divisor)
            self.set_term(VTerm(TermKind.JMP, join))
            self.switch(join)
            if res != d:
                self.emit(Op.ADD, d, res)

    # --- small helpers -----------------------------------------------------------------------
    def _c(self, value: int) -> int:
        """A register holding a 32-bit constant."""
        return self.tmp(Op.ADD, ZERO, imm=_s32(value))

    def _flush(self, x: int) -> int:
        """``.ftz`` on a word: a subnormal becomes the zero of its sign."""
        sub = self.pred_tmp(Cmp.EQ, self.tmp(Op.AND, x, imm=EXPONENT), imm=0)
        out = self.new_vreg()
        self.emit(Op.SEL, out, self.tmp(Op.AND, x, imm=_s32(SIGN)), x, c=sub)
        return out

    def _recip_core(self, a: int | None, b: int, one: int, q1: int,
                    recompute: bool = False) -> tuple[int, int]:
        """Steps 1-3 of the division: q1 (faithful) into register q1; returns (ny1, r1) with
        ny1 = -y1 (1/b to within 1.29e-4) and r1 = a - b*q1 exactly; a None is the constant
        1.0 (rcp).
        Values are carried negated so that no FFMA needs a negated operand. ``recompute``: the
        seed is computed again for its second use (two free ALU slots instead of a value
        written back between blocks)."""
        magic = _s32((RCP_MAGIC + 1 + SIGN) & 0xFFFFFFFF)
        ny0 = self.tmp(Op.ADD, self.tmp(Op.NOT, b), imm=magic)  # -(M - b)
        e0 = self.tmp(Op.FFMA, ny0, b, c=one)  # 1 - b*y0
        s = self.tmp(Op.FFMA, e0, e0, c=e0)  # e + e^2
        if recompute:
            ny0 = self.tmp(Op.ADD, self.tmp(Op.NOT, b), imm=magic)
        ny1 = self.tmp(Op.FFMA, ny0, s, c=ny0)  # -y0 (1 + e + e^2)
        if a is None:  # q0 = y1 exactly
            r0 = self.tmp(Op.FFMA, b, ny1, c=one)  # 1 - b*y1
            nq1 = self.tmp(Op.FFMA, r0, ny1, c=ny1)
        else:
            nq0 = self.tmp(Op.FMUL, a, ny1)
            r0 = self.tmp(Op.FFMA, b, nq0, c=a)  # a - b*q0
            nq1 = self.tmp(Op.FFMA, r0, ny1, c=nq0)  # -(q0 + r0*y1)
        self.emit(Op.XOR, q1, nq1, imm=_s32(SIGN), bi=True)  # before r1: no shared register
        r1 = self.tmp(Op.FFMA, b, nq1, c=one if a is None else a)  # a - b*q1, exact
        return ny1, r1

    # --- division and reciprocal ------------------------------------------------------------
    @staticmethod
    def _in_div_box(w: int) -> bool:
        lo, width = DIV_BOX
        return ((w & MAGNITUDE) - lo) & MASK32 < width

    def fdiv_const_fast(self, a: int, b: int, res: int, rnd: Round) -> int:
        """``a / b`` for a constant b in the box: its correctly rounded reciprocal y (|1 - b*y|
        <= 2^-24) is an immediate, so steps 2-4 alone remain, with b and -y as the FFMAs'
        immediate operands and only a to test."""
        lo, width = DIV_BOX
        out = self.pred_tmp(Cmp.HS, self.tmp(Op.SUB, self.tmp(Op.SHL, a, imm=1),
                                              imm=_s32(2 * lo)), imm=_s32(2 * width))
        ny = _s32(reciprocal(b) ^ SIGN)
        nq0 = self.tmp(Op.FMUL, a, imm=ny)
        r0 = self.tmp(Op.FFMA, nq0, imm=_s32(b), c=a)  # a - b*q0
        nq1 = self.tmp(Op.FFMA, r0, imm=ny, c=nq0)
        self.emit(Op.XOR, res, nq1, imm=_s32(SIGN), bi=True)  # q1
        r1 = self.tmp(Op.FFMA, nq1, imm=_s32(b), c=a)  # a - b*q1, exact
        self._round_quotient(res, r1, rnd, (ZERO, ny, True),
                             lambda: self.tmp(Op.ADD, self.tmp(Op.AND, res, imm=EXPONENT),
                                              imm=_s32((b & MAGNITUDE) - (151 << ULP_SHIFT))))
        return out

    def _round_quotient(self, res: int, r1: int, rnd: Round, ny1: tuple[int, int, bool],
                        half_ulp_b) -> None:
        """Step 4: res holds the faithful q1, r1 = a - b*q1 exactly, ny1 = -y1 (a register, or
        an immediate: (ZERO, value, True)); half_ulp_b() emits b*ulp(q1)/2 on the words."""
        reg, imm, bi = ny1
        if rnd == Round.RN:  # |x - q1| > ulp/2: |r1| against b*ulp(q1)/2 on the words
            hb = half_ulp_b()
            beyond = self.pred_tmp(Cmp.HS, self.tmp(Op.AND, r1, imm=MAGNITUDE), hb)
            # q1 + 1.25 r1*y1 = q1 + 1.25 (x - q1) (1 +- 1.3e-4), the product exact in the
            # FFMA: strictly between ulp/2 and 3ulp/2 away, towards x
            r1n = self.tmp(Op.FMUL, r1, imm=_s32(MINUS_FIVE_QUARTERS))
            self.emit(Op.FFMA, res, r1n, reg, res, imm=imm, bi=bi).guard = (beyond, False)
        else:  # q1 + r1*y1/8: between q1 and x's other neighbour, zero only if x = q1
            r1n = self.tmp(Op.FMUL, r1, imm=_s32(MINUS_EIGHTH))  # exact
            self.emit(Op.FFMA, res, r1n, reg, res, imm=imm, bi=bi, mod=rnd)

    def fdiv_fast(self, a: int | None, b: int, res: int, rnd: Round) -> int:
        """The fast path into res; returns the predicate that sends the lanes to the slow
        path. a None: rcp. (The order is the schedule: module docstring.)"""
        # the box test: two predicates, each from three instructions in one block (and, for
        # nearest, b*2^-151 for the rounding); directed modes put 1.0 in the spare slot
        bm = self.tmp(Op.AND, b, imm=MAGNITUDE)
        bm3 = self.tmp(Op.SUB, bm, imm=151 << ULP_SHIFT) if rnd == Round.RN else None
        lo, width = RCP_BOX if a is None else DIV_BOX
        out = self.pred_tmp(Cmp.HS, self.tmp(Op.SUB, bm, imm=lo), imm=width)
        if a is not None:  # |a| in the box too: on the word shifted left, sign dropped
            pa = self.pred_tmp(Cmp.HS, self.tmp(Op.SUB, self.tmp(Op.SHL, a, imm=1),
                                                 imm=_s32(2 * lo)), imm=_s32(2 * width))
            either = self.new_vpred()
            self.emit(Op.PLOP, either, out, pa, mod=PredOp.OR)
            out = either
        one = self._c(ONE)
        # (measured on kernels that load a and b: computing the seed again before its second
        # use saves a write-back in a division, not in a reciprocal, whose core is shorter)
        ny1, r1 = self._recip_core(a, b, one, res, recompute=a is not None)
        self._round_quotient(res, r1, rnd, (ny1, 0, False), lambda: self.tmp(
            Op.ADD, self.tmp(Op.AND, res, imm=EXPONENT), bm3))
        return out

    def fdiv_slow(self, a: int | None, b: int | None, res: int, rnd: Round, ftz: bool,
                  b_word: int | None = None) -> None:
        """Every input, exactly: specials by one FMUL, finite operands scaled so that the
        quotient counts units of the result's last place (module docstring). a None is rcp's
        1.0; b_word a constant divisor in the box (b is then unused): what depends only on a
        constant is computed here."""
        a_word = ONE if a is None else None
        if ftz and a is not None:
            a = self._flush(a)
        if ftz and b_word is None:
            b = self._flush(b)
        if a_word is not None:
            sign = self.tmp(Op.AND, b, imm=_s32(SIGN))
        elif b_word is not None:
            sign = self.tmp(Op.AND, a, imm=_s32(SIGN))
            if b_word & SIGN:
                self.emit(Op.XOR, sign, sign, imm=_s32(SIGN), bi=True)
        else:
            sign = self.tmp(Op.AND, self.tmp(Op.XOR, a, b), imm=_s32(SIGN))
        am = a_word if a_word is not None else self.tmp(Op.AND, a, imm=MAGNITUDE)
        bm = b_word & MAGNITUDE if b_word is not None else self.tmp(Op.AND, b, imm=MAGNITUDE)
        # a or b zero, infinite or NaN: a * rb, rb = b with zero and infinity swapped (a
        # constant operand is neither)
        if a_word is None and b_word is None:
            worst = self.tmp(Op.MAXU, self.tmp(Op.SUB, am, imm=1),
                             self.tmp(Op.SUB, bm, imm=1))
        else:
            worst = self.tmp(Op.SUB, bm if b_word is None else am, imm=1)
        special = self.pred_tmp(Cmp.HS, worst, imm=INF - 1)
        if b_word is not None:
            special_value = self.tmp(Op.FMUL, a, imm=_s32(b_word))
        else:
            b2 = self.tmp(Op.SHL, b, imm=1)
            zero_inf = self.pred_tmp(Cmp.EQ, self.tmp(Op.MINU, b2, self.tmp(
                Op.XOR, b2, imm=_s32(0xFF00_0000))), imm=0)
            rb = self.new_vreg()
            self.emit(Op.SEL, rb, self.tmp(Op.XOR, b, imm=INF), b, c=zero_inf)
            special_value = self.tmp(Op.FMUL, rb, imm=_s32(a_word)) if a is None else \
                self.tmp(Op.FMUL, a, rb)
        # normalized significands and exponents (a subnormal's leading one moved to bit 23)
        exps: list[int] = []
        fracs: list[int] = []
        for m, known in ((am, a_word is not None), (bm, b_word is not None)):
            if known:  # a constant: done here
                shift = max(32 - m.bit_length() - 8, 0)
                exps.append(((m << shift) >> ULP_SHIFT) - shift)
                fracs.append((m << shift) & FRACTION)
                continue
            shift = self.tmp(Op.MAX, self.tmp(Op.SUB, self.tmp(Op.CLZ, m), imm=8), imm=0)
            n = self.tmp(Op.SHL, m, shift)
            exps.append(self.tmp(Op.SUB, self.tmp(Op.SHR, n, imm=ULP_SHIFT), shift))
            fracs.append(self.tmp(Op.AND, n, imm=FRACTION))
        if a_word is not None:  # 127 - exp_b
            k = self.tmp(Op.ADD, self.tmp(Op.NOT, exps[1]), imm=exps[0] + 1)
        elif b_word is not None:
            k = self.tmp(Op.SUB, exps[0], imm=exps[1])
        else:
            k = self.tmp(Op.SUB, exps[0], exps[1])
        bb = fracs[1] | ONE if b_word is not None else self.tmp(Op.OR, fracs[1], imm=ONE)
        e126 = self.tmp(Op.ADD, k, imm=126)  # the result's exponent + 126
        if a_word is not None:  # A = 1: below one unless B is
            below_one = self.pred_tmp(Cmp.NE, fracs[1], imm=0)
        elif b_word is not None:
            below_one = self.pred_tmp(Cmp.LO, fracs[0], imm=fracs[1])
        else:
            below_one = self.pred_tmp(Cmp.LO, fracs[0], fracs[1])
        self.emit(Op.SUB, e126, e126, imm=1, bi=True).guard = (below_one, False)
        last = self.tmp(Op.MAX, e126, imm=0)  # qe + 149, qe: exponent of the last bit
        scale = self.tmp(Op.MAX, self.tmp(Op.ADD, self.tmp(Op.SUB, k, last), imm=149), imm=-2)
        aa = self.tmp(Op.SHL, self.tmp(Op.ADD, scale, imm=127), imm=ULP_SHIFT)  # A * 2^scale
        if a_word is None:
            self.emit(Op.OR, aa, fracs[0], aa)
        q1 = self.new_vreg()
        if b_word is not None:  # B's correctly rounded reciprocal, as in fdiv_const_fast
            ny1: tuple[int, int, bool] = (ZERO, _s32(reciprocal(bb) ^ SIGN), True)
            bop: tuple[int, int, bool] = (ZERO, _s32(bb), True)
            nq0 = self.tmp(Op.FMUL, aa, imm=ny1[1])
            r0 = self.tmp(Op.FFMA, nq0, imm=bb, c=aa)
            nq1 = self.tmp(Op.FFMA, r0, imm=ny1[1], c=nq0)
            self.emit(Op.XOR, q1, nq1, imm=_s32(SIGN), bi=True)
            r1 = self.tmp(Op.FFMA, nq1, imm=bb, c=aa)
        else:
            ny1_reg, r1 = self._recip_core(aa, bb, self._c(ONE), q1)
            ny1, bop = (ny1_reg, 0, False), (bb, 0, False)
        r1n = self.tmp(Op.FMUL, r1, imm=_s32(MINUS_EIGHTH))
        t = self.new_vreg()
        self.emit(Op.FFMA, t, r1n, ny1[0], q1, imm=ny1[1], bi=ny1[2], mod=Round.RZ)  # RZ(X)
        trunc = self.tmp(Op.FRND, t, mod=Round.RZ)  # trunc(X)
        rc = self.new_vreg()  # A - c*B
        self.emit(Op.FFMA, rc, self.tmp(Op.XOR, trunc, imm=_s32(SIGN)), bop[0], aa,
                  imm=bop[1], bi=bop[2])
        m = self.tmp(Op.F2I, trunc, mod=Round.RZ)
        up = None
        if rnd == Round.RN:
            odd = self.tmp(Op.ADD, rc, self.tmp(Op.AND, m, imm=1))
            if b_word is not None:
                up = self.pred_tmp(Cmp.HI, odd, imm=bb - (1 << ULP_SHIFT))
            else:
                up = self.pred_tmp(Cmp.HI, odd, self.tmp(Op.SUB, bb, imm=1 << ULP_SHIFT))
        elif rnd != Round.RZ:
            inexact = self.pred_tmp(Cmp.NE, rc, imm=0)
            negative = self.pred_tmp(Cmp.NE, sign, imm=0)
            up = self.new_vpred()  # RP: inexact and positive; RM: inexact and negative
            neg_b = 8 if rnd == Round.RP else 0
            self.emit(Op.PLOP, up, inexact, negative, mod=PredOp.AND | neg_b)
        if up is not None:
            self.emit(Op.ADD, m, m, imm=1, bi=True).guard = (up, False)
        word = self.tmp(Op.ADD, self.tmp(Op.SHL, last, imm=ULP_SHIFT), m)
        if rnd in (Round.RN, Round.RZ):
            self.emit(Op.MINU, word, word, imm=INF if rnd == Round.RN else MAX_FINITE, bi=True)
        else:  # infinity where rounding goes away from zero
            cap = self.new_vreg()
            when_negative = INF if rnd == Round.RM else MAX_FINITE
            self.emit(Op.SEL, cap, self._c(when_negative), imm=INF ^ MAX_FINITE ^ when_negative,
                      bi=True, c=self.pred_tmp(Cmp.NE, sign, imm=0))
            self.emit(Op.MINU, word, word, cap)
        if ftz:  # a subnormal result (after rounding) becomes zero
            tiny = self.pred_tmp(Cmp.LO, word, imm=1 << ULP_SHIFT)
            self.emit(Op.SEL, word, ZERO, word, c=tiny)
        value = self.tmp(Op.OR, word, sign)
        self.emit(Op.SEL, res, special_value, value, c=special)

    # --- square root -----------------------------------------------------------------------
    def _sqrt_core(self, a: int, res: int, rnd: Round) -> None:
        """sqrt(a) correctly rounded into res, for a in the fast box. The order is the
        schedule (see fdiv_fast): chains of two dependent float operations per block."""
        y0 = self.tmp(Op.ADD, self.tmp(Op.NOT, self.tmp(Op.SHR, a, imm=1)),
                      imm=_s32(RSQRT_MAGIC + 1))  # Ms - (a >> 1)
        ny0 = self.tmp(Op.XOR, y0, imm=_s32(SIGN))
        w0 = self.tmp(Op.FMUL, a, y0)
        e0 = self.tmp(Op.FFMA, w0, ny0, c=self._c(ONE))  # 1 - a*y0^2
        k = self.tmp(Op.FFMA, e0, imm=THREE_EIGHTHS, c=self._c(HALF))  # 1/2 + 3e/8
        m = self.tmp(Op.FMUL, k, e0)
        y1 = self.tmp(Op.FFMA, y0, m, c=y0)  # y0 (1 + e/2 + 3e^2/8)
        ny1h = self.tmp(Op.ADD, y1, imm=_s32(SIGN - (1 << ULP_SHIFT)))  # -y1 / 2
        g = self.tmp(Op.FMUL, a, y1)
        na = self.tmp(Op.XOR, a, imm=_s32(SIGN))
        dg = self.tmp(Op.FFMA, g, g, c=na)  # g^2 - a
        self.emit(Op.FFMA, res, dg, ny1h, g)  # s = g - (g^2 - a) y1/2, faithful
        if rnd == Round.RN:  # a against the squares of the midpoints around s
            above = self.pred_tmp(Cmp.LT, self.tmp(Op.FFMA, res, self.tmp(Op.ADD, res, imm=1),
                                                   c=na), imm=0)  # a - s*s_up > 0
            below = self.pred_tmp(Cmp.GE, self.tmp(Op.FFMA, res, self.tmp(Op.SUB, res, imm=1),
                                                   c=na), imm=0)  # a - s*s_dn <= 0
            self.emit(Op.ADD, res, res, imm=1, bi=True).guard = (above, False)
            self.emit(Op.SUB, res, res, imm=1, bi=True).guard = (below, False)
        else:  # s + (a - s^2) y1/8: (s^2 - a)/4 is exact for a >= 2^-78
            err = self.tmp(Op.FMUL, self.tmp(Op.FFMA, res, res, c=na), imm=QUARTER)
            self.emit(Op.FFMA, res, err, ny1h, res, mod=rnd)

    def fsqrt_fast(self, a: int, res: int, rnd: Round) -> int:
        lo, width = SQRT_BOX
        out = self.pred_tmp(Cmp.HS, self.tmp(Op.SUB, a, imm=lo), imm=width)
        self._sqrt_core(a, res, rnd)
        return out

    def fsqrt_slow(self, a: int, res: int, rnd: Round, ftz: bool) -> None:
        if ftz:
            a = self._flush(a)
        # +-0, negative, +inf, NaN: NaN for negatives (and NaNs), else a + (-0) = a
        special = self.pred_tmp(Cmp.HS, self.tmp(Op.SUB, a, imm=1), imm=INF - 1)
        negative = self.pred_tmp(Cmp.HI, a, imm=_s32(SIGN))
        special_value = self.new_vreg()  # (not negative) ? a + -0 : NaN
        self.emit(Op.SEL, special_value, self.tmp(Op.FADD, a, imm=_s32(MINUS_ZERO)),
                  imm=CANONICAL_NAN, bi=True, c=negative, mod=1)
        # a = A * 2^(2j), A in [1/2, 2): A keeps the exponent's parity
        shift = self.tmp(Op.MAX, self.tmp(Op.SUB, self.tmp(Op.CLZ, a), imm=8), imm=0)
        n = self.tmp(Op.SHL, a, shift)
        e = self.tmp(Op.SUB, self.tmp(Op.SHR, n, imm=ULP_SHIFT), shift)
        parity = self.tmp(Op.SHL, self.tmp(Op.AND, e, imm=1), imm=ULP_SHIFT)
        aa = self.tmp(Op.OR, self.tmp(Op.OR, self.tmp(Op.AND, n, imm=FRACTION),
                                      imm=0x3F00_0000), parity)
        adjust = self.tmp(Op.SHL, self.tmp(Op.SUB, self.tmp(Op.SRA, e, imm=1), imm=63),
                          imm=ULP_SHIFT)
        root = self.new_vreg()
        self._sqrt_core(aa, root, rnd)
        self.emit(Op.SEL, res, special_value, self.tmp(Op.ADD, root, adjust), c=special)
