"""The outbox and the emission: how the model chooses every token it generates.

The EXEC pass leaves everything its block produced in the **outbox** (one-row banks at the top
layers): per slot the destination register, the lanes whose write is the block's last to that
register and live (``fin``), whether one ``all`` frame carries them (``uni``: every active lane,
one value); whether a live predicate was written; the store's records (lane, space, word); the
control decision (control.py); and, one bank per value so that a token reads only the one it
needs, every result, the stored values and the predicate row.

The generated stream of a block is a fixed sequence of *positions*, each present or not:

    START (the EXEC) | VAL(slot, all | lane 0..3) per slot | PROW | MEM(lane) | PARK_T | PARK_O
    | EXIT | NEXT (exec, warp, cta or end: always present)

A header token finds its own position from its fields (a VAL header: the slot whose register
and lanes it names; a MEM header: the record lane whose word it names; a park: the group whose
lanes it names) and the next present position after it (one rule per pair of positions); it
writes that *frame* into a one-row bank, which the data tokens before the next header read —
so every token knows the frame that comes next. The frame's value is read from its bank (the
read's enable is the frame), its byte count picks the token: the highest non-zero byte ``dK``
first, then ``d(K-1)``..., then the header with byte 0.

**Selection** (docs/ARCHITECTURE.md §6): ``s.*`` features alias the token-input fields; the
chosen token's fields get ``GAIN`` each, so its logit beats every other token's by at least
``GAIN`` minus the current token's own field count.
"""

from __future__ import annotations

from qgpu import protocol as T
from qgpu.circuits.gpu.banks import (
    EXEC,
    LANES,
    bits_are,
    cta_is,
    field_is,
    instr_bits,
    kind_dim,
    one_rail,
    op_is,
)
from qgpu.circuits.gpu.encoding import FIELD, FIELDS, KINDS, LANE_SELECT, SPACES
from qgpu.compiler import gadgets as gd
from qgpu.compiler.graph import Address, Graph, Part, Rule
from qgpu.machine import limits
from qgpu.machine.isa import MEMORY_WRITING_OPS, SLOT_UNITS, Op, Space

GAIN = 32
WORD = 32
SLOTS = range(limits.BLOCK_SLOTS)
MEMORY_SLOTS = [s for s in SLOTS if SLOT_UNITS[s] == "memory"]
LANE_FRAMES = (*LANES, T.LANE_ALL)


def _positions() -> list[tuple]:
    out: list[tuple] = [("start",)]
    for s in SLOTS:
        out += [("val", s, T.LANE_ALL)] + [("val", s, lane) for lane in LANES]
    out += [("prow",)] + [("mem", lane) for lane in LANES]
    return out + [("parkT",), ("parkO",), ("exit",), ("next",)]


POSITIONS = _positions()
POS = {p: i for i, p in enumerate(POSITIONS)}
VALUE_POSITIONS = [p for p in POSITIONS if p[0] in ("val", "prow", "mem")]

FLAGS = [(f"o.d{s}", 4) for s in SLOTS] + [(f"o.fin{s}", 4) for s in SLOTS] + [
    ("o.uni", 4), ("o.prow", 1), ("o.rec", 4), ("o.ss", len(MEMORY_SLOTS)),
    ("o.at", len(MEMORY_SLOTS))] + [
    (f"o.sp{lane}", 3) for lane in LANES] + [(f"o.w{lane}", 7) for lane in LANES]
CONTROL = [("c.tgt", 7), ("c.oth", 7), ("c.tm", 4), ("c.om", 4), ("c.pc", 7), ("c.m", 4),
           ("c.nk", 4), ("c.sw", 2), ("x4.pr", 16), ("c.parkT", 1), ("c.parkO", 1),
           ("c.exit", 1)]


def _offsets(layout: list[tuple[str, int]]) -> dict[str, int]:
    out, at = {}, 0
    for name, width in layout:
        out[name], at = at, at + width
    return out


