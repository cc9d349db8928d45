"""Register allocation: virtual registers -> r1..r15, virtual predicates -> p0..p3.

Linear scan over live intervals computed from per-thread liveness. Per-thread liveness is
correct on the SIMT machine because every register is per lane and masked lanes never write.
When more than 15 values are live, the values whose intervals end furthest are spilled to the
thread's local slots (``ld.local``/``st.local``) and three registers are kept back as scratch
for reloading them around each use.
"""

from __future__ import annotations

from dataclasses import dataclass

from qgpu.errors import ResourceError
from qgpu.machine import limits
from qgpu.machine.isa import Cmp, Op, Space, TermKind
from qgpu.machine.liveness import liveness
from qgpu.toolchain.lower.ir import ZERO, IRFunction, VInstr, VTerm

SCRATCH = 3
FIRST_REG = 1


@dataclass
class Allocation:
    regs: dict[int, int]  # vreg -> physical register
    spilled: dict[int, int]  # vreg -> local slot
    preds: dict[int, int]  # vpred -> physical predicate


def _intervals(fn: IRFunction, uses_of, def_of, term_uses) -> dict[int, list[int]]:
    """value -> [start, end] positions (instruction k of the linear order: uses 2k, def 2k+1)."""
    live_in, live_out = liveness(fn, uses_of, def_of, term_uses)
    iv: dict[int, list[int]] = {}

    def touch(v: int, pos: int) -> None:
        if v in iv:
            iv[v][0] = min(iv[v][0], pos)
            iv[v][1] = max(iv[v][1], pos)
        else:
            iv[v] = [pos, pos]

    pos = 0
    for i, blk in enumerate(fn.blocks):
        start = pos
        for v in live_in[i]:
            touch(v, start)
        for ins in blk.instrs:
            for u in uses_of(ins):
                touch(u, pos)
            d = def_of(ins)
            if d is not None:
                touch(d, pos + 1)
            pos += 2
        for u in term_uses(blk.term):
            touch(u, pos)
        for v in live_out[i]:
            touch(v, pos + 1)
        pos += 2
    return iv


def _scan(iv: dict[int, list[int]], k: int, hints: dict[int, int]) -> tuple[dict, list[int]]:
    """Linear scan; returns (value -> index in 0..k-1, spilled values)."""
    order = sorted(iv, key=lambda v: (iv[v][0], iv[v][1]))
    active: list[int] = []
    assigned: dict[int, int] = {}
    spilled: list[int] = []
    for v in order:
        start = iv[v][0]
        for a in [a for a in active if iv[a][1] < start]:
            active.remove(a)
        used = {assigned[a] for a in active}
        free = [r for r in range(k) if r not in used]
        if free:
            hint = hints.get(v)
            preferred = assigned.get(hint) if hint is not None else None
            pick = preferred if preferred in free else free[0]
            assigned[v] = pick
            active.append(v)
            continue
        victim = max(active, key=lambda a: iv[a][1])
        if iv[victim][1] > iv[v][1]:
            assigned[v] = assigned.pop(victim)
            active.remove(victim)
            active.append(v)
            spilled.append(victim)
        else:
            spilled.append(v)
    return assigned, spilled


def _move_hints(fn: IRFunction) -> dict[int, int]:
    """dest -> source of plain register moves, so both may share a register."""
    hints = {}
    for blk in fn.blocks:
        for ins in blk.instrs:
            if ins.op == Op.ADD and not ins.bi and ins.b == ZERO and ins.guard is None \
                    and ins.a != ZERO and ins.d != ZERO:
                hints[ins.d] = ins.a
    return hints


