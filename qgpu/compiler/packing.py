"""Holding idle features packed: a wide 0/1 feature that waits many sublayers between two reads
travels the gap as base-16 digits (one count dim per 4 bits) and is unpacked just before its
late readers, which read the unpacked copy instead.

A scheduled circuit holds most of its residual dims in values that are computed early and read
late (a slot's result waits for the outbox, an atomic's operands for their lane's step), so the
peak of live dims is mostly waiting, not work. ``pack_idle`` rewrites the graph; the scheduler
places the pack right after the last early reader and sinks the unpack to just before the first
late one (each saves dims the later, or the earlier, it runs). The semantics of every original
feature are unchanged: the evaluator runs the rewritten graph, and a late reader sees the same
bits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from qgpu.compiler import gadgets as gd
from qgpu.compiler.graph import Addr, Address, Graph, Part, Read, Write, addr_features

DIGIT_BITS = 4
MIN_BITS = 8  # narrower features save too little for the pack's and unpack's neurons
MIN_GAP = 8  # sublayers a feature must wait unread to be held packed


PACK_ROUNDS = 3  # the scheduler packs again; each round shifts the schedule (best one kept)
Node = tuple[str, str]


def pack_idle(g: Graph, ready: dict[str, int], place: dict[Node, int]) -> Graph | None:
    """A pure Graph -> Graph pass: `g` with every wide 0/1 feature that waits at least MIN_GAP
    sublayers between two reads held packed across its longest wait, given a placement (the
    sublayer of each node, `place`, and of each feature's last writer, `ready`: a schedule's
    ``place()`` and ``ready``); None when no feature waits that long."""
    reads: dict[str, list[tuple[int, Node]]] = {}
    for node, s in place.items():
        kind, name = node
        if kind == "rules":
            ins = g.rule_inputs[name]
        else:
            ins = g.write_inputs(name) | {f for r in g.reads if r.bank == name
                                          for f in addr_features(r.addr)}
        for f in ins:
            reads.setdefault(f, []).append((s, node))
    counted = {d[0] for rules in g.rules.values() for r in rules for d in r.counted}
    aliased = {f.alias for f in g.features.values() if f.alias}
    late: dict[str, set[Node]] = {}
    for name, f in g.features.items():
        if (f.code == "word" or f.size < MIN_BITS or f.alias or name in aliased
                or name in counted or name not in reads or f"{name}.pk" in g.features):
            continue
        done = ready.get(name, -1)  # its last writer (a patched feature has several)
        times = sorted({done} | {s for s, _ in reads[name] if s > done})
        gaps = [(b - a, b) for a, b in zip(times, times[1:], strict=False)]
        gap, until = max(gaps, default=(0, 0))
        if gap >= MIN_GAP:
            late[name] = {node for s, node in reads[name] if s >= until}
    if not late:
        return None
    return _rewrite(g, late)


def _rewrite(g: Graph, late: dict[str, set[Node]]) -> Graph:
    """A copy of g where each feature f of `late` gets f.pk (its packed digits) and f.hd (the
    bits again), and the nodes in late[f] read f.hd."""
    out = Graph(dict(g.features), banks=dict(g.banks))
    for f in late:
        src = g.features[f]
        out.feature(f"{f}.pk", -(-src.size // DIGIT_BITS))
        out.feature(f"{f}.hd", src.size, src.code)

    def renamer(node: Node) -> Callable[[str], str]:
        moved = {f for f, nodes in late.items() if node in nodes}
        return lambda f: f"{f}.hd" if f in moved else f

    for name, rules in g.rules.items():
        sub = renamer(("rules", name))
        out.rule_group(name, [replace(r, literals=tuple(((sub(f), i), v)
                                                         for (f, i), v in r.literals))
                              for r in rules])  # counts are never packed: they stay
    for w in g.writes:
        sub = renamer(("bank", w.bank))
        out.writes.append(Write(w.bank, _addr(w.addr, sub),
                                tuple(Part(sub(p.feature), p.tap, p.offset) for p in w.parts),
                                None if w.enable is None else (sub(w.enable[0]), w.enable[1])))
    for r in g.reads:
        out.reads.append(Read(r.bank, _addr(r.addr, renamer(("bank", r.bank))), r.out))
    for f in late:
        gd.pack(out, f"{f}.pk", f, f"{f}.pk", digit_bits=DIGIT_BITS)
        gd.unpack(out, f"{f}.hd", f"{f}.pk", f"{f}.hd", digit_bits=DIGIT_BITS)
    return out


def _addr(addr: Addr, sub: Callable[[str], str]) -> Addr:
    if isinstance(addr, str):
        return sub(addr)
    return Address(tuple((sub(f), i) for f, i in addr.bits),
                   None if addr.enable is None else (sub(addr.enable[0]), addr.enable[1]))
