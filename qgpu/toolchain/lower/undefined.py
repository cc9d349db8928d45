"""Registers and predicates the kernel may read before writing them get an explicit 0 (false)
at the kernel's start.

CUDA leaves such a value undefined, and PTX may read it where the value cannot matter: NVRTC
unrolls a loop with a remainder and `selp` picks an operand that only the unrolled path wrote,
or a guarded write keeps an old value on the lanes it skips. On the model a register that the
thread block has not written holds whatever the previous thread block left there, which the
host cannot predict; after the 0 every value the machine computes is determined. The write is
marked ``undefined``: the interpreters still treat the register as undefined, let the value flow
through arithmetic, selects and spill slots, and stop the launch where it would reach memory,
an address, a shuffle, a guard or a branch (docs/ISA.md §1)."""

from __future__ import annotations

from qgpu.machine.isa import Cmp, Op
from qgpu.machine.liveness import liveness
from qgpu.toolchain.lower.ir import ZERO, IRFunction, VInstr, VTerm

_WHY = "undefined until written (read before any write on some path)"


def zero_undefined(fn: IRFunction) -> tuple[list[int], list[int]]:
    """Give every virtual register and predicate live into the entry block (read before any
    write on some path, a guarded write's kept value included) a marked 0 / false at the start;
    returns them (registers, predicates)."""
    assert not any(0 in blk.term.successors() for blk in fn.blocks), "the entry has a predecessor"
    regs = sorted(liveness(fn, VInstr.reg_uses, VInstr.reg_def, lambda t: [])[0][0] - {ZERO})
    preds = sorted(liveness(fn, VInstr.pred_uses, VInstr.pred_def, VTerm.pred_uses)[0][0])
    fn.blocks[0].instrs[:0] = [
        *(VInstr(Op.ADD, v, ZERO, imm=0, bi=True, undefined=True, comment=_WHY) for v in regs),
        *(VInstr(Op.SETP, p, ZERO, imm=0, bi=True, mod=Cmp.NE, undefined=True, comment=_WHY)
          for p in preds)]
    return regs, preds
