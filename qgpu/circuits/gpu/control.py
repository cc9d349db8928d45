"""The lanes' pcs and the scheduler: which block, warp and lanes run next (docs/ISA.md §5).

Every lane has a pc; a warp runs the lowest block any of its live lanes is at, with every lane
that is there. The pcs live in one bank per lane (row = warp: pc, exited, thread block), written
by the tokens that move lanes — ``exec`` (its lanes are at its block), ``park`` (lanes wait at a
block), ``exit`` — and tagged with the thread block, so rows of an earlier thread block (or never
written: tag 0) read as a fresh start, pc 0, and a new thread block costs no writes; a lane is
live only if it holds a thread (the launch shape says which).

Two places decide what comes next:

* **the EXEC pass** — the lanes that did not run the block (``c.q*``: the lowest pc among them
  and the lanes there) are known early, from the bank; at the end the terminator sends the
  block's lanes to its target (``c.tm``) or other (``c.om``) block or out (EXIT), and three
  candidates remain: target, other, and that lowest parked pc, whose order is also settled early.
  The warp continues at the lowest present candidate (``c.pc``, ``c.m``) unless it waits at a
  barrier (not a lone warp) or is done; then the scheduler sweeps (``c.nk``: exec, warp, cta,
  end). ``c.parkT``/``c.parkO``/``c.exit`` say which lane groups need a ``park``/``exit`` token:
  those the next EXEC does not cover, and exits only where something will read them again.
* **a ``warp:wV`` token** — the sweep looks at warp V: its lowest block if it has live lanes,
  else the next warp, or, back at the warp that stopped, the next thread block or END.
"""

from __future__ import annotations

from qgpu.circuits.gpu.banks import (
    EXEC,
    LANES,
    bits_of,
    cta_is,
    field_is,
    instr_bits,
    kind_dim,
    rails,
)
from qgpu.compiler import gadgets as gd
from qgpu.compiler.graph import Address, Graph, Part, Rule
from qgpu.machine import limits
from qgpu.machine.isa import TermKind

PC_BITS = 7
EXITED_BIT = PC_BITS  # lane rows: pc, exited, thread block
TAG = PC_BITS + 1
LANE_ROW = TAG + 4
NEXT_KINDS = ("exec", "warp", "cta", "end")
CANDIDATES = ("T", "O", "Q", "TQ", "OQ")  # who is at the warp's lowest block


def kind(k: str) -> tuple:
    return ((kind_dim(k), 1),)


def warp_is(v: int, field: str = "wrp") -> tuple:
    """Literals: a 2-bit warp field (rails ``wrp1``/``wrp0``) holds v."""
    return rails(field, 2, v)


def term_kind_is(k: TermKind) -> tuple:
    return field_is(limits.BLOCK_SLOTS, "kind", int(k))


def shape(g: Graph) -> None:
    """cfg.thr (bit t: thread t exists) and cfg.nct (bit c: thread block c exists)."""
    for bank, field, out, k in (("cfg.threads", "thr", "cfg.thr", "block"),
                                ("cfg.ctas", "ctas", "cfg.nct", "grid")):
        g.bank(bank, 1, "bits")
        g.write(bank, "one", parts=[Part(field)], enable=kind_dim(k))
        g.feature(out, g.features[field].size)
        g.read(bank, "one", out)
    g.feature("c.lone", 1)  # one warp per thread block: it passes barriers at once
    g.rule_group("c.lone", [Rule(((("cfg.thr", limits.WARP_LANES), 0),), ((("c.lone", 0), 1),))])
    g.feature("c.more", 1)  # a thread block follows the current one
    g.rule_group("c.more", [Rule(cta_is(c) + ((("cfg.nct", c + 1), 1),), ((("c.more", 0), 1),))
                            for c in range(limits.MAX_GRID_BLOCKS - 1)])
    g.feature("c.sw", 2)  # the warp after this token's warp field (cyclically)
    g.rule_group("c.sw", [
        Rule(warp_is(v) + ((("cfg.thr", limits.WARP_LANES * (v + 1)), 1),),
             tuple((("c.sw", i), 1) for i in range(2) if (v + 1) >> i & 1))
        for v in range(limits.MAX_WARPS - 1)])


def _idle(lane: int) -> list[tuple]:
    """Literal sets of tokens that look at the lane without having run it: an EXEC whose mask
    leaves it out, or a sweep's ``warp`` token."""
    return [kind("exec") + ((("msk1", lane), 0),), kind("warp")]


