"""Executing a block's slots for the 4 lanes of a warp inside one EXEC pass.

Per slot s and lane l:

* **operands** — ports a, b (and c in multiplier slots, v in memory slots) read the lane's
  register file (one bits-bank copy per slot, port and lane, row = (warp, register) addressed in
  binary, all written by VAL frames) at the register the slot's fields name. A value an earlier
  slot of the same block wrote is patched in place from the latest earlier slot that wrote that
  register in this lane: its result waits as base-16 digits (``x{s}.rpk{l}``, a mirror of the
  result's writers), the read's bits are cleared and the digits' bits added. With ``bi`` the
  immediate is added to port b (which then reads r0 = 0); so is a memory access's offset.
* **guard** — the warp's predicate row is read once per slot and patched bit by bit from earlier
  slots; ``x{s}.ex{l}`` = the lane is active and its guard allows the instruction.
* **results** — every unit adds into ``x{s}.res{l}`` (or the predicate ``x{s}.pres{l}``) gated
  by its opcode and ``ex``, so exactly one unit's value lands there; the result is written
  through to its base-16 digits ``x{s}.rpk{l}`` and never exists as bits before the outbox
  unpacks it (``packed_results``). In a multiplier slot the units read a and b as the adder's
  operands p and q (``banks.operand_a``), so ports a and b die with the multiplier's first
  layer; ``x{s}.wr{l}`` says the lane wrote register d (r0 never counts), ``x{s}.pw{l}`` which
  predicate it wrote.

Units: one adder per lane that adds or subtracts (ADD, SUB, and the flags of SETP and MIN/MAX),
bitwise AND/OR/XOR/NOT, shifts (a two-stage barrel shifter per lane), NEG/ABS/POPC/CLZ/BREV,
SEL/PLOP, special registers (S2R: lookups over the warp, the lane, the thread block and the
launch shape read from memory). Slots whose unit is the multiplier (isa.SLOT_UNITS) compress
a * b (+ c) into two numbers and hand them to the same adder, which then serves MUL and MAD as
well (MULHI and MULHIU too in isa.HIGH_MULTIPLY_SLOTS: slot 3 multiplies the low half only):
multiplying costs those slots four layers and no second adder. Loads, stores, shuffles
and faults of the memory slots are in memory.py; after the slots, the branch's taken lanes.
"""
from __future__ import annotations

import itertools
import operator
from collections.abc import Callable

from qgpu.circuits.gpu import atomic, memory
from qgpu.circuits.gpu.banks import (
    ACCESSES,
    EXEC,
    LANES,
    access_is,
    bits_of,
    cta_is,
    field_is,
    hex_digit,
    instr_bits,
    kind_dim,
    op_is,
    operand_a,
    operand_b,
    pred_bank,
    rails,
    reg_bank,
)
from qgpu.circuits.gpu.encoding import SHAPE_BITS
from qgpu.compiler import gadgets as gd
from qgpu.compiler.graph import Address, Dim, Graph, Rule
from qgpu.machine import limits
from qgpu.machine.isa import (
    ATOMIC_OPS,
    FLOAT_OPS,
    PRED_DEST_OPS,
    SLOT_UNITS,
    Atom,
    Cmp,
    Instr,
    Op,
    SReg,
    TermKind,
    slot_allows,
)

PORTS = {"multiply": "abc", "memory": "abv"}
"""Register ports per slot unit: c is the addend of MAD, v the value a store or atomic writes;
every port costs 4 lanes x 32 residual dims while its value lives."""
WORD = 32
REG_WRITING_OPS = tuple(op for op in Op if op not in PRED_DEST_OPS and op != Op.ST
                        and op not in FLOAT_OPS)  # no float unit yet: the protocol refuses them
SUBTRACTING_OPS = (Op.SUB, Op.SETP, Op.MIN, Op.MAX, Op.MINU, Op.MAXU)
MULTIPLYING_OPS = (Op.MUL, Op.MAD, Op.MULHI, Op.MULHIU)


def multiplying_ops(s: int) -> tuple[Op, ...]:
    """The multiplies slot s runs (isa.slot_allows: none in a memory slot, the high halves only
    in isa.HIGH_MULTIPLY_SLOTS)."""
    return tuple(op for op in MULTIPLYING_OPS if slot_allows(s, Instr(op)))


def any_op(g: Graph, name: str, slot: int, ops: tuple[Op, ...]) -> None:
    """A 1-dim flag: the slot's opcode is one of `ops`."""
    g.feature(name, 1)
    g.rule_group(name, [Rule(EXEC + op_is(slot, op), (((name, 0), 1),)) for op in ops])


