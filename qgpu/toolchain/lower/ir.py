"""The lowering's intermediate form: machine instructions over virtual registers, in basic blocks.

Instruction selection (select/) produces it from PTX; register allocation (regalloc.py) maps
virtual registers to r1..r15 / p0..p3 (spilling to local slots); layout.py cuts the basic blocks
into ROM blocks. Virtual register 0 is the zero register.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qgpu.machine.isa import PRED_DEST_OPS, Op, TermKind, source_registers, term_successors

ZERO = 0


@dataclass
class VInstr:
    """A machine instruction whose register fields are virtual: vregs, or vpreds where the op
    says so (d of SETP/PLOP, a/b of PLOP, c of SEL, the guard)."""

    op: Op
    d: int = ZERO
    a: int = ZERO
    b: int = ZERO
    c: int = ZERO
    imm: int = 0
    bi: bool = False
    mod: int = 0
    guard: tuple[int, bool] | None = None
    line: int = 0  # PTX source line, for error messages
    comment: str = ""
    undefined: bool = False  # Instr.undefined

    def reg_uses(self) -> list[int]:
        """Virtual registers read (without the zero register)."""
        regs = list(source_registers(self.op, self.mod, self.bi, self.a, self.b, self.c))
        if self.guard is not None and self.reg_def() is not None:
            regs.append(self.d)  # a guarded write keeps the old value on other lanes
        return [r for r in regs if r != ZERO]

    def reg_def(self) -> int | None:
        if self.op in PRED_DEST_OPS or self.op == Op.ST or self.d == ZERO:
            return None
        return self.d

    def pred_uses(self) -> list[int]:
        preds = [] if self.guard is None else [self.guard[0]]
        if self.op == Op.PLOP:
            preds += [self.a, self.b]
        elif self.op == Op.SEL:
            preds.append(self.c)
        if self.guard is not None and self.op in PRED_DEST_OPS:
            preds.append(self.d)
        return preds

    def pred_def(self) -> int | None:
        return self.d if self.op in PRED_DEST_OPS else None

    def field_kind(self, field: str) -> str:
        """What register field `field` (d, a, b, c) names: "reg", "pred" or "const"."""
        op = self.op
        if op == Op.PLOP:
            return "pred" if field in ("d", "a", "b") else "const"
        if op in (Op.SETP, Op.FSETP) and field == "d":
            return "pred"
        if op == Op.FSETP and field == "c":
            return "const"  # the ftz flag
        if op == Op.SEL and field == "c":
            return "pred"
        if op == Op.SHFL and field == "c":
            return "const"  # the packed shuffle shape
        return "reg"


@dataclass
class VTerm:
    """Block terminator over virtual predicates; targets are IR block indices."""

    kind: TermKind
    target: int = 0
    other: int = 0
    pred: int = 0
    negated: bool = False
    line: int = 0

    def pred_uses(self) -> list[int]:
        return [self.pred] if self.kind == TermKind.BRA else []

    def successors(self) -> list[int]:
        return term_successors(self.kind, self.target, self.other)


@dataclass
class IRBlock:
    name: str
    instrs: list[VInstr] = field(default_factory=list)
    term: VTerm | None = None


@dataclass
class IRFunction:
    """A kernel in IR form plus the facts about it the launch needs."""

    name: str
    blocks: list[IRBlock]
    num_params: int
    static_shared_bytes: int
    dynamic_shared_offset: int
    param_is_pointer: tuple[bool, ...]
    num_vregs: int = 1
    num_vpreds: int = 0