def lanes(g: Graph) -> None:
    """The lane banks and, per lane not run by this token, its state (``c.ql``: live,
    ``c.qp``: pc); then the lowest of those pcs (``c.qpc``), the lanes there (``c.qm``) and
    whether there is one (``c.qany``)."""
    g.feature("c.gone", 1)
    g.rule_group("c.gone", [Rule(kind("exit"), ((("c.gone", 0), 1),))])
    for lane in LANES:
        en, row = f"c.pw{lane}", f"c.lp{lane}"
        g.feature(en, 1)
        g.rule_group(en, [Rule(kind(k) + ((("msk1", lane), 1),), (((en, 0), 1),))
                          for k in ("exec", "park", "exit")])
        g.bank(f"lanes.{lane}", limits.MAX_WARPS, "bits")
        g.write(f"lanes.{lane}", Address(bits_of("wrp1", 2)),
                parts=[Part("blk1"), Part("c.gone", 0, EXITED_BIT), Part("cur.cta", 0, TAG)],
                enable=(en, 0))
        g.feature(row, LANE_ROW)
        g.read(f"lanes.{lane}", Address(bits_of("wrp1", 2)), row)
        tok, has = f"c.tok{lane}", f"c.has{lane}"
        g.feature(tok, 1)  # the row is of this thread block
        g.rule_group(tok, [Rule(cta_is(c) + tuple(((row, TAG + i), c >> i & 1) for i in range(4)),
                                (((tok, 0), 1),)) for c in range(limits.MAX_GRID_BLOCKS)])
        g.feature(has, 1)  # the lane holds a thread
        g.rule_group(has, [Rule(warp_is(v) + ((("cfg.thr", limits.WARP_LANES * v + lane), 1),),
                                (((has, 0), 1),)) for v in range(limits.MAX_WARPS)])
        live, pc = f"c.ql{lane}", f"c.qp{lane}"
        g.feature(live, 1)
        g.feature(pc, PC_BITS)
        rules = []
        for idle in _idle(lane):
            rules += [Rule(idle + (((has, 0), 1), ((tok, 0), 1), ((row, EXITED_BIT), 0)),
                           (((live, 0), 1),)),
                      Rule(idle + (((has, 0), 1), ((tok, 0), 0)), (((live, 0), 1),))]
            rules += [Rule(idle + (((tok, 0), 1), ((row, i), 1)), (((pc, i), 1),))
                      for i in range(PC_BITS)]
        g.rule_group(live, rules)
    pairs = [(i, j) for i in LANES for j in LANES if i < j]
    for i, j in pairs:
        rel = f"c.r{i}{j}"
        g.feature(rel, 3)  # lt, eq, gt of the two lanes' pcs
        gd.compare(g, rel, f"c.qp{i}", f"c.qp{j}", lt=(rel, 0), eq=(rel, 1), gt=(rel, 2))
    for lane in LANES:  # lanes ahead of it: lower pc, or equal pc and lower lane
        beaten = f"c.bt{lane}"
        g.feature(beaten, 1)
        rules = []
        for j in LANES:
            if j < lane:
                rules += [Rule(((("c.ql" + str(j), 0), 1), ((f"c.r{j}{lane}", r), 1)),
                               (((beaten, 0), 1),)) for r in (0, 1)]
            elif j > lane:
                rules.append(Rule(((("c.ql" + str(j), 0), 1), ((f"c.r{lane}{j}", 2), 1)),
                                  (((beaten, 0), 1),)))
        g.rule_group(beaten, rules)
    g.feature("c.qf", limits.WARP_LANES)  # the first lane at the lowest pc
    g.rule_group("c.qf", [r for lane in LANES for r in (
        Rule((((f"c.ql{lane}", 0), 1),), ((("c.qf", lane), 1),)),
        Rule((((f"c.ql{lane}", 0), 1),), ((("c.qf", lane), -1),), count=((f"c.bt{lane}", 0), 1)))])
    g.feature("c.qm", limits.WARP_LANES)
    g.feature("c.qpc", PC_BITS)
    g.feature("c.qany", 1)
    rules = [Rule(((("c.qf", f), 1),), ((("c.qany", 0), 1),)) for f in LANES]
    rules += [Rule(((("c.qf", f), 1), ((f"c.qp{f}", i), 1)), ((("c.qpc", i), 1),))
              for f in LANES for i in range(PC_BITS)]
    for f in LANES:
        rules.append(Rule(((("c.qf", f), 1),), ((("c.qm", f), 1),)))
        for lane in LANES:
            if lane != f:
                rel = (f"c.r{min(f, lane)}{max(f, lane)}", 1)
                rules.append(Rule(((("c.qf", f), 1), ((f"c.ql{lane}", 0), 1), (rel, 1)),
                                  ((("c.qm", lane), 1),)))
    g.rule_group("c.qm", rules)