FLAG_AT, CONTROL_AT = _offsets(FLAGS), _offsets(CONTROL)
VALUE_BANKS = [(f"ob.v{s}{lane}", f"x{s}.out{lane}") for s in SLOTS for lane in LANES] + [
    (f"ob.{x}{lane}", f"a.{x[1]}{lane}") for x in ("ao", "an") for lane in LANES]
"""The outbox's value banks and what the EXEC writes there: every slot's results, an atomic's
old values (its register write-back) and new values (its memory records). A frame's enable
(e.en) picks one: dims 4s + lane, then 16 + lane (old), 20 + lane (new)."""
OLD_BANK, NEW_BANK = 4 * len(SLOTS), 4 * len(SLOTS) + limits.WARP_LANES


def flag(name: str, i: int = 0) -> tuple[str, int]:
    """The dim of an outbox flag as every token reads it back."""
    return ("e.fl", FLAG_AT[name] + i)


def ctl(name: str, i: int = 0) -> tuple[str, int]:
    return ("e.ct", CONTROL_AT[name] + i)


# --- the EXEC pass: the outbox ----------------------------------------------------------------


def _lowest(lane: int, mask: str = "msk1") -> tuple:
    """Literals: `lane` is the lowest set lane of a 4-bit mask."""
    return (((mask, lane), 1),) + tuple(((mask, j), 0) for j in range(lane))


