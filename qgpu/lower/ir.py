"""The lowering's intermediate form: machine instructions over virtual registers, in basic blocks.

Instruction selection (select.py) produces it from PTX; register allocation (regalloc.py) maps
virtual registers to r1..r15 / p0..p3 (spilling to local slots); layout.py cuts the basic blocks
into ROM blocks. Virtual register 0 is the zero register.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace

from qgpu.isa import PRED_DEST_OPS, Op, TermKind, source_registers, term_successors

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
        if op == Op.SETP and field == "d":
            return "pred"
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


def liveness(fn: IRFunction, uses_of, def_of, term_uses) -> tuple[list[set], list[set]]:
    """Per-block live-in and live-out sets of the values that uses_of/def_of/term_uses name
    (registers or predicates), by the usual backward fixpoint. Any function whose blocks have
    `instrs` and a `term` with `successors()` will do: a machine Program too (qgpu/rom.py)."""
    n = len(fn.blocks)
    use: list[set[int]] = [set() for _ in range(n)]
    defs: list[set[int]] = [set() for _ in range(n)]
    for i, blk in enumerate(fn.blocks):
        for ins in blk.instrs:
            use[i].update(u for u in uses_of(ins) if u not in defs[i])
            d = def_of(ins)
            if d is not None:
                defs[i].add(d)
        use[i].update(u for u in term_uses(blk.term) if u not in defs[i])
    live_in: list[set[int]] = [set() for _ in range(n)]
    live_out: list[set[int]] = [set() for _ in range(n)]
    changed = True
    while changed:
        changed = False
        for i in reversed(range(n)):
            out = set().union(*(live_in[s] for s in fn.blocks[i].term.successors()))
            inn = use[i] | (out - defs[i])
            if out != live_out[i] or inn != live_in[i]:
                live_out[i], live_in[i] = out, inn
                changed = True
    return live_in, live_out


def machine_liveness(blocks: Sequence) -> tuple[tuple[list[set], list[set]],
                                                tuple[list[set], list[set]]]:
    """(live-in, live-out) registers and (live-in, live-out) predicates of machine blocks, per
    thread. A guarded write may not happen, so it does not kill the old value."""
    fn = SimpleNamespace(blocks=blocks)
    regs = liveness(fn, lambda i: i.reads(), lambda i: None if i.guard else i.writes_reg(),
                    lambda t: [])
    preds = liveness(fn, lambda i: i.pred_reads(),
                     lambda i: None if i.guard else i.writes_pred(),
                     lambda t: [t.pred] if t.kind == TermKind.BRA else [])
    return regs, preds