def _patch(g: Graph, name: str, slot: int, target: Callable[[int], str], width: int,
           same: Callable[[int], list[tuple]], wrote: str, packed: str,
           extra: Callable[[int], list[Rule]] = lambda lane: []) -> None:
    """Patch the read feature target(lane) with the value that the latest earlier slot j of the
    block wrote to the same register in that lane: eq (the slots name the same one: any of
    same(j)'s literal sets holds) -> hit (and the lane wrote it) -> sel (no later slot hit) ->
    the read's set bits cleared and slot j's result added from its base-16 digits (`packed`,
    ``packed_results``: a result waits for later slots in 8 dims, not 32, and its bits never
    come back: the patch's count steps write them). `extra(lane)`: rules that join the lane's
    patch group (in its layer, so they do not bring the feature's birth forward)."""
    js = list(range(slot))
    eq = f"{name}.eq"
    g.feature(eq, len(js))
    g.rule_group(eq, [Rule(lits, (((eq, j), 1),)) for j in js for lits in same(j)])
    for lane in LANES:
        hit, sel, out = f"{name}.hit{lane}", f"{name}.sel{lane}", target(lane)
        g.feature(hit, len(js))
        g.rule_group(hit, [Rule((((eq, j), 1), ((wrote.format(j=j, lane=lane), 0), 1)),
                                (((hit, j), 1),)) for j in js])
        g.feature(sel, len(js))
        g.rule_group(sel, [Rule((((hit, j), 1),) + tuple(((hit, m), 0) for m in js[j + 1:]),
                                (((sel, j), 1),)) for j in js])
        g.rule_group(f"{out}.patch", [
            Rule((((sel, j), 1), ((out, i), 1)), (((out, i), -1),))
            for j in js for i in range(width)] + [
            r for j in js for r in gd.unpack_rules(g, packed.format(j=j, lane=lane), out,
                                                   when=(((sel, j), 1),))] + extra(lane))


def port_source(g: Graph, s: int, port: str) -> tuple[list[Dim], Dim]:
    """The dims naming a port's register and the dim that enables its read. In a memory slot
    a plain access reads port b only as r0 (so the adder forms a + imm, the address), an
    indexed one its index (field b); the value register of a store or atomic comes through
    port v (field b; an indexed store's field c: ``x{s}.vf``)."""
    if SLOT_UNITS[s] != "memory" or port == "a":
        return instr_bits(s, port), kind_dim("exec")
    if port == "b":  # a CAS reads its swap value (field c) here; it has no immediate
        bf, cas = f"x{s}.bf", tuple(lit for lit in field_is(s, "mod", Atom.CAS))
        g.feature(bf, 4)
        g.rule_group(bf, [Rule(EXEC + ((b, 1),), (((bf, i), 1),))
                          for i, b in enumerate(instr_bits(s, "b"))] + [
            Rule(EXEC + op_is(s, op) + cas + ((d, 1),), (((bf, i), sign),))
            for op in ATOMIC_OPS for f, sign in (("c", 1), ("b", -1))
            for i, d in enumerate(instr_bits(s, f))])
        return [(bf, i) for i in range(4)], (f"x{s}.rdb", 0)
    vf, ixs = f"x{s}.vf", (f"x{s}.ixs", 0)
    g.feature(vf, 4)
    g.rule_group(vf, [Rule(EXEC + ((ixs, int(f == "c")), (d, 1)), (((vf, i), 1),))
                      for f in "bc" for i, d in enumerate(instr_bits(s, f))])
    return [(vf, i) for i in range(4)], (f"x{s}.rdv", 0)


def operands(g: Graph, s: int) -> None:
    """Addresses, reads and in-block patches of slot s's register operands."""
    if SLOT_UNITS[s] == "memory":
        access_flags(g, s)
    for port in PORTS[SLOT_UNITS[s]]:
        field, enable = port_source(g, s, port)
        # row = (warp, register): the field's bits, then the EXEC token's warp
        addr = Address(tuple(field) + bits_of("wrp1", 2), enable)
        for lane in LANES:
            reg_bank(g, lane, f"regs.{lane}.{s}{port}")
            g.feature(f"x{s}.{port}{lane}", WORD, accumulate=True)
            g.read(f"regs.{lane}.{s}{port}", addr, f"x{s}.{port}{lane}")
        # port b gets the immediate (bi: b names r0, which no slot writes, so the patch and
        # the immediate never meet); in the patch's group, not before the read
        extra = immediate(s) if port == "b" else (lambda lane: [])
        if s:
            _patch(g, f"x{s}.{port}", s, lambda lane, port=port: f"x{s}.{port}{lane}", WORD,
                   lambda j, field=field, enable=enable: [
                       ((enable, 1),) + tuple((d, r >> i & 1) for i, d in enumerate(field))
                       + field_is(j, "d", r) for r in range(limits.NUM_REGS)],
                   "x{j}.wr{lane}", "x{j}.rpk{lane}", extra)
        elif port == "b":
            g.rule_group(f"x{s}.imm", [r for lane in LANES for r in extra(lane)])


