"""Liveness over blocks: the backward fixpoint that the ROM's live-out masks (rom.py) and the
lowering's register allocation and layout share."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

from qgpu.machine.isa import TermKind


def liveness(fn, uses_of, def_of, term_uses) -> tuple[list[set], list[set]]:
    """Per-block live-in and live-out sets of the values that uses_of/def_of/term_uses name
    (registers or predicates), by the usual backward fixpoint. Any function whose blocks have
    `instrs` and a `term` with `successors()` will do: the lowering's IR
    (qgpu/toolchain/lower/ir.py) or a machine Program."""
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
