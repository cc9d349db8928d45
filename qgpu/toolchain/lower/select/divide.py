"""div and rem (signed and unsigned, 8 to 32 bits, and 64-bit ones of proven kind): the machine
has no divider, so each becomes a shift-subtract loop over the quotient's bits (docs/ISA.md,
"Division and remainder"). Apart because these are the only integer instructions that become
loops, with blocks of their own.
"""

from __future__ import annotations

from qgpu.machine.isa import Cmp, Op, TermKind
from qgpu.toolchain.lower.ir import ZERO, VTerm
from qgpu.toolchain.lower.select.core import Kind, type_bits
from qgpu.toolchain.ptx.ast import Instr


class Divide:
    """Division and remainder loops (a mixin of Selector)."""

    def op_div(self, ins: Instr) -> None:
        self.divide(ins, want_quotient=True)

    def op_rem(self, ins: Instr) -> None:
        self.divide(ins, want_quotient=False)

    def divide(self, ins: Instr, want_quotient: bool) -> None:
        """div/rem on magnitudes (docs/ISA.md, "Division and remainder"): the loops are in
        `quotient` and `remainder`; signs are applied afterwards (C truncation)."""
        ty = ins.mods[-1]
        bits = type_bits(ty)
        signed = ty.startswith("s")
        if bits == 64:
            kind = self.common_kind(*ins.operands[1:3])
            if kind is None or (kind == Kind.SX and not signed):
                raise self.fail("64-bit division is supported only for two sign-extended ints "
                                "(signed) or two zero-extended values")
            signed = kind == Kind.SX
        d = self.dest(ins.operands[0])
        x = self.reg_in(ins.operands[1], min(bits, 32), signed)
        y = self.reg_in(ins.operands[2], min(bits, 32), signed)
        # The working register ends as the result: d itself unless d is also an operand.
        n = d if d not in (x, y) else self.new_vreg()
        if signed:  # the quotient is negative when the signs differ, the remainder when x < 0
            neg = self.pred_tmp(Cmp.LT, self.tmp(Op.XOR, x, y) if want_quotient else x, imm=0)
            self.emit(Op.ABS, n, x)
            dv = self.tmp(Op.ABS, y)
        else:
            self.emit(Op.ADD, n, x)
            dv = y
        (self.quotient if want_quotient else self.remainder)(n, dv)
        if signed:
            self.emit(Op.NEG, n, n).guard = (neg, False)
        if n != d:
            self.emit(Op.ADD, d, n)
        if bits < 32:
            self.narrow(d, bits)

    def remainder(self, n: int, dv: int) -> None:
        """n = n mod dv (unsigned; n mod 0 = n). The divisor is shifted up to the dividend's
        top bit; each pass of a one-ROM-block loop subtracts it where it fits
        (``n = minu(n, n - top)``) and halves it, and the loop ends as soon as n < dv (after
        the pass at bit 0 at the latest): at most one pass per quotient bit, each writing back
        n and the shifted divisor."""
        top = self.tmp(Op.SHL, dv, self.tmp(Op.SUB, self.tmp(Op.CLZ, dv), self.tmp(Op.CLZ, n)))
        # (a dividend shorter than the divisor gives a shift >= 32, so top = 0: one pass that
        # changes nothing; n > dv - 1 rather than n >= dv ends it for a zero divisor too)
        dm1 = self.tmp(Op.SUB, dv, imm=1)
        loop, done = self.new_block("rem_loop"), self.new_block("rem_done")
        self.set_term(VTerm(TermKind.JMP, loop))
        self.switch(loop)
        self.emit(Op.MINU, n, n, self.tmp(Op.SUB, n, top))
        self.emit(Op.SHR, top, top, imm=1, bi=True)
        self.set_term(VTerm(TermKind.BRA, loop, done, self.pred_tmp(Cmp.HI, n, dm1)))
        self.switch(done)

    def quotient(self, w: int, dv: int) -> None:
        """w = w / dv (unsigned; w / 0 = 0xFFFFFFFF).

        Fast path (the dividend and divisor fit in 29 bits, roughly): one register W holds the
        partial remainder above bit t and, below it, the dividend bits not used yet followed
        by the quotient bits made so far. Each step is ``W = 2W; if W >= D: W = W - D + 1``
        with D = divisor << t, written without a branch as ``W = minu(2W, 2W - (D - 1))``;
        after t steps W = remainder << t | quotient. t is the number of quotient bits rounded
        up to an even number, so the loop body is two steps plus a counter that is the same on
        every lane: two ROM blocks that write back only W (and once the counter, one frame).
        Slow path (larger operands, divisor 0): restoring steps with a shifting divisor, two
        ROM blocks per quotient bit.
        """
        a = self.tmp(Op.CLZ, dv)
        self.emit(Op.AND, a, a, imm=31, bi=True)  # a zero divisor takes the slow path
        b = self.tmp(Op.CLZ, self.tmp(Op.OR, w, dv))
        t = self.new_vreg()  # (a - b + 1) quotient bits at most, rounded up to even: >= 2
        self.emit(Op.SUB, t, a, b)
        self.emit(Op.ADD, t, t, imm=2, bi=True)
        self.emit(Op.AND, t, t, imm=-2, bi=True)
        fast = self.pred_tmp(Cmp.LO, t, a)  # D = dv << t below 2**31: 2W never overflows
        dm1 = self.new_vreg()  # D - 1
        self.emit(Op.SUB, dm1, self.tmp(Op.SHL, dv, t), imm=1, bi=True)
        c = self.new_vreg()  # steps done
        self.emit(Op.ADD, c, ZERO, imm=0, bi=True)
        loop, slow, done = (self.new_block(f"div_{n}") for n in ("loop", "slow", "done"))
        # (slow is the taken side: the fast loop is laid out first, right after this block)
        self.set_term(VTerm(TermKind.BRA, slow, loop, fast, negated=True))

        self.switch(loop)
        u = self.new_vreg()
        for k in range(2):
            self.emit(Op.SHL, w, w, imm=1, bi=True)
            self.emit(Op.SUB, u, w, dm1)
            self.emit(Op.MINU, w, w, u)
            if k == 0:
                self.emit(Op.ADD, c, c, imm=2, bi=True)
        self.set_term(VTerm(TermKind.BRA, loop, done, self.pred_tmp(Cmp.LO, c, t)))

        # Slow path: the divisor shifted to the top quotient bit is subtracted where it fits
        # and halved, down to bit 0; the quotient bits go to W, and t = 32 leaves it as it is.
        self.switch(slow)
        rem = self.tmp(Op.ADD, w)
        top = self.tmp(Op.SHL, dv, self.tmp(Op.SUB, self.tmp(Op.CLZ, dv), self.tmp(
            Op.CLZ, self.tmp(Op.OR, w, dv))))
        self.emit(Op.ADD, t, ZERO, imm=32, bi=True)
        # x / 0: every step subtracts 0 and sets a quotient bit, so start from all ones
        self.emit(Op.SEL, w, ZERO, imm=-1, bi=True, c=self.pred_tmp(Cmp.NE, dv, imm=0))
        step = self.new_block("div_step")
        self.set_term(VTerm(TermKind.JMP, step))
        self.switch(step)
        ge = self.pred_tmp(Cmp.HS, rem, top)
        self.emit(Op.SUB, rem, rem, top).guard = (ge, False)
        self.emit(Op.ADD, w, w, w)
        self.emit(Op.ADD, w, w, imm=1, bi=True).guard = (ge, False)
        more = self.pred_tmp(Cmp.HI, top, dv)
        self.emit(Op.SHR, top, top, imm=1, bi=True)
        self.set_term(VTerm(TermKind.BRA, step, done, more))

        # The quotient: W without its bits from t up.
        self.switch(done)
        self.emit(Op.SUB, w, w, self.tmp(Op.SHL, self.tmp(Op.SHR, w, t), t))