VALUE_OPS = (Op.ST, Op.ATOMG, Op.ATOMS)  # accesses that read a value register (field b)


def access_flags(g: Graph, s: int) -> None:
    """x{s}.adr: the slot accesses memory (its adder forms the address a + imm);
    x{s}.rdb / x{s}.rdv: port b / port v read their register."""
    for f in ("adr", "rdb", "rdv", "idx", "ixs"):
        g.feature(f"x{s}.{f}", 1)
    indexed = (instr_bits(s, "mod")[2], 1)
    rules = [Rule(EXEC, (((f"x{s}.rdb", 0), 1),))]
    for op, space in ACCESSES:
        rules.append(Rule(EXEC + access_is(s, op, space),
                          (((f"x{s}.adr", 0), 1), ((f"x{s}.rdb", 0), -1))
                          + ((((f"x{s}.rdv", 0), 1),) if op in VALUE_OPS else ())))
    rules += [Rule(EXEC + op_is(s, op) + field_is(s, "mod", Atom.CAS), (((f"x{s}.rdb", 0), 1),))
              for op in ATOMIC_OPS]  # CAS: its swap value
    for op in (Op.LD, Op.ST):  # the indexed form reads its index through port b
        rules.append(Rule(EXEC + op_is(s, op) + (indexed,),
                          (((f"x{s}.rdb", 0), 1), ((f"x{s}.idx", 0), 1))
                          + ((((f"x{s}.ixs", 0), 1),) if op == Op.ST else ())))
    g.rule_group(f"x{s}.access", rules)


def immediate(s: int) -> Callable[[int], list[Rule]]:
    """Rules adding slot s's immediate to port b of a lane when ``bi`` or when the slot
    accesses memory (the immediate is the address offset)."""
    bi, imm = instr_bits(s, "bi")[0], instr_bits(s, "imm")
    whens = [((bi, 1),)] + ([((bi, 0), ((f"x{s}.adr", 0), 1))]
                            if SLOT_UNITS[s] == "memory" else [])
    return lambda lane: [Rule(EXEC + when + ((imm[i], 1),), (((f"x{s}.b{lane}", i), 1),))
                         for when in whens for i in range(WORD)]


def pred_bit(lane: int, p: int) -> int:
    """Where predicate p of a lane sits in a warp's predicate row."""
    return limits.NUM_PREDS * lane + p


def pred_row(g: Graph, s: int) -> str:
    """x{s}.pr = the warp's predicate row (bit ``pred_bit``) as slot s sees it: slot 0 reads it
    (one read for every lane and predicate), slot s > 0 takes slot s - 1's row with the
    predicates slot s - 1 wrote (s = 4: the row after the block, which the terminator's branch
    reads). So a slot's predicate results die with the next slot's row instead of waiting for
    the terminator's."""
    row = f"x{s}.pr"
    g.feature(row, limits.WARP_LANES * limits.NUM_PREDS)
    if not s:
        pred_bank(g, "preds.0")
        g.read("preds.0", Address(bits_of("wrp1", 2), kind_dim("exec")), row)
        return row
    prev, rules = f"x{s - 1}.pr", []
    for lane in LANES:
        for p in range(limits.NUM_PREDS):
            bit, wrote = pred_bit(lane, p), (f"x{s - 1}.pw{lane}", p)
            rules += [Rule(EXEC + ((wrote, 0), ((prev, bit), 1)), (((row, bit), 1),)),
                      Rule(((wrote, 1), ((f"x{s - 1}.pres{lane}", 0), 1)), (((row, bit), 1),))]
    g.rule_group(row, rules)
    return row


def guard(g: Graph, s: int) -> None:
    """x{s}.ex{lane}: the lane is active and its guard predicate (from the slot's predicate
    row) allows the instruction."""
    row = pred_row(g, s)
    for lane in LANES:
        ex = f"x{s}.ex{lane}"
        g.feature(ex, 1)
        active = EXEC + ((("msk1", lane), 1),)
        rules = [Rule(active + field_is(s, "guard", 0), (((ex, 0), 1),))]
        for p in range(limits.NUM_PREDS):
            holds = (row, pred_bit(lane, p))
            rules.append(Rule(active + field_is(s, "guard", 1 + p) + ((holds, 1),),
                              (((ex, 0), 1),)))
            rules.append(Rule(active + field_is(s, "guard", 1 + limits.NUM_PREDS + p)
                              + ((holds, 0),), (((ex, 0), 1),)))
        g.rule_group(ex, rules)


