"""CFG clean-up and ROM layout.

Basic blocks are cleaned (unreachable blocks dropped, empty jump blocks threaded, straight-line
chains merged) and kept in program order — the machine runs a warp's lowest block first, so the
paths of a branch meet again at the first block both reach (docs/ISA.md §5) — and every basic
block is cut into ROM blocks of at most BLOCK_SLOTS instructions whose slots fit the slot units
(isa.SLOT_UNITS).
"""

from __future__ import annotations

from qgpu.errors import ResourceError
from qgpu.machine import limits
from qgpu.machine.isa import (
    NOP,
    Block,
    Instr,
    Op,
    Space,
    SReg,
    Term,
    TermKind,
    accesses_memory,
    guard_code,
    reads_atomic_result,
    slot_allows,
    writes_memory,
)
from qgpu.machine.liveness import liveness, machine_liveness
from qgpu.toolchain.lower.ir import IRBlock, IRFunction, VInstr, VTerm
from qgpu.toolchain.lower.regalloc import Allocation


def _retarget(term: VTerm, f) -> None:
    term.target = f(term.target)
    if term.kind == TermKind.BRA:
        term.other = f(term.other)


def simplify_cfg(fn: IRFunction) -> None:
    """Thread empty jump blocks, merge single-predecessor chains, drop unreachable blocks."""
    blocks = fn.blocks

    def final(i: int) -> int:
        seen = set()
        while not blocks[i].instrs and blocks[i].term.kind == TermKind.JMP and i not in seen \
                and i != 0:
            seen.add(i)
            i = blocks[i].term.target
        return i

    for blk in blocks:
        _retarget(blk.term, final)
    changed = True
    while changed:
        changed = False
        preds = _predecessors(blocks, _reachable(blocks))
        for i in _reachable(blocks):
            blk = blocks[i]
            t = blk.term
            if t.kind == TermKind.JMP and t.target != i and t.target != 0 \
                    and len(preds[t.target]) == 1:
                nxt = blocks[t.target]
                blk.instrs = blk.instrs + nxt.instrs
                blk.term = nxt.term
                nxt.instrs, nxt.term = [], VTerm(TermKind.EXIT)
                changed = True
                break
    order = _reachable(blocks)
    index = {old: new for new, old in enumerate(order)}
    fn.blocks = [blocks[i] for i in order]
    for blk in fn.blocks:
        _retarget(blk.term, lambda t: index[t])


# Instructions that may be dropped when nothing reads what they write: no memory writes, and no
# loads or shuffles (those can fault, and NVVM already removed the dead ones it saw).
_PURE = frozenset(Op) - {Op.ST, Op.ATOMG, Op.ATOMS, Op.SHFL}


def _removable(ins: VInstr) -> bool:
    return ins.op in _PURE and not (ins.op == Op.LD and ins.mod & 3 != Space.PARAM)


def remove_dead_code(fn: IRFunction) -> None:
    """Drop pure instructions whose results are never read (e.g. address arithmetic that an
    indexed load made unnecessary)."""
    changed = True
    while changed:
        changed = False
        reg_out = liveness(fn, VInstr.reg_uses, VInstr.reg_def, lambda t: [])[1]
        pred_out = liveness(fn, VInstr.pred_uses, VInstr.pred_def, VTerm.pred_uses)[1]
        for i, blk in enumerate(fn.blocks):
            regs, preds = set(reg_out[i]), set(pred_out[i])
            if blk.term.kind == TermKind.BRA:
                preds.add(blk.term.pred)
            kept: list[VInstr] = []
            for ins in reversed(blk.instrs):
                d, p = ins.reg_def(), ins.pred_def()
                if _removable(ins) and (d is None or d not in regs) and \
                        (p is None or p not in preds):
                    changed = True
                    continue
                regs.discard(d)
                preds.discard(p)
                regs.update(ins.reg_uses())
                preds.update(ins.pred_uses())
                kept.append(ins)
            blk.instrs = kept[::-1]


def _reachable(blocks: list[IRBlock]) -> list[int]:
    """Reachable blocks in reverse post-order, entry first, every loop's blocks before the
    blocks its exits lead to, and otherwise each branch's fall-through path right after it
    (short live intervals for the linear-scan allocator). The machine runs a warp's lowest block
    first, so lanes that left a loop must wait after every block of it: a loop whose body the
    branch target holds and whose exit is the fall-through (NVRTC's loops under `#pragma unroll
    1`) would otherwise run its exit first, with only the lanes that left."""
    exits = _loop_exits(blocks)
    seen, post = {0}, []

    def successors(node: int):
        succ = blocks[node].term.successors()
        return iter(sorted(succ, key=lambda s: -exits.get((node, s), 0)))

    stack = [(0, successors(0))]
    while stack:
        node, succ = stack[-1]
        nxt = next((s for s in succ if s not in seen), None)
        if nxt is None:
            post.append(node)
            stack.pop()
        else:
            seen.add(nxt)
            stack.append((nxt, successors(nxt)))
    return post[::-1]