def terminator(g: Graph) -> None:
    """The EXEC pass's decision (module docstring)."""
    term = limits.BLOCK_SLOTS
    for name, field in (("c.tgt", "target"), ("c.oth", "other")):
        g.feature(name, PC_BITS)
        g.rule_group(name, [Rule(EXEC + ((d, 1),), (((name, i), 1),))
                            for i, d in enumerate(instr_bits(term, field))])
    g.feature("c.rto", 3)
    gd.compare(g, "c.rto", "c.tgt", "c.oth", lt=("c.rto", 0), eq=("c.rto", 1), gt=("c.rto", 2))
    for name, a in (("c.rtq", "c.tgt"), ("c.roq", "c.oth")):
        g.feature(name, 3)
        gd.compare(g, name, a, "c.qpc", lt=(name, 0), eq=(name, 1), gt=(name, 2))
    bra, ext, bar = (EXEC + term_kind_is(k) for k in (TermKind.BRA, TermKind.EXIT, TermKind.BAR))
    onward = [EXEC + term_kind_is(k) for k in (TermKind.JMP, TermKind.BAR)]
    g.feature("c.wait", 1)
    g.rule_group("c.wait", [Rule(bar + ((("c.lone", 0), 0),), ((("c.wait", 0), 1),))])
    taken = [("t.taken", lane) for lane in LANES]
    g.feature("c.tm", limits.WARP_LANES)
    g.feature("c.om", limits.WARP_LANES)
    g.feature("c.pT", 1)
    g.feature("c.pO", 1)
    rules = [Rule(go + ((("msk1", lane), 1),), ((("c.tm", lane), 1),))
             for go in onward for lane in LANES]
    rules += [Rule(bra + ((taken[lane], 1),), ((("c.tm", lane), 1),)) for lane in LANES]
    rules += [Rule(bra + ((("msk1", lane), 1), (taken[lane], 0)), ((("c.om", lane), 1),))
              for lane in LANES]
    rules += [Rule(go, ((("c.pT", 0), 1),)) for go in onward]
    rules += [Rule(bra + ((taken[lane], 1),) + tuple((taken[j], 0) for j in range(lane)),
                   ((("c.pT", 0), 1),)) for lane in LANES]
    for lane in LANES:  # the lowest lane of the other group: lanes below it are out or taken
        for below in range(1 << lane):
            lits = tuple(((("msk1", j), 0),) if below >> j & 1 else
                         ((("msk1", j), 1), (taken[j], 1)) for j in range(lane))
            rules.append(Rule(bra + ((("msk1", lane), 1), (taken[lane], 0))
                              + tuple(x for lit in lits for x in lit), ((("c.pO", 0), 1),)))
    g.rule_group("c.groups", rules)
    g.feature("c.sel", len(CANDIDATES), "onehot")
    pT, pO, pQ = (("c.pT", 0), ("c.pO", 0), ("c.qany", 0))

    def rel(f: str, r: str) -> tuple:
        return (((f, "lt eq gt".split().index(r)), 1),)

    cases: list[tuple[tuple, str]] = [
        (((pT, 1), (pO, 0), (pQ, 0)), "T"), (((pT, 0), (pO, 1), (pQ, 0)), "O"),
        (((pT, 0), (pO, 0), (pQ, 1)), "Q"),
        (((pT, 1), (pO, 1), (pQ, 0)) + rel("c.rto", "lt"), "T"),
        (((pT, 1), (pO, 1), (pQ, 0)) + rel("c.rto", "gt"), "O"),
    ]
    for first, other_rel in (("T", "c.rtq"), ("O", "c.roq")):
        alone = ((pT, 1), (pO, 0)) if first == "T" else ((pT, 0), (pO, 1))
        both = ((pT, 1), (pO, 1)) + rel("c.rto", "lt" if first == "T" else "gt")
        for pres in (alone, both):
            cases += [(pres + ((pQ, 1),) + rel(other_rel, "lt"), first),
                      (pres + ((pQ, 1),) + rel(other_rel, "eq"), first + "Q"),
                      (pres + ((pQ, 1),) + rel(other_rel, "gt"), "Q")]
    g.rule_group("c.sel", [Rule(EXEC + lits, ((("c.sel", CANDIDATES.index(c)), 1),))
                           for lits, c in cases])
    sel = {c: (("c.sel", i), 1) for i, c in enumerate(CANDIDATES)}
    for name, size in (("c.pc", PC_BITS), ("c.m", limits.WARP_LANES),
                       ("c.parkT", 1), ("c.parkO", 1), ("c.exit", 1)):
        g.feature(name, size)
    g.feature("c.nk", len(NEXT_KINDS), "onehot")
    wait = ("c.wait", 0)
    rules = []
    for c, src in (("T", "c.tgt"), ("TQ", "c.tgt"), ("O", "c.oth"), ("OQ", "c.oth"),
                   ("Q", "c.qpc")):
        rules += [Rule((sel[c], ((src, i), 1)), ((("c.pc", i), 1),)) for i in range(PC_BITS)]
    for c, srcs in (("T", ["c.tm"]), ("TQ", ["c.tm", "c.qm"]), ("O", ["c.om"]),
                    ("OQ", ["c.om", "c.qm"]), ("Q", ["c.qm"])):
        rules += [Rule((sel[c], ((src, lane), 1)), ((("c.m", lane), 1),))
                  for src in srcs for lane in LANES]
        rules.append(Rule((sel[c], (wait, 0)), ((("c.nk", 0), 1),)))
        rules.append(Rule((sel[c], (wait, 1)), ((("c.nk", 1), 1),)))
    none = EXEC + tuple((s, 0) for s, _ in sel.values())
    lone = ("c.lone", 0)
    rules += [Rule(none + ((lone, 0),), ((("c.nk", 1), 1),)),
              Rule(none + ((lone, 1), (("c.more", 0), 1)), ((("c.nk", 2), 1),)),
              Rule(none + ((lone, 1), (("c.more", 0), 0)), ((("c.nk", 3), 1),))]
    rules += [Rule(((pT, 1), (wait, 1)), ((("c.parkT", 0), 1),)),
              Rule(((pO, 1), (wait, 1)), ((("c.parkO", 0), 1),))]
    rules += [Rule(((pT, 1), (wait, 0), sel[c]), ((("c.parkT", 0), 1),)) for c in ("O", "OQ", "Q")]
    rules += [Rule(((pO, 1), (wait, 0), sel[c]), ((("c.parkO", 0), 1),)) for c in ("T", "TQ", "Q")]
    rules += [Rule(ext + (sel["Q"],), ((("c.exit", 0), 1),)),
              Rule(ext + ((sel["Q"][0], 0), (lone, 0)), ((("c.exit", 0), 1),))]
    g.rule_group("c.next", rules)