def pred_ports(g: Graph, s: int) -> None:
    """Predicate operands picked from the row: x{s}.px{lane} = SEL's predicate c or PLOP's a,
    x{s}.py{lane} = PLOP's b."""
    row, c, a, b = f"x{s}.pr", instr_bits(s, "c"), instr_bits(s, "a"), instr_bits(s, "b")
    for lane in LANES:
        rules = []
        g.feature(f"x{s}.px{lane}", 1)
        g.feature(f"x{s}.py{lane}", 1)
        for port, op, field in (("px", Op.SEL, c), ("px", Op.PLOP, a), ("py", Op.PLOP, b)):
            out = f"x{s}.{port}{lane}"
            rules += [Rule(EXEC + op_is(s, op) + ((field[0], p & 1), (field[1], p >> 1),
                                                   ((row, pred_bit(lane, p)), 1)),
                           (((out, 0), 1),)) for p in range(limits.NUM_PREDS)]
        g.rule_group(f"x{s}.pxy{lane}", rules)


def select_units(g: Graph, s: int) -> None:
    """SEL: d = P ? a : B with P = predicate c, negated by mod bit 0. PLOP: predicate d =
    ([!]pred a) AND / OR / XOR ([!]pred b), mod = op | neg_a << 2 | neg_b << 3."""
    mod = instr_bits(s, "mod")
    for lane in LANES:
        a, b, res = operand_a(s, lane), operand_b(s, lane), f"x{s}.res{lane}"
        run = ((f"x{s}.ex{lane}", 0), 1)
        x, y = (f"x{s}.px{lane}", 0), (f"x{s}.py{lane}", 0)
        rules = [Rule((run,) + op_is(s, Op.SEL) + ((x, p), (mod[0], neg), ((src, i), 1)),
                      (((res, i), 1),))
                 for p in (0, 1) for neg in (0, 1) for i in range(WORD)
                 for src in ((a,) if p != neg else (b,))]
        g.rule_group(f"{res}.sel", rules)
        plop = []
        for op, fn in ((0, operator.and_), (1, operator.or_), (2, operator.xor)):
            for na, nb, pa, pb in itertools.product((0, 1), repeat=4):
                if fn(pa ^ na, pb ^ nb):
                    plop.append(Rule((run,) + op_is(s, Op.PLOP)
                                     + ((mod[0], op & 1), (mod[1], op >> 1), (mod[2], na),
                                        (mod[3], nb), (x, pa), (y, pb)),
                                     (((f"x{s}.pres{lane}", 0), 1),)))
        g.rule_group(f"x{s}.plop{lane}", plop)


def writes(g: Graph, s: int) -> None:
    """x{s}.wr{lane}: the lane writes register d != r0; x{s}.pw{lane}: which predicate it
    writes."""
    for lane in LANES:
        wr, ex = f"x{s}.wr{lane}", (((f"x{s}.ex{lane}", 0), 1),)
        g.feature(wr, 1)
        g.rule_group(wr, [Rule(ex + op_is(s, op), (((wr, 0), 1),)) for op in REG_WRITING_OPS]
                     + [Rule(ex + op_is(s, op) + field_is(s, "d", 0), (((wr, 0), -1),))
                        for op in REG_WRITING_OPS])
        pw = f"x{s}.pw{lane}"  # which predicate the lane wrote (one-hot, none)
        g.feature(pw, limits.NUM_PREDS, "onehot")
        g.rule_group(pw, [Rule(ex + op_is(s, op) + field_is(s, "d", p), (((pw, p), 1),))
                          for op in PRED_DEST_OPS - FLOAT_OPS for p in range(limits.NUM_PREDS)])


# relations of a - b from (Z = equal, C = no borrow, a31, b31)
_LT = {(z, c, a, b): bool((a and not b) or (a == b and not c and not z))
       for z in (0, 1) for c in (0, 1) for a in (0, 1) for b in (0, 1)}