def _loop_exits(blocks: list[IRBlock]) -> dict[tuple[int, int], int]:
    """For each edge that leaves loops, how many (natural loops, from the back edges of a depth-
    first search: structured code is reducible)."""
    back: list[tuple[int, int]] = []
    on_stack, done = {0}, set()
    stack = [(0, iter(blocks[0].term.successors()))]
    while stack:
        node, succ = stack[-1]
        nxt = next(succ, None)
        if nxt is None:
            on_stack.discard(node)
            done.add(node)
            stack.pop()
        elif nxt in on_stack:
            back.append((node, nxt))
        elif nxt not in done:
            on_stack.add(nxt)
            stack.append((nxt, iter(blocks[nxt].term.successors())))
    if not back:
        return {}
    preds: dict[int, list[int]] = {}
    for i in done:
        for s in blocks[i].term.successors():
            preds.setdefault(s, []).append(i)
    loops: dict[int, set[int]] = {}
    for latch, header in back:
        body = loops.setdefault(header, {header})
        work = [latch]
        while work:
            b = work.pop()
            if b not in body:
                body.add(b)
                work += preds.get(b, [])
    out: dict[tuple[int, int], int] = {}
    for body in loops.values():
        for b in body:
            for s in blocks[b].term.successors():
                if s not in body:
                    out[(b, s)] = out.get((b, s), 0) + 1
    return out


def _predecessors(blocks: list[IRBlock], live: list[int]) -> dict[int, list[int]]:
    preds: dict[int, list[int]] = {i: [] for i in range(len(blocks))}
    for i in live:
        for s in blocks[i].term.successors():
            preds[s].append(i)
    return preds


def layout(fn: IRFunction, alloc: Allocation) -> tuple[Block, ...]:
    """Cut basic blocks into ROM blocks and translate to machine instructions."""
    code = [[m for m in (_machine_instr(v, alloc) for v in blk.instrs) if not _is_self_move(m)]
            for blk in fn.blocks]
    chunked = [pack_slots(instrs) for instrs in code]
    first: list[int] = []
    count = 0
    for chunks in chunked:
        first.append(count)
        count += len(chunks)
    if count > limits.ROM_BLOCKS:
        raise ResourceError(
            f"{fn.name} needs {count} ROM blocks of {limits.BLOCK_SLOTS} instructions; the "
            f"program ROM holds {limits.ROM_BLOCKS} — make the kernel smaller (less unrolling, "
            f"fewer divisions)"
        )
    out: list[Block] = []
    for i, blk in enumerate(fn.blocks):
        chunks = chunked[i]
        for j, chunk in enumerate(chunks):
            if j < len(chunks) - 1:
                term = Term(TermKind.JMP, len(out) + 1)
            else:
                term = _machine_term(blk.term, first, alloc)
            out.append(Block(tuple(chunk), term))
    return tuple(hoist_into_branches(out))


def _uniform(ins: Instr) -> bool:
    """Writes the same value on every lane, with no memory access and no fault: a special
    register other than the thread index, or a parameter word. Run on more lanes, such a
    write still goes back as one ``all`` frame."""
    return not ins.guard and (ins.op == Op.S2R and ins.mod not in (SReg.TID_X, SReg.TID_Y)
                              or ins.op == Op.LD and ins.mod & 3 == Space.PARAM)


def _in_cycle(blocks: list[Block], start: int) -> bool:
    seen, todo = set(), list(blocks[start].term.successors())
    while todo:
        b = todo.pop()
        if b == start:
            return True
        if b not in seen:
            seen.add(b)
            todo += blocks[b].term.successors()
    return False


def hoist_into_branches(blocks: list[Block]) -> list[Block]:
    """Move a block into the branch before it when only that branch reaches it, it only jumps
    on, its instructions write lane-uniform values without touching memory (``_uniform``), the
    branch is in no loop and both fit one ROM block: the path through it runs one block (one
    EXEC token) less, and the write-back costs the same (one ``all`` frame per value). The
    other path now runs those instructions too, so none of their writes may be live on entry to
    the other successor, nor the branch's predicate; the two paths keep their order in the ROM
    (lowest block first), so the machine interleaves them as before."""
    while True:
        (regs_in, _), (preds_in, _) = machine_liveness(blocks)
        preds = [0] * len(blocks)
        for blk in blocks:
            for s in set(blk.term.successors()):
                preds[s] += 1
        for p, blk in enumerate(blocks):
            t = blk.term
            if t.kind != TermKind.BRA:
                continue
            for s, other in ((t.target, t.other), (t.other, t.target)):
                hoisted = _hoist(blocks, p, s, other, preds, (regs_in, preds_in))
                if hoisted is not None:
                    blocks = hoisted
                    break
            else:
                continue
            break
        else:
            return blocks


