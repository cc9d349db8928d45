"""The approximate float32 instructions — ``ex2 lg2 sin cos tanh rsqrt .approx{.ftz}``,
``rcp sqrt div .approx{.ftz}``, ``div.full{.ftz}`` — as the straight-line macros of
``qgpu/machine/approx.py`` (one fixed algorithm each, docs/ISA.md "Float"): each step becomes one
IR instruction over fresh virtual registers and predicates, the inputs are the operands'
registers and the last step writes the destination. The PTX interpreter evaluates the same steps
(``toolchain/ptx/float_ops.py``), so both interpreters give the same bits.

``div``, ``sqrt`` and ``rcp`` with a rounding modifier (``.rn``...) stay with ``float_divide``:
this mixin must come before ``FloatDivide`` in ``Selector``'s bases, and hands those on."""

from __future__ import annotations

from qgpu.machine import approx
from qgpu.machine.isa import PRED_DEST_OPS, Op
from qgpu.toolchain.lower.ir import ZERO
from qgpu.toolchain.lower.select.core import _s32
from qgpu.toolchain.ptx.ast import Instr

APPROX_OPCODES = frozenset({"ex2", "lg2", "sin", "cos", "tanh", "rsqrt"})
"""Opcodes only this mixin selects (add them to ``core.FLOAT_OPCODES``); ``div``, ``sqrt`` and
``rcp`` are shared with ``float_divide``."""


class FloatApprox:
    """The approximate float32 family (a mixin of Selector, before FloatDivide)."""

    def float_ex2(self, ins: Instr) -> None:
        self.float_approx(ins)

    def float_lg2(self, ins: Instr) -> None:
        self.float_approx(ins)

    def float_sin(self, ins: Instr) -> None:
        self.float_approx(ins)

    def float_cos(self, ins: Instr) -> None:
        self.float_approx(ins)

    def float_tanh(self, ins: Instr) -> None:
        self.float_approx(ins)

    def float_rsqrt(self, ins: Instr) -> None:
        self.float_approx(ins)

    def float_div(self, ins: Instr) -> None:
        if approx.kind("div", ins.mods) is None:
            super().float_div(ins)  # type: ignore[misc]
        else:
            self.float_approx(ins)

    def float_sqrt(self, ins: Instr) -> None:
        if approx.kind("sqrt", ins.mods) is None:
            super().float_sqrt(ins)  # type: ignore[misc]
        else:
            self.float_approx(ins)

    def float_rcp(self, ins: Instr) -> None:
        if approx.kind("rcp", ins.mods) is None:
            super().float_rcp(ins)  # type: ignore[misc]
        else:
            self.float_approx(ins)

    def float_approx(self, ins: Instr) -> None:
        """Emit the instruction's macro: symbolic registers become fresh vregs (vpreds for
        predicates), immediates stay immediates (operand B only, as in the macro). A guarded
        one arrives inside the walk's branch around it (``core.GUARDED_AS_REGION``)."""
        macro = approx.for_instruction(ins.opcode, ins.mods)
        if macro is None:
            raise self.fail(f"`{ins.opcode}.{'.'.join(ins.mods)}` is not an approximate "
                            "float32 instruction")
        regs = {approx.ZERO: ZERO}
        for name, op in zip(macro.inputs, ins.operands[1:], strict=True):
            regs[name] = self.reg_in(op)
        dest = self.dest(ins.operands[0])
        preds: dict[str, int] = {}
        for s in macro.steps:
            if s.op in PRED_DEST_OPS:
                d = preds[s.d] = self.new_vpred()
            else:
                d = dest if s.d == approx.OUTPUT else self.new_vreg()
                regs[s.d] = d
            b, imm, bi = (ZERO, _s32(s.b), True) if isinstance(s.b, int) else (regs[s.b], 0, False)
            if s.op == Op.SEL:
                c = preds[str(s.c)]
            elif isinstance(s.c, str):
                c = regs[s.c]
            else:
                c = s.c  # FSETP's ftz flag
            self.emit(s.op, d, regs[s.a], b, c, imm=imm, bi=bi, mod=s.mod)