def allocate(fn: IRFunction) -> Allocation:
    """Assign physical registers and predicates; raises ResourceError when impossible."""

    for _ in range(4):
        piv = _intervals(fn, VInstr.pred_uses, VInstr.pred_def, VTerm.pred_uses)
        preds, pspill = _scan(piv, limits.NUM_PREDS, {})
        if not pspill:
            break
        demote_predicates(fn, set(pspill))
    else:
        raise ResourceError(
            f"{fn.name} needs more than {limits.NUM_PREDS} predicates live at once; simplify the "
            f"conditions that are live across each other"
        )
    riv = _intervals(fn, VInstr.reg_uses, VInstr.reg_def, lambda t: [])
    hints = _move_hints(fn)
    usable = limits.NUM_REGS - FIRST_REG
    regs, spilled = _scan(riv, usable, hints)
    if spilled:
        regs, spilled = _scan(riv, usable - SCRATCH, hints)
        if len(spilled) > limits.LOCAL_WORDS:
            raise ResourceError(
                f"{fn.name} needs {len(spilled) + usable - SCRATCH} registers live at once; the "
                f"machine has {usable} and {limits.LOCAL_WORDS} spill slots per thread — reduce "
                f"unrolling (#pragma unroll 1) or live values"
            )
    return Allocation(
        {v: r + FIRST_REG for v, r in regs.items()},
        {v: i for i, v in enumerate(spilled)},
        preds,
    )


def demote_predicates(fn: IRFunction, victims: set[int]) -> None:
    """Keep the given predicates in registers (0/1) instead: each use re-tests the register
    into a short-lived predicate, each definition is followed by a `sel` that stores it."""
    home = {p: fn.num_vregs + i for i, p in enumerate(sorted(victims))}
    fn.num_vregs += len(home)

    def fresh() -> int:
        fn.num_vpreds += 1
        return fn.num_vpreds - 1

    def reload(p: int, out: list[VInstr], line: int) -> int:
        t = fresh()
        out.append(VInstr(Op.SETP, t, home[p], imm=0, bi=True, mod=Cmp.NE, line=line,
                          comment="predicate reload"))
        return t

    for blk in fn.blocks:
        out: list[VInstr] = []
        for ins in blk.instrs:
            loaded = {p: reload(p, out, ins.line) for p in dict.fromkeys(ins.pred_uses())
                      if p in home}
            if ins.guard is not None and ins.guard[0] in loaded:
                ins.guard = (loaded[ins.guard[0]], ins.guard[1])
            if ins.op == Op.PLOP:
                ins.a, ins.b = loaded.get(ins.a, ins.a), loaded.get(ins.b, ins.b)
            elif ins.op == Op.SEL:
                ins.c = loaded.get(ins.c, ins.c)
            victim = ins.pred_def()
            if victim in home:
                ins.d = loaded[victim] if victim in loaded else fresh()
            out.append(ins)
            if victim in home:
                out.append(VInstr(Op.SEL, home[victim], ZERO, imm=1, bi=True, c=ins.d, mod=1,
                                  guard=ins.guard, line=ins.line, comment="predicate spill"))
        t = blk.term
        if t.kind == TermKind.BRA and t.pred in home:
            t.pred = reload(t.pred, out, t.line)
        blk.instrs = out


def insert_spill_code(fn: IRFunction, alloc: Allocation) -> None:
    """Rewrite instructions touching spilled values to go through scratch registers."""
    if not alloc.spilled:
        return
    scratch_regs = list(range(limits.NUM_REGS - SCRATCH, limits.NUM_REGS))
    next_v = fn.num_vregs
    for blk in fn.blocks:
        out: list[VInstr] = []
        for ins in blk.instrs:
            touched = [v for v in dict.fromkeys(ins.reg_uses()) if v in alloc.spilled]
            d = ins.reg_def()
            if len(touched) > SCRATCH:
                raise ResourceError(f"{fn.name}: line {ins.line}: too many spilled operands")
            mapping: dict[int, int] = {}
            for v in touched:
                mapping[v] = next_v
                alloc.regs[next_v] = scratch_regs[len(mapping) - 1]
                next_v += 1
                out.append(VInstr(Op.LD, mapping[v], ZERO, imm=4 * alloc.spilled[v],
                                  mod=Space.LOCAL, line=ins.line, comment="reload"))
            if d is not None and d in alloc.spilled and d not in mapping:
                mapping[d] = next_v
                alloc.regs[next_v] = scratch_regs[0]
                next_v += 1
            for field in ("d", "a", "b", "c"):
                val = getattr(ins, field)
                if val in mapping and ins.field_kind(field) == "reg":
                    setattr(ins, field, mapping[val])
            out.append(ins)
            if d is not None and d in alloc.spilled:
                out.append(VInstr(Op.ST, ZERO, ZERO, mapping[d], imm=4 * alloc.spilled[d],
                                  mod=Space.LOCAL, line=ins.line, comment="spill"))
        blk.instrs = out
    fn.num_vregs = next_v