def _hoist(blocks: list[Block], p: int, s: int, other: int, preds: list[int],
           live_in: tuple[list[set[int]], list[set[int]]]) -> list[Block] | None:
    """`blocks` with block s moved into branch block p (hoist_into_branches), or None."""
    blk, moved = blocks[p], blocks[s]
    nxt = moved.term.target
    if s in (0, p, other) or preds[s] != 1 or moved.term.kind != TermKind.JMP or nxt == s \
            or (nxt < other) != (s < other) or not all(_uniform(i) for i in moved.instrs) \
            or _in_cycle(blocks, p):
        return None
    regs = {i.writes_reg() for i in moved.instrs} - {None, 0}
    flags = {i.writes_pred() for i in moved.instrs} - {None}
    if regs & live_in[0][other] or flags & live_in[1][other] or blk.term.pred in flags:
        return None
    chunks = pack_slots([i for i in blk.instrs + moved.instrs if i != NOP])
    if len(chunks) != 1:
        return None
    t = blk.term
    term = Term(t.kind, nxt if t.target == s else t.target, nxt if t.other == s else t.other,
                t.pred, t.negated)

    def index(b: int) -> int:
        return b - (b > s)

    out = []
    for b, old in enumerate(blocks):
        if b == s:
            continue
        o = term if b == p else old.term
        instrs = tuple(chunks[0]) if b == p else old.instrs
        out.append(Block(instrs, Term(o.kind, index(o.target), index(o.other), o.pred,
                                      o.negated)))
    return out


def pack_slots(instrs: list[Instr]) -> list[list[Instr]]:
    """Cut a basic block into ROM blocks whose slots fit the slot units (isa.SLOT_UNITS).

    Slot by slot, the first instruction in program order that the slot's units can run and that
    depends on no instruction still waiting takes it (memory accesses keep their order, so the
    first fault stays the first; none follows a store or atomic in its block; nothing reads an
    atomic's result in the atomic's block); a slot nothing fits holds a NOP."""
    pending = list(instrs)
    chunks: list[list[Instr]] = []
    while pending or not chunks:
        chunk: list[Instr] = []
        for slot in range(limits.BLOCK_SLOTS):
            if not pending:
                break
            stored = any(writes_memory(ins) for ins in chunk)
            pick = next((k for k, ins in enumerate(pending) if slot_allows(slot, ins)
                         and not (stored and accesses_memory(ins))
                         and not any(reads_atomic_result(ins, e) for e in chunk)
                         and not any(must_follow(ins, e) for e in pending[:k])), None)
            chunk.append(NOP if pick is None else pending.pop(pick))
        while chunk and chunk[-1] is NOP:
            chunk.pop()
        chunks.append(chunk)
    return chunks


def must_follow(later: Instr, earlier: Instr) -> bool:
    """Whether `later` must stay after `earlier`: a register (not r0) or predicate that one
    writes and the other reads or writes, or two memory accesses."""
    def regs(ins: Instr) -> tuple[int | None, set[int]]:
        return ins.writes_reg() or None, set(ins.reads()) - {0}

    def preds(ins: Instr) -> tuple[int | None, set[int]]:
        return ins.writes_pred(), set(ins.pred_reads())

    for accesses in (regs, preds):
        (w1, r1), (w2, r2) = accesses(earlier), accesses(later)
        if w1 is not None and (w1 in r2 or w1 == w2) or w2 is not None and w2 in r1:
            return True
    return accesses_memory(later) and accesses_memory(earlier)


def _machine_term(t: VTerm, first: list[int], alloc: Allocation) -> Term:
    if t.kind == TermKind.EXIT:
        return Term(TermKind.EXIT)
    if t.kind in (TermKind.JMP, TermKind.BAR) or t.target == t.other:
        return Term(t.kind if t.kind != TermKind.BRA else TermKind.JMP, first[t.target])
    return Term(TermKind.BRA, first[t.target], first[t.other], alloc.preds[t.pred], t.negated)


def _machine_instr(v: VInstr, alloc: Allocation) -> Instr:
    fields = {}
    for name in ("d", "a", "b", "c"):
        val, kind = getattr(v, name), v.field_kind(name)
        if kind == "reg":
            fields[name] = 0 if val == 0 else alloc.regs[val]
        elif kind == "pred":
            fields[name] = alloc.preds[val]
        else:
            fields[name] = val
    guard = 0 if v.guard is None else guard_code(alloc.preds[v.guard[0]], v.guard[1])
    return Instr(v.op, imm=v.imm, bi=v.bi, mod=v.mod, guard=guard, comment=v.comment,
                 undefined=v.undefined, **fields)


def _is_self_move(ins: Instr) -> bool:
    """``add rX, rX, r0`` left behind when a move's source and destination share a register."""
    return ins.op == Op.ADD and not ins.bi and ins.b == 0 and ins.d == ins.a and ins.guard == 0
