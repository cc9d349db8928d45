"""Control flow and the thread's place: bra, guarded regions (a guarded div or rem), bar.sync and
bar.warp.sync, the shared-memory zeroing prologue, the thread's rank in its block, and the y and
z of special registers in a 3-D launch. Apart because these end or split blocks (terminators,
barriers) or read the launch's shape, rather than computing values in a block.
"""

from __future__ import annotations

from qgpu.machine.isa import Cmp, Op, Shfl, Space, SReg, TermKind
from qgpu.toolchain.lower.ir import ZERO, VTerm
from qgpu.toolchain.ptx.ast import Imm, Instr, Sym
from qgpu.toolchain.ptx.parser import warp_sync_group

# (y' * ceil(2^16 / Y)) >> DIVIDE_SHIFT is y' / Y in a 3-D launch (core.HIDDEN_3D).
DIVIDE_SHIFT = 16


class Control:
    """Branches, barriers, the prologue and 3-D decoding (a mixin of Selector)."""

    def zero_shared(self) -> None:
        """Prologue of a kernel that stores bytes or halfwords to shared memory: thread 0 zeroes
        the static shared words and a barrier waits for it, so the read-merge-write of a
        sub-word store never reads a word no thread wrote (Kernel.zeroes_shared)."""
        self.comment = "zero the static shared words (sub-word stores merge into them)"
        t = self.linear_tid()
        not_first = self.pred_tmp(Cmp.NE, t, imm=0)
        zero, join = self.new_block("zero_shared"), self.new_block("zeroed")
        self.set_term(VTerm(TermKind.BRA, join, zero, not_first))
        self.switch(zero)
        for offset in range(0, self.static_shared, 4):
            self.emit(Op.ST, ZERO, ZERO, ZERO, imm=offset, mod=Space.SHARED)
        self.set_term(VTerm(TermKind.JMP, join))
        self.switch(join)
        after = self.new_block("after_zero")
        self.set_term(VTerm(TermKind.BAR, after))
        self.switch(after)

    def linear_tid(self) -> int:
        """The thread's rank in its block, tid.x + tid.y * ntid.x (3-D: y' = y + z * Y)."""
        t = self.tmp(Op.S2R, mod=SReg.TID_X)
        self.emit(Op.MAD, t, self.tmp(Op.S2R, mod=SReg.TID_Y),
                  self.tmp(Op.S2R, mod=SReg.NTID_X), t)
        return t

    def guarded_region(self, ins: Instr) -> None:
        body, join = self.new_block("guarded"), self.new_block("join")
        self.set_term(VTerm(TermKind.BRA, body, join, self.vpred(ins.guard[0]), ins.guard[1]))
        self.switch(body)
        self.select_plain(ins)
        self.set_term(VTerm(TermKind.JMP, join))
        self.switch(join)

    def branch(self, ins: Instr) -> None:
        target = ins.operands[0]
        if not isinstance(target, Sym) or target.name not in self.labels:
            raise self.fail("branch target must be a label of this kernel")
        dest = self.labels[target.name]
        if ins.guard is None:
            self.set_term(VTerm(TermKind.JMP, dest))
            return
        cont = self.new_block("fall")
        self.set_term(VTerm(TermKind.BRA, dest, cont, self.vpred(ins.guard[0]), ins.guard[1]))
        self.switch(cont)

    def warp_sync(self, ins: Instr) -> None:
        """``bar.warp.sync`` of a tile of 1, 2 or 4 threads (parser.warp_sync_group): the tile
        is inside one machine warp, whose lanes run in lockstep, so only its threads' presence
        needs checking — a butterfly shuffle from each partner faults if one is elsewhere or
        has exited (what a GPU leaves undefined)."""
        group = warp_sync_group(ins, self.kernel.instructions)
        for distance in (1, 2)[:group.bit_length() - 1]:
            self.emit(Op.SHFL, ZERO, ZERO, imm=distance, bi=True, c=3, mod=Shfl.BFLY)

    def barrier(self, ins: Instr) -> None:
        ops = ins.operands
        if ins.guard is not None or not ops or ops[0] != Imm(0) or len(ops) > 1:
            raise self.fail("only an unconditional `bar.sync 0` (__syncthreads) is supported")
        nxt = self.new_block("after_bar")
        self.set_term(VTerm(TermKind.BAR, nxt))
        self.switch(nxt)

    def decode_3d(self, name: str, comp: str) -> int:
        """y or z of tid/ntid/ctaid/nctaid in a 3-D launch from the machine's 2-D y' = y + z*Y
        (HIDDEN_3D: Y and its magic divisor are hidden parameters)."""
        block = name in ("%tid", "%ntid")
        first = len(self.kernel.params) + (0 if block else 2)
        size, magic = self.new_vreg(), self.new_vreg()
        self.emit(Op.LD, size, ZERO, imm=4 * first, mod=Space.PARAM)
        if name in ("%ntid", "%nctaid") and comp == "y":
            return size
        machine = {"%tid": SReg.TID_Y, "%ntid": SReg.NTID_Y, "%ctaid": SReg.CTAID_Y,
                   "%nctaid": SReg.NCTAID_Y}[name]
        y2 = self.tmp(Op.S2R, mod=machine)
        self.emit(Op.LD, magic, ZERO, imm=4 * (first + 1), mod=Space.PARAM)
        z = self.tmp(Op.SHR, self.tmp(Op.MUL, y2, magic), imm=DIVIDE_SHIFT)
        if comp == "z":
            return z
        return self.tmp(Op.SUB, y2, self.tmp(Op.MUL, z, size))