_RELATIONS: dict[Cmp, Callable[[int, int, int, int], bool]] = {
    Cmp.EQ: lambda z, c, a, b: bool(z),
    Cmp.NE: lambda z, c, a, b: not z,
    Cmp.LT: lambda z, c, a, b: _LT[(z, c, a, b)],
    Cmp.LE: lambda z, c, a, b: _LT[(z, c, a, b)] or bool(z),
    Cmp.GT: lambda z, c, a, b: not (_LT[(z, c, a, b)] or z),
    Cmp.GE: lambda z, c, a, b: not _LT[(z, c, a, b)],
    Cmp.LO: lambda z, c, a, b: not c,
    Cmp.LS: lambda z, c, a, b: not c or bool(z),
    Cmp.HI: lambda z, c, a, b: bool(c) and not z,
    Cmp.HS: lambda z, c, a, b: bool(c),
}
_TAKE_A = {Op.MIN: Cmp.LE, Op.MAX: Cmp.GE, Op.MINU: Cmp.LS, Op.MAXU: Cmp.HS}


def indexed_operand(g: Graph, s: int, lane: int) -> str:
    """A memory slot adds a and its operand b as its units read it (``operand_b``): port b
    (nothing for a CAS, whose port b holds the swap value), or for an indexed access (a + 4*b)
    port b (the index) shifted left by two, its two top bits kept in ``x{s}.ix{lane}`` for the
    overflow check."""
    b, q, top, idx = f"x{s}.b{lane}", operand_b(s, lane), f"x{s}.ix{lane}", (f"x{s}.idx", 0)
    g.feature(q, WORD)
    g.feature(top, 2)
    g.rule_group(q, [Rule(((idx, 0), ((f"x{s}.cas", 0), 0), ((b, i), 1)), (((q, i), 1),))
                     for i in range(WORD)]
                 + [Rule(((idx, 1), ((b, i), 1)), (((q, i + 2), 1),)) for i in range(WORD - 2)]
                 + [Rule(((idx, 1), ((b, WORD - 2 + i), 1)), (((top, i), 1),)) for i in range(2)])
    return q