def results(g: Graph) -> None:
    """Per slot: o.d (register), o.fin (final live write per lane), o.uni (one frame)."""
    live = instr_bits(limits.BLOCK_SLOTS, "live_regs")
    regs = range(1, limits.NUM_REGS)

    for s in SLOTS:
        g.feature(f"o.d{s}", 4)
        g.rule_group(f"o.d{s}", [Rule(EXEC + ((d, 1),), (((f"o.d{s}", i), 1),))
                                 for i, d in enumerate(instr_bits(s, "d"))])
        g.feature(f"o.lv{s}", 1)  # the destination is live after the block
        g.rule_group(f"o.lv{s}", [Rule(EXEC + field_is(s, "d", r) + ((live[r - 1], 1),),
                                       (((f"o.lv{s}", 0), 1),)) for r in regs])
        later = [t for t in SLOTS if t > s]
        for t in later:
            g.feature(f"o.dd{s}{t}", 1)
            g.rule_group(f"o.dd{s}{t}", [Rule(EXEC + field_is(s, "d", r) + field_is(t, "d", r),
                                              (((f"o.dd{s}{t}", 0), 1),)) for r in regs])
        fin = f"o.fin{s}"
        g.feature(fin, limits.WARP_LANES)
        rules = []
        for lane in LANES:
            mine = (((f"x{s}.wr{lane}", 0), 1), ((f"o.lv{s}", 0), 1))
            rules.append(Rule(mine, (((fin, lane), 1),)))
            if later:
                kill = f"o.kl{s}{lane}"  # later slots writing the same register in this lane
                g.feature(kill, 1)
                g.rule_group(kill, [Rule((((f"x{t}.wr{lane}", 0), 1), ((f"o.dd{s}{t}", 0), 1)),
                                         (((kill, 0), 1),)) for t in later])
                rules.append(Rule(mine, (((fin, lane), -1),), count=((kill, 0), 1)))
        g.rule_group(fin, rules)
        for lane in LANES:  # the result's bits again (for its value bank), from its digits
            g.feature(f"x{s}.out{lane}", WORD)
            gd.unpack(g, f"x{s}.out{lane}", f"x{s}.rpk{lane}", f"x{s}.out{lane}")
        for lane in LANES[1:]:  # digits where the lane differs from the lowest active lane
            df = f"o.df{s}{lane}"
            g.feature(df, 1)
            rules = []
            for f in range(lane):
                both = _lowest(f) + ((("msk1", lane), 1),)
                for k in range(WORD // 4):  # the digit differs: neither >= 1 nor < 0 apart
                    mine, base = (f"x{s}.rpk{lane}", k), (f"x{s}.rpk{f}", k)
                    rules += [Rule(both, (((df, 0), 1),), count=(mine, 1), minus=base),
                              Rule(both, (((df, 0), 1),)),
                              Rule(both, (((df, 0), -1),), count=(mine, 0), minus=base)]
            g.rule_group(df, rules)
            g.feature(f"o.ne{s}{lane}", 1)
            g.rule_group(f"o.ne{s}{lane}", [Rule((), (((f"o.ne{s}{lane}", 0), 1),),
                                                 count=((df, 0), 1))])
    g.feature("o.uni", len(SLOTS))
    rules = []
    for s in SLOTS:
        for m in range(1, 1 << limits.WARP_LANES):
            on = [lane for lane in LANES if m >> lane & 1]
            lits = EXEC + tuple((("msk1", lane), m >> lane & 1) for lane in LANES)
            lits += tuple(((f"o.fin{s}", lane), 1) for lane in on)
            lits += tuple(((f"o.ne{s}{lane}", 0), 0) for lane in on if lane)
            if s in MEMORY_SLOTS:  # an atomic's old values: one frame per lane
                lits += (((f"x{s}.atm", 0), 0),)
            rules.append(Rule(lits, ((("o.uni", s), 1),)))
    g.rule_group("o.uni", rules)
    g.feature("o.pwn", 1, accumulate=True)  # live predicates written (a count), slot by slot
    live_p = instr_bits(limits.BLOCK_SLOTS, "live_preds")
    for s in SLOTS:
        g.rule_group(f"o.pwn{s}", [Rule((((f"x{s}.pw{lane}", p), 1), (live_p[p], 1)),
                                        ((("o.pwn", 0), 1),))
                                   for lane in LANES for p in range(limits.NUM_PREDS)])
    g.feature("o.prow", 1)
    g.rule_group("o.prow", [Rule((), ((("o.prow", 0), 1),), count=(("o.pwn", 0), 1))])


def records(g: Graph) -> None:
    """The records of the store or atomic by lane (only one memory slot of a block writes
    memory): o.ss (which slot), o.at (it is an atomic), o.rec (the slot's ``keep``); the space
    (o.sp) and the word (o.w) come from the slot (memory.record_fields). A stored value goes
    into the slot's result (a store writes no register), so its value bank carries it; an
    atomic's old and new values have banks of their own."""
    g.feature("o.rec", limits.WARP_LANES)
    g.feature("o.ss", len(MEMORY_SLOTS))
    g.feature("o.at", len(MEMORY_SLOTS))
    rules = [Rule(EXEC + op_is(s, op), ((("o.ss", k), 1),)) for k, s in enumerate(MEMORY_SLOTS)
             for op in MEMORY_WRITING_OPS]
    rules += [Rule((((f"x{s}.atm", 0), 1),), ((("o.at", k), 1),))
              for k, s in enumerate(MEMORY_SLOTS)]
    rules += [Rule((((f"x{s}.keep{lane}", 0), 1),), ((("o.rec", lane), 1),))
              for lane in LANES for s in MEMORY_SLOTS]
    g.rule_group("o.records", rules)
    for s in MEMORY_SLOTS:
        for lane in LANES:
            st = (((f"x{s}.ex{lane}", 0), 1),) + op_is(s, Op.ST)
            g.rule_group(f"x{s}.res{lane}.st", [
                Rule(st + (((f"x{s}.v{lane}", i), 1),), (((f"x{s}.res{lane}", i), 1),))
                for i in range(WORD)])


def outbox(g: Graph) -> None:
    """The EXEC pass writes the outbox; every token reads the flags (e.fl) and the control
    decision (e.ct) back — the EXEC its own."""
    for bank, layout, out in (("ob.fl", FLAGS, "e.fl"), ("ob.ct", CONTROL, "e.ct")):
        g.bank(bank, 1, "bits")
        at = _offsets(layout)
        g.write(bank, "one", parts=[Part(name, 0, at[name]) for name, _ in layout],
                enable=kind_dim("exec"))
        g.feature(out, sum(w for _, w in layout))
        g.read(bank, "one", out)
    for bank, value in VALUE_BANKS:
        g.bank(bank, 1, "bits")
        g.write(bank, "one", parts=[Part(value)], enable=kind_dim("exec"))


# --- every token: where it is and what comes next --------------------------------------------


def _present(p: int) -> tuple[str, int]:
    """The dim saying whether position p is present in the block's stream."""
    return ("e.pc" if POSITIONS[p][0] in ("parkT", "parkO", "exit", "next") else "e.pr", p)


def positions(g: Graph) -> None:
    """e.pr: which positions are present; e.pos: this header's own position (EXEC: START);
    e.nf: the next present position after it; e.fr: the frame the next token belongs to."""
    n = len(POSITIONS)
    g.feature("e.pr", n)
    rules = []
    for s in SLOTS:
        rules.append(Rule(((flag("o.uni", s), 1),), ((("e.pr", POS["val", s, T.LANE_ALL]), 1),)))
        rules += [Rule(((flag(f"o.fin{s}", lane), 1), (flag("o.uni", s), 0)),
                       ((("e.pr", POS["val", s, lane]), 1),)) for lane in LANES]
    rules.append(Rule(((flag("o.prow"), 1),), ((("e.pr", POS["prow",]), 1),)))
    rules += [Rule(((flag("o.rec", lane), 1),), ((("e.pr", POS["mem", lane]), 1),))
              for lane in LANES]
    g.rule_group("e.pr", rules)
    g.feature("e.pc", n)  # the control positions' presence, from the control bank
    g.rule_group("e.pc", [Rule(((ctl(f"c.{k}"), 1),), ((("e.pc", POS[k,]), 1),))
                          for k in ("parkT", "parkO", "exit")]
                 + [Rule((), ((("e.pc", POS["next",]), 1),))])
    for lane in LANES:  # MEM headers: bits where the header's word differs from the record's
        mx = f"e.mx{lane}"
        g.feature(mx, 1)
        rec = [flag(f"o.w{lane}", i) for i in range(7)]
        rules = [Rule(((rec[i], v), (("mrow1", i), 1 - v)), (((mx, 0), 1),))
                 for i in range(7) for v in (0, 1)]  # read on MEM headers only (e.pos)
        spaces = ((Space.GLOBAL, "g"), (Space.SHARED, "s"), (Space.LOCAL, f"l{lane}"))
        rules += [Rule(((flag(f"o.sp{lane}", k), 1), (("mspace", SPACES.index(name)), 0)),
                       (((mx, 0), 1),)) for k, (_, name) in enumerate(spaces)]
        g.rule_group(mx, rules)
    g.feature("e.pos", n, "onehot")
    rules = [Rule(((kind_dim("exec"), 1),), ((("e.pos", POS["start",]), 1),))]
    regs = range(1, limits.NUM_REGS)
    for s in SLOTS:
        d = [flag(f"o.d{s}", i) for i in range(4)]
        for lane in LANE_FRAMES:
            p = POS["val", s, lane]
            rules += [Rule(((kind_dim("val"), 1), (("lanesel", LANE_SELECT.index(lane)), 1),
                            (("e.pr", p), 1)) + one_rail("reg", 4, r) + bits_are(d, r),
                           ((("e.pos", p), 1),)) for r in regs]
    rules.append(Rule(((kind_dim("prow"), 1),), ((("e.pos", POS["prow",]), 1),)))
    for lane in LANES:
        here = ((kind_dim("mem"), 1), (("e.pr", POS["mem", lane]), 1))
        rules += [Rule(here, ((("e.pos", POS["mem", lane]), 1),)),
                  Rule(here, ((("e.pos", POS["mem", lane]), -1),), count=((f"e.mx{lane}", 0), 1))]
    for group, mask in (("parkT", "c.tm"), ("parkO", "c.om")):
        rules += [Rule(((kind_dim("park"), 1),) + one_rail("msk", 4, m)
                       + bits_are([ctl(mask, i) for i in range(4)], m),
                       ((("e.pos", POS[group,]), 1),)) for m in range(1, 1 << limits.WARP_LANES)]
    rules.append(Rule(((kind_dim("exit"), 1),), ((("e.pos", POS["exit",]), 1),)))
    g.rule_group("e.pos", rules)
    g.feature("e.hp", 1)
    g.rule_group("e.hp", [Rule(((("e.pos", p), 1),), ((("e.hp", 0), 1),)) for p in range(n)])
    g.feature("e.nf", n, "onehot")
    g.rule_group("e.nf", [
        Rule(((("e.pos", p), 1), (_present(q), 1))
             + tuple((_present(r), 0) for r in range(p + 1, q)), ((("e.nf", q), 1),))
        for p in range(n) for q in range(p + 1, n)])
    g.bank("ob.cf", 1, "bits")
    g.write("ob.cf", "one", parts=[Part("e.nf")], enable=("e.hp", 0))
    g.feature("e.cf", n)
    g.read("ob.cf", "one", "e.cf")
    g.feature("e.fr", n, "onehot")
    g.rule_group("e.fr", [Rule(lits, ((("e.fr", q), 1),)) for q in range(n)
                          for lits in _frame_is(q)])


def _frame_is(q: int) -> list[tuple]:
    """Literal sets, one of which holds when the next token belongs to frame q: a header's (or
    the EXEC's) successor, or the frame a data token's last header announced."""
    return [((("e.hp", 0), 1), (("e.nf", q), 1))] + [
        ((kind_dim(f"d{k}"), 1), (("e.cf", q), 1)) for k in range(1, T.DATA_POSITIONS + 1)]


def values(g: Graph) -> None:
    """e.v: the frame's value (its bank's read is enabled by the frame; an ``all`` frame reads
    the lowest active lane's); e.k: which byte the next token carries (one-hot 0..3)."""
    fr = {p: ("e.fr", i) for p, i in POS.items()}
    g.feature("e.en", len(VALUE_BANKS))  # which value bank to read
    rules = []
    for s in SLOTS:
        for lane in LANES:
            en = ((("e.en", 4 * s + lane), 1),)
            if s in MEMORY_SLOTS:
                k = MEMORY_SLOTS.index(s)
                plain, atom = ((flag("o.at", k), 0),), ((flag("o.at", k), 1),)
                for lits in _frame_is(POS["val", s, lane]):
                    rules += [Rule(lits + plain, en),
                              Rule(lits + atom, ((("e.en", OLD_BANK + lane), 1),))]
                for lits in _frame_is(POS["mem", lane]):  # records: a store's value, or new
                    rules += [Rule(lits + ((flag("o.ss", k), 1),) + plain, en),
                              Rule(lits + atom, ((("e.en", NEW_BANK + lane), 1),))]
            else:
                rules += [Rule(lits, en) for lits in _frame_is(POS["val", s, lane])]
            for lits in _frame_is(POS["val", s, T.LANE_ALL]):
                rules.append(Rule(lits + _lowest(lane, "cur.m"), en))
    g.rule_group("e.en", rules)
    g.feature("e.v", WORD, accumulate=True)
    for i, (bank, _) in enumerate(VALUE_BANKS):
        g.read(bank, Address((), ("e.en", i)), "e.v")
    g.rule_group("e.v.prow", [Rule(((fr["prow",], 1), (ctl("x4.pr", i), 1)), ((("e.v", i), 1),))
                              for i in range(2 * 8)])
    g.feature("e.k", 4, "onehot")  # the byte the next token carries
    hp = ((("e.hp", 0), 1),)
    rules = [Rule(((kind_dim(f"d{k}"), 1),), ((("e.k", k - 1), 1),)) for k in range(1, 4)]
    for i in range(8, WORD):  # a frame's first token: the byte of its highest set bit
        rules.append(Rule(hp + ((("e.v", i), 1),) + tuple((("e.v", j), 0)
                                                          for j in range(i + 1, WORD)),
                          ((("e.k", i // 8), 1),)))
    rules.append(Rule(hp + tuple((("e.v", j), 0) for j in range(8, WORD)), ((("e.k", 0), 1),)))
    g.rule_group("e.k", rules)
    g.feature("e.hv", 1)
    g.rule_group("e.hv", [Rule(((fr[p], 1),), ((("e.hv", 0), 1),)) for p in VALUE_POSITIONS])


# --- selection ----------------------------------------------------------------------------------


def _pick_kind(cond: tuple, k: str) -> Rule:
    return Rule(cond, ((("s.kind", KINDS.index(k)), GAIN),))


def _pick_onehot(cond: tuple, field: str, i: int) -> Rule:
    return Rule(cond, (((f"s.{field}", i), GAIN),))


def _pick_rails(cond: tuple, field: str, src: list[tuple[str, int]]) -> list[Rule]:
    """The rails of `field` copy the bits of the dims `src`."""
    return [r for i, d in enumerate(src) for r in (
        Rule(cond + ((d, 1),), (((f"s.{field}1", i), GAIN),)),
        Rule(cond + ((d, 0),), (((f"s.{field}0", i), GAIN),)))]


def _pick_const(cond: tuple, field: str, value: int) -> Rule:
    width = FIELD[field].size
    return Rule(cond, tuple(((f"s.{field}{value >> i & 1}", i), GAIN) for i in range(width)))


def _next_cta(cond: tuple) -> list[Rule]:
    return [r for c in range(limits.MAX_GRID_BLOCKS - 1)
            for r in (_pick_kind(cond + cta_is(c), "cta"),
                      _pick_const(cond + cta_is(c), "cta", c + 1))]


CUR_WARP_DIMS = [("cur.wm", i) for i in range(2)]


def selection(g: Graph) -> None:
    """The s.* features: the token every token chooses next (module docstring)."""
    for f in FIELDS:
        if f.selects:
            for name, size in f.features().items():
                g.feature(f"s.{name}", size, f.code if f.code == "onehot" else "bits",
                          accumulate=True, alias=name)
    g.feature("e.stop", 1)  # the EXEC found a fault: it chooses only the fault
    g.rule_group("e.stop", [Rule(((("x.fault", f), 1),), ((("e.stop", 0), 1),))
                            for f in range(len(T.FAULTS))])
    rules = []
    for f in range(len(T.FAULTS)):
        cond = ((("x.fault", f), 1),)
        rules += [_pick_kind(cond, "fault"), _pick_onehot(cond, "fault", f)]
    run = ((("e.stop", 0), 0),)
    fr = {p: ("e.fr", i) for p, i in POS.items()}
    for k in range(4):
        cond = run + ((("e.hv", 0), 1), (("e.k", k), 1))
        rules += _pick_rails(cond, "byte", [("e.v", 8 * k + i) for i in range(8)])
        if k:
            rules.append(_pick_kind(cond, f"d{k}"))
    header = run + ((("e.k", 0), 1),)
    for s in SLOTS:
        for lane in LANE_FRAMES:
            cond = header + ((fr["val", s, lane], 1),)
            rules += [_pick_kind(cond, "val"),
                      _pick_onehot(cond, "lanesel", LANE_SELECT.index(lane))]
            rules += _pick_rails(cond, "reg", [flag(f"o.d{s}", i) for i in range(4)])
    rules.append(_pick_kind(header + ((fr["prow",], 1),), "prow"))
    for lane in LANES:
        cond = header + ((fr["mem", lane], 1),)
        rules.append(_pick_kind(cond, "mem"))
        rules += _pick_rails(cond, "mrow", [flag(f"o.w{lane}", i) for i in range(7)])
        for k, name in enumerate(("g", "s", f"l{lane}")):
            rules.append(_pick_onehot(cond + ((flag(f"o.sp{lane}", k), 1),), "mspace",
                                      SPACES.index(name)))
    for group, pc, mask in (("parkT", "c.tgt", "c.tm"), ("parkO", "c.oth", "c.om")):
        cond = header + ((fr[group,], 1),)
        rules.append(_pick_kind(cond, "park"))
        rules += _pick_rails(cond, "blk", [ctl(pc, i) for i in range(7)])
        rules += _pick_rails(cond, "wrp", CUR_WARP_DIMS)
        rules += _pick_rails(cond, "msk", [ctl(mask, i) for i in range(4)])
    cond = header + ((fr["exit",], 1),)
    rules += [_pick_kind(cond, "exit")] + _pick_rails(cond, "wrp", CUR_WARP_DIMS)
    rules += _pick_rails(cond, "msk", [("cur.wm", 2 + i) for i in range(4)])
    nxt = header + ((fr["next",], 1),)
    cond = nxt + ((ctl("c.nk", 0), 1),)
    rules += [_pick_kind(cond, "exec")] + _pick_rails(cond, "blk", [ctl("c.pc", i)
                                                                   for i in range(7)])
    rules += _pick_rails(cond, "wrp", CUR_WARP_DIMS)
    rules += _pick_rails(cond, "msk", [ctl("c.m", i) for i in range(4)])
    cond = nxt + ((ctl("c.nk", 1), 1),)
    rules += [_pick_kind(cond, "warp")] + _pick_rails(cond, "wrp", [ctl("c.sw", i)
                                                                   for i in range(2)])
    rules += _next_cta(nxt + ((ctl("c.nk", 2), 1),))
    rules.append(_pick_kind(nxt + ((ctl("c.nk", 3), 1),), "end"))
    g.rule_group("s.emit", rules)
    rules = []
    for k in ("go", "cta"):  # a thread block starts: warp 0 at block 0
        cond = ((kind_dim(k), 1),)
        rules += [_pick_kind(cond, "exec"), _pick_const(cond, "blk", 0),
                  _pick_const(cond, "wrp", 0)]
        rules += _pick_rails(cond, "msk", [("cfg.thr", i) for i in range(4)])
    cond = ((("c.wk", 0), 1),)
    rules += [_pick_kind(cond, "exec")] + _pick_rails(cond, "blk", [("c.qpc", i)
                                                                   for i in range(7)])
    rules += _pick_rails(cond, "wrp", [("wrp1", i) for i in range(2)])
    rules += _pick_rails(cond, "msk", [("c.qm", i) for i in range(4)])
    cond = ((("c.wk", 1), 1),)
    rules += [_pick_kind(cond, "warp")] + _pick_rails(cond, "wrp", [("c.sw", i)
                                                                   for i in range(2)])
    rules += _next_cta(((("c.wk", 2), 1),))
    rules.append(_pick_kind(((("c.wk", 3), 1),), "end"))
    g.rule_group("s.schedule", rules)


def build_outbox(g: Graph) -> None:
    g.feature("cur.m", limits.WARP_LANES)  # the last EXEC's active lanes
    g.rule_group("cur.m", [Rule(((("cur.wm", 2 + lane), 1),), ((("cur.m", lane), 1),))
                           for lane in LANES])
    results(g)
    records(g)
    outbox(g)
    positions(g)
    values(g)
    selection(g)