def sweep(g: Graph) -> None:
    """A ``warp:wV`` token's choice (``c.wk``, over NEXT_KINDS): V's lowest block if it has
    live lanes; else, back at the warp that stopped (the last EXEC's), the next thread block or
    END; else the next warp (``c.sw``)."""
    g.feature("c.self", 1)  # V is the warp of the last EXEC
    g.rule_group("c.self", [Rule(kind("warp") + warp_is(v) + tuple(
        (("cur.wm", i), v >> i & 1) for i in range(2)), ((("c.self", 0), 1),))
        for v in range(limits.MAX_WARPS)])
    g.feature("c.wk", len(NEXT_KINDS), "onehot")
    w, live, me = kind("warp"), (("c.qany", 0), 1), ("c.self", 0)
    g.rule_group("c.wk", [
        Rule(w + (live,), ((("c.wk", 0), 1),)),
        Rule(w + ((live[0], 0), (me, 0)), ((("c.wk", 1), 1),)),
        Rule(w + ((live[0], 0), (me, 1), (("c.more", 0), 1)), ((("c.wk", 2), 1),)),
        Rule(w + ((live[0], 0), (me, 1), (("c.more", 0), 0)), ((("c.wk", 3), 1),)),
    ])


def build_control(g: Graph) -> None:
    shape(g)
    lanes(g)
    terminator(g)
    sweep(g)