def adder_operands(g: Graph, s: int, lane: int) -> tuple[str, str, gd.CarryIn]:
    """The adder's inputs and carry-in: a and B (in a memory slot B shifted for an indexed
    address) and the subtract flag, except in a multiplier slot, where a multiply hands its two
    partial numbers (``gd.mul_columns``) to the adder instead, and MULHI / MULHIU (in
    isa.HIGH_MULTIPLY_SLOTS) the high halves' numbers with the low halves' carry terms."""
    a, b, sub = f"x{s}.a{lane}", f"x{s}.b{lane}", ((f"x{s}.inv", 0), 1)
    if SLOT_UNITS[s] == "memory":
        return a, indexed_operand(g, s, lane), sub
    mul, hi, signed = f"x{s}.mul", f"x{s}.hi", f"x{s}.sg"
    p, q = operand_a(s, lane), operand_b(s, lane)  # a and b, unless the slot multiplies
    high = Op.MULHI in multiplying_ops(s)
    if lane == 0:
        any_op(g, mul, s, multiplying_ops(s))
        if high:
            any_op(g, hi, s, (Op.MULHI, Op.MULHIU))
            any_op(g, signed, s, (Op.MULHI,))
    for f in (p, q):
        g.feature(f, WORD, accumulate=True)
    run = ((f"x{s}.ex{lane}", 0), 1)
    carry = gd.mul_columns(g, f"x{s}.mul{lane}", a, b, p, q, addend=f"x{s}.c{lane}",
                           when=(run, ((mul, 0), 1)),
                           high=gd.HighHalf(hi, signed) if high else None)
    # when the slot does not multiply, a and b wait for the multiplier as base-16 digits
    pd, qd = f"{p}.d", f"{q}.d"
    for d in (pd, qd):
        g.feature(d, WORD // 4)
    g.rule_group(f"{p}.pass", [r for src, d in ((a, pd), (b, qd))
                               for r in gd.pack_rules(g, src, d, when=(((mul, 0), 0),))])
    g.rule_group(f"{p}.unpass", gd.unpack_rules(g, pd, p) + gd.unpack_rules(g, qd, q))
    return p, q, [(sub,), *carry]


def alu(g: Graph, s: int) -> None:
    """The units of slot s (see the module docstring)."""
    inv = f"x{s}.inv"
    any_op(g, inv, s, SUBTRACTING_OPS)
    sums = (Op.ADD, Op.SUB) + multiplying_ops(s)
    any_op(g, f"x{s}.isadd", s, sums)
    sub = ((inv, 0), 1)
    for lane in LANES:
        x, y, carry_in = adder_operands(g, s, lane)
        a, b, res, ex = operand_a(s, lane), operand_b(s, lane), f"x{s}.res{lane}", f"x{s}.ex{lane}"
        g.feature(res, WORD, accumulate=True)
        g.feature(f"x{s}.pres{lane}", 1, accumulate=True)
        total, flags = f"x{s}.sum{lane}", f"x{s}.fl{lane}"  # flags: C (no borrow), Z (a == b)
        g.feature(total, WORD)
        g.feature(flags, 2)
        gd.add_bits(g, f"x{s}.add{lane}", x, y, total, invert_b=sub, carry_in=carry_in,
                    carry_out=(flags, 0), all_propagate=(flags, 1))
        run = ((ex, 0), 1)
        g.rule_group(f"{res}.sum", [Rule((run, ((f"x{s}.isadd", 0), 1), ((total, i), 1)),
                                         (((res, i), 1),)) for i in range(WORD)])
        for op, fn in ((Op.AND, operator.and_), (Op.OR, operator.or_), (Op.XOR, operator.xor)):
            gd.bitwise(g, f"{res}.{op.name.lower()}", a, b, res, fn,
                       when=(run,) + op_is(s, op))
        g.rule_group(f"{res}.not", [Rule((run,) + op_is(s, Op.NOT) + (((a, i), 0),),
                                         (((res, i), 1),)) for i in range(WORD)])
        _compares(g, s, lane)


def _compares(g: Graph, s: int, lane: int) -> None:
    """SETP from the subtraction's flags and the operands' sign bits (copied where a and b are
    read, ``x{s}.sgn{l}``); MIN/MAX pick a or b by the compare, from the two as base-16 digits
    (``x{s}.ad{l}``, ``x{s}.bd{l}``, written while a and b are live), so that a and b
    need not wait for the adder's flags."""
    a, b, flags = operand_a(s, lane), operand_b(s, lane), f"x{s}.fl{lane}"
    run = ((f"x{s}.ex{lane}", 0), 1)
    signs = f"x{s}.sgn{lane}"
    g.feature(signs, 2)
    g.rule_group(signs, [Rule((((src, WORD - 1), 1),), (((signs, k), 1),))
                         for k, src in enumerate((a, b))])

    def state(z: int, c: int, sa: int, sb: int) -> tuple:
        return (((flags, 1), z), ((flags, 0), c), ((signs, 0), sa), ((signs, 1), sb))

    combos = [k for k in _LT if not (k[0] and not k[1]) and not (k[0] and k[2] != k[3])]
    setp = []
    for cmp, rel in _RELATIONS.items():
        for k in combos:
            if rel(*k):
                setp.append(Rule((run,) + op_is(s, Op.SETP) + field_is(s, "mod", int(cmp))
                                 + state(*k), (((f"x{s}.pres{lane}", 0), 1),)))
    g.rule_group(f"x{s}.setp{lane}", setp)
    take = f"x{s}.take{lane}"  # MIN/MAX: the result is a (else b)
    g.feature(take, 1)
    g.rule_group(take, [Rule((run,) + op_is(s, op) + state(*k), (((take, 0), 1),))
                        for op, cmp in _TAKE_A.items() for k in combos if _RELATIONS[cmp](*k)])
    mm = f"x{s}.mm"  # the slot runs MIN/MAX
    if lane == 0:
        any_op(g, mm, s, tuple(_TAKE_A))
    ad, bd = f"x{s}.ad{lane}", f"x{s}.bd{lane}"
    for d in (ad, bd):
        g.feature(d, WORD // 4)
    g.rule_group(f"x{s}.mmd{lane}", [r for src, d in ((a, ad), (b, bd))
                                     for r in gd.pack_rules(g, src, d, when=(run, ((mm, 0), 1)))])
    res = f"x{s}.res{lane}"
    # ad and bd are 0 unless the lane runs MIN/MAX, so "take = 0" alone gates b's digits
    g.rule_group(f"{res}.minmax", gd.unpack_rules(g, ad, res, when=(((take, 0), 1),))
                 + gd.unpack_rules(g, bd, res, when=(((take, 0), 0),)))


def _extent(feature: str, axis: int, value: int) -> tuple:
    """Literals: the shape feature's extent on `axis` (0 = x, 1 = y) is `value` (1..16)."""
    return tuple(((feature, axis * SHAPE_BITS + i), (value - 1) >> i & 1)
                 for i in range(SHAPE_BITS))


def special(g: Graph, s: int) -> None:
    """S2R. Values the whole warp shares (ntid, ctaid, nctaid: at most 16, five bits) are looked
    up once per slot, tid.x / tid.y per lane from (warp, lane, ntid.x)."""
    uniform = f"x{s}.su"
    g.feature(uniform, SHAPE_BITS)
    s2r = EXEC + op_is(s, Op.S2R)
    sizes = range(1, 17)

    def put(value: int) -> tuple:
        return tuple(((uniform, i), 1) for i in range(SHAPE_BITS) if value >> i & 1)

    rules = []
    for reg, feature, axis in ((SReg.NTID_X, "cfg.b", 0), (SReg.NTID_Y, "cfg.b", 1),
                               (SReg.NCTAID_X, "cfg.g", 0), (SReg.NCTAID_Y, "cfg.g", 1)):
        rules += [Rule(s2r + field_is(s, "mod", reg) + _extent(feature, axis, n), put(n))
                  for n in sizes]
    for gx in sizes:
        for c in range(limits.MAX_GRID_BLOCKS):
            for reg, v in ((SReg.CTAID_X, c % gx), (SReg.CTAID_Y, c // gx)):
                if v:
                    rules.append(Rule(s2r + field_is(s, "mod", reg) + _extent("cfg.g", 0, gx)
                                      + cta_is(c), put(v)))
    g.rule_group(uniform, [r for r in rules if r.deltas])
    for lane in LANES:
        res, run = f"x{s}.res{lane}", ((f"x{s}.ex{lane}", 0), 1)
        rules = [Rule((run, ((uniform, i), 1)), (((res, i), 1),)) for i in range(SHAPE_BITS)]
        for w in range(limits.MAX_WARPS):
            t = limits.WARP_LANES * w + lane
            for bx in sizes:
                for reg, v in ((SReg.TID_X, t % bx), (SReg.TID_Y, t // bx)):
                    if v:
                        rules.append(Rule((run,) + op_is(s, Op.S2R) + field_is(s, "mod", reg)
                                          + rails("wrp", 2, w) + _extent("cfg.b", 0, bx),
                                          tuple(((res, i), 1) for i in range(SHAPE_BITS)
                                                if v >> i & 1)))
        g.rule_group(f"{res}.s2r", rules)


def bit_units(g: Graph, s: int) -> None:
    """NEG, ABS, POPC, CLZ and BREV per lane, from a's bits alone (one or two layers each).

    Negation: -a keeps a's bits up to its lowest set bit and flips the ones above, so result bit
    i is a_i XOR "a has a set bit below i", written as one rule per possible lowest set bit j < i
    (they exclude each other); ABS negates when a's sign bit is set (``x{s}.ng``) and copies a
    otherwise. CLZ: one rule per highest set bit (and one for a == 0). BREV: wires."""
    for lane in LANES:
        a, res = operand_a(s, lane), f"x{s}.res{lane}"
        run = ((f"x{s}.ex{lane}", 0), 1)
        ng = f"x{s}.ng{lane}"
        g.feature(ng, 1)
        g.rule_group(ng, [Rule((run,) + op_is(s, Op.NEG), (((ng, 0), 1),)),
                          Rule((run,) + op_is(s, Op.ABS) + (((a, WORD - 1), 1),),
                               (((ng, 0), 1),))])

        def below_zero(i: int, a: str = a) -> tuple:
            return tuple(((a, k), 0) for k in range(i))

        rules = [Rule((run,) + op_is(s, Op.ABS) + (((a, WORD - 1), 0), ((a, i), 1)),
                      (((res, i), 1),)) for i in range(WORD)]
        for i in range(WORD):
            on = (((ng, 0), 1),)
            rules.append(Rule(on + below_zero(i) + (((a, i), 1),), (((res, i), 1),)))
            rules += [Rule(on + below_zero(j) + (((a, j), 1), ((a, i), 0)), (((res, i), 1),))
                      for j in range(i)]
        g.rule_group(f"{res}.neg", rules)
        gd.popcount(g, f"{res}.popc", a, res, when=(run,) + op_is(s, Op.POPC))

        def digits(v: int, res: str = res) -> tuple:
            return tuple(((res, d), 1) for d in range(6) if v >> d & 1)

        clz = [Rule((run,) + op_is(s, Op.CLZ) + tuple(((a, k), 0) for k in range(j + 1, WORD))
                    + (((a, j), 1),), digits(WORD - 1 - j)) for j in range(WORD - 1)]
        clz.append(Rule((run,) + op_is(s, Op.CLZ) + tuple(((a, k), 0) for k in range(WORD)),
                        digits(WORD)))
        brev = [Rule((run,) + op_is(s, Op.BREV) + (((a, WORD - 1 - i), 1),), (((res, i), 1),))
                for i in range(WORD)]
        g.rule_group(f"{res}.clz", clz + brev)


SHIFTS = (Op.SHL, Op.SHR, Op.SRA)


def shifts(g: Graph, s: int) -> None:
    """SHL / SHR / SRA by b (unsigned; 32 or more gives 0, or the sign for SRA): the amount's
    low three bits and bits 3-4 as one-hots (none set when b >= 32), then shift by the low part
    into ``x{s}.sht{lane}`` and by the high part into the result; one intermediate per lane
    serves all three ops, as only one runs."""
    for lane in LANES:
        a, b, res = operand_a(s, lane), operand_b(s, lane), f"x{s}.res{lane}"
        run = ((f"x{s}.ex{lane}", 0), 1)
        small = tuple(((b, i), 0) for i in range(5, WORD))
        lo, hi, big, t = (f"x{s}.sh{x}{lane}" for x in ("lo", "hi", "big", "t"))
        g.feature(lo, 8, "onehot")
        g.feature(hi, 4, "onehot")
        g.feature(big, 1)
        g.feature(t, WORD)
        amount = [Rule(small + tuple(((b, i), v >> i & 1) for i in range(3)), (((lo, v), 1),))
                  for v in range(8)]
        amount += [Rule(small + tuple(((b, 3 + i), v >> i & 1) for i in range(2)),
                        (((hi, v), 1),)) for v in range(4)]
        amount += [Rule((), (((big, 0), 1),)), Rule(small, (((big, 0), -1),))]
        g.rule_group(f"x{s}.amount{lane}", amount)

        def stage(src: str, dst: str, onehot: str, unit: int, count: int,
                  run: tuple = run) -> list[Rule]:
            rules = []
            for op in SHIFTS:
                for v in range(count):
                    k = v * unit
                    for j in range(WORD):  # destination bit j
                        i = j - k if op == Op.SHL else j + k
                        lits = (run,) + op_is(s, op) + (((onehot, v), 1),)
                        if 0 <= i < WORD:
                            rules.append(Rule(lits + (((src, i), 1),), (((dst, j), 1),)))
                        elif op == Op.SRA and i >= WORD:
                            rules.append(Rule(lits + (((src, WORD - 1), 1),), (((dst, j), 1),)))
            return rules

        g.rule_group(t, stage(a, t, lo, 1, 8))
        g.rule_group(f"{res}.shift", stage(t, res, hi, 8, 4) + [
            Rule((run,) + op_is(s, Op.SRA) + (((big, 0), 1), ((a, WORD - 1), 1)),
                 tuple(((res, j), 1) for j in range(WORD)))])


def branch(g: Graph) -> None:
    """t.taken: the active lanes for which the terminator's predicate, read after the block,
    differs from its `negated` bit (a BRA's taken lanes; the others go to `other`)."""
    term, row = limits.BLOCK_SLOTS, pred_row(g, limits.BLOCK_SLOTS)
    kind, pred, neg = (instr_bits(term, f) for f in ("kind", "pred", "negated"))
    bra = EXEC + tuple((d, int(TermKind.BRA) >> i & 1) for i, d in enumerate(kind))
    g.feature("t.taken", limits.WARP_LANES)
    g.rule_group("t.taken", [
        Rule(bra + ((("msk1", lane), 1), (pred[0], p & 1), (pred[1], p >> 1), (neg[0], n),
                    ((row, pred_bit(lane, p)), 1 - n)), ((("t.taken", lane), 1),))
        for lane in LANES for p in range(limits.NUM_PREDS) for n in (0, 1)])


def packed_results(g: Graph, s: int) -> None:
    """x{s}.rpk{l}: slot s's result, which lives only as base-16 digits: every unit writes
    ``x{s}.res{l}`` through to them (a mirror: no neuron, no layer), so a result holds 8 dims
    from its first unit to the outbox, not 32. Later slots' patches read the digits; the
    outbox's lane tests compare them digit by digit, and it unpacks them (``emit.results``)."""
    for lane in LANES:
        g.feature(f"x{s}.rpk{lane}", WORD // 4, accumulate=True)
        g.mirror(f"x{s}.res{lane}", f"x{s}.rpk{lane}", hex_digit, through=True)


def build_slots(g: Graph) -> None:
    memory.record_fields(g)
    for s in range(limits.BLOCK_SLOTS):
        if SLOT_UNITS[s] == "memory":
            atomic.atomic_flags(g, s)
        guard(g, s)
        writes(g, s)
        operands(g, s)
        alu(g, s)
        special(g, s)
        shifts(g, s)
        bit_units(g, s)
        pred_ports(g, s)
        select_units(g, s)
        memory.param_load(g, s)
        if SLOT_UNITS[s] == "memory":
            memory.memory_unit(g, s)
            memory.shuffle_unit(g, s)
            memory.fault_checks(g, s)
            memory.store_records(g, s)
        packed_results(g, s)
    atomic.atomic_unit(g)
    memory.first_fault(g)
    branch(g)
