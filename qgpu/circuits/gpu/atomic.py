"""Atomics inside the EXEC pass: the lanes of a warp update memory one after another.

A block holds at most one store or atomic (docs/ISA.md §2), so one atomic unit serves both memory
slots. Lane l's old value is the word as the lanes before it left it: the new value of the
latest earlier lane that hit the same word (``x{s}.cl{k}{l}``, which store records compute), or
else the word the lane read from memory (``x{s}.m{l}``; for lanes 1-3 held as digits until their
step, ``_memory_word``). Its new value is the operation applied to old and the lane's value
register (port v; CAS's swap value comes through port b):

    a.o{l}  old = a.n{k} of the latest same-word lane k < l, else memory       (1 layer)
    a.s{l}  old + y  (y: the value for ADD, 1 for INC, -1 for DEC; CAS's swap value)  (2 layers)
    a.f{l}  old <u v, old == v;  a.z{l}: old == 0                             (2 layers)
    a.n{l}  new = ADD: the sum; MIN/MAX(U): old or v by the compare; EXCH: v; CAS: old == v ?
            y : old; AND/OR/XOR: bitwise; INC: old >=u v ? 0 : old + 1; DEC: (old == 0 or
            old >u v) ? v : old - 1                                              (1 layer)

so lane l's new value exists 4(l + 1) layers after the memory read. Nothing in the block reads
it (the lowering keeps an atomic's result out of its own block, docs/ISA.md §2): the old values
go to the outbox as the register write-back (never one ``all`` frame), the new values as the
memory records.
"""

from __future__ import annotations

import operator

from qgpu.circuits.gpu.banks import EXEC, LANES, field_is, hex_digit, op_is
from qgpu.compiler import gadgets as gd
from qgpu.compiler.graph import Graph, Rule
from qgpu.machine import limits
from qgpu.machine.isa import ATOMIC_OPS, SLOT_UNITS, Atom

WORD = 32
MEMORY_SLOTS = [s for s in range(limits.BLOCK_SLOTS) if SLOT_UNITS[s] == "memory"]


def atomic_flags(g: Graph, s: int) -> None:
    """x{s}.atm: slot s holds an atomic; x{s}.cas: a CAS (its port b reads the swap value)."""
    for f in ("atm", "cas"):
        g.feature(f"x{s}.{f}", 1)
    g.rule_group(f"x{s}.atomic", [
        Rule(EXEC + op_is(s, op), (((f"x{s}.atm", 0), 1),)) for op in ATOMIC_OPS] + [
        Rule(EXEC + op_is(s, op) + field_is(s, "mod", Atom.CAS), (((f"x{s}.cas", 0), 1),))
        for op in ATOMIC_OPS])


def _kind(k: Atom) -> tuple:
    return ((("a.k", int(k)), 1),)


def _take_old(k: Atom, o31: int, v31: int, lt: int) -> bool:
    """MIN/MAX(U): whether the new value is old (else v), from the sign bits and old <u v (on
    equal values both choices agree)."""
    signed_lt = (o31, v31) == (1, 0) or (o31 == v31 and bool(lt))
    return {Atom.MIN: signed_lt, Atom.MAX: not signed_lt, Atom.MINU: bool(lt),
            Atom.MAXU: not lt}[k]


def atomic_unit(g: Graph) -> None:
    """The unit's features a.* (module docstring), from whichever memory slot holds the
    atomic."""
    g.feature("a.k", len(Atom), "onehot")
    g.rule_group("a.k", [Rule(EXEC + op_is(s, op) + field_is(s, "mod", int(k)), _kind(k))
                         for s in MEMORY_SLOTS for op in ATOMIC_OPS for k in Atom])
    for lane in LANES:
        _operands(g, lane)
    for lane in LANES:
        _old(g, lane)
        _update(g, lane)


def _operands(g: Graph, lane: int) -> None:
    """a.r{l}: the lane runs the atomic; a.v{l}: its value; a.y{l}: what the adder adds to old,
    or CAS's swap value (a CAS adds nothing, so the two share one feature). Each memory slot
    writes them where it reads its ports, so no port waits for the chain: they wait as base-16
    digits (a.vd{l}, a.yd{l}: the slots' rules write through to them) and are unpacked for the
    lane's step."""
    run = f"a.r{lane}"
    g.feature(run, 1, accumulate=True)
    v, y = (_waiting(g, x, lane) for x in "vy")
    for s in MEMORY_SLOTS:
        here = (((f"x{s}.ex{lane}", 0), 1), ((f"x{s}.atm", 0), 1))
        rules = [Rule(here, (((run, 0), 1),))]
        for i in range(WORD):
            rules.append(Rule(here + (((f"x{s}.v{lane}", i), 1),), (((v, i), 1),)))
            rules.append(Rule(here + (((f"x{s}.cas", 0), 1), ((f"x{s}.b{lane}", i), 1)),
                              (((y, i), 1),)))
            rules.append(Rule(here + field_is(s, "mod", Atom.ADD)
                              + (((f"x{s}.v{lane}", i), 1),), (((y, i), 1),)))
        rules.append(Rule(here + field_is(s, "mod", Atom.INC), (((y, 0), 1),)))
        rules.append(Rule(here + field_is(s, "mod", Atom.DEC),
                          tuple(((y, i), 1) for i in range(WORD))))
        g.rule_group(f"a.in{s}{lane}", rules)
    for x in "vy":
        _unpacked(g, x, lane)


def _waiting(g: Graph, x: str, lane: int) -> str:
    """a.{x}w{l}: a word the memory slots write that waits for the lane's step: its rules
    write it through to base-16 digits a.{x}d{l} (it never exists as bits)."""
    word, digits = f"a.{x}w{lane}", f"a.{x}d{lane}"
    g.feature(word, WORD)
    g.feature(digits, WORD // 4, accumulate=True)
    g.mirror(word, digits, hex_digit, through=True)
    return word


def _unpacked(g: Graph, x: str, lane: int) -> str:
    """a.{x}{l}: the bits of ``_waiting``'s digits again, for the lane's step."""
    bits = f"a.{x}{lane}"
    g.feature(bits, WORD)
    gd.unpack(g, bits, f"a.{x}d{lane}", bits)
    return bits


def _memory_word(g: Graph, lane: int) -> str:
    """The word lane l read, for its old value: lane 0's step starts at the memory read, so it
    reads the slot's read (``x{s}.m0``); a later lane's word waits for the lanes before it, as
    base-16 digits (``a.md{l}``) that the memory slot holding the atomic writes where it
    reads (one feature for both slots), unpacked to ``a.m{l}`` for the lane's step."""
    if not lane:
        return ""
    word = _waiting(g, "m", lane)
    for s in MEMORY_SLOTS:
        here = (((f"x{s}.ex{lane}", 0), 1), ((f"x{s}.atm", 0), 1))
        g.rule_group(f"a.mw{s}{lane}", [Rule(here + (((f"x{s}.m{lane}", i), 1),),
                                             (((word, i), 1),)) for i in range(WORD)])
    return _unpacked(g, "m", lane)


def _old(g: Graph, lane: int) -> None:
    """a.o{l}: the new value of the latest earlier lane on the same word, else the lane's
    memory read."""
    old = f"a.o{lane}"
    g.feature(old, WORD)
    rules = []
    word = _memory_word(g, lane)
    for s in MEMORY_SLOTS:
        def same(k: int, v: int, s: int = s) -> tuple:
            return (((f"x{s}.cl{k}{lane}", 0), v),)

        alone = (((f"x{s}.ex{lane}", 0), 1), ((f"x{s}.atm", 0), 1))
        alone += tuple(lit for k in range(lane) for lit in same(k, 0))
        rules += [Rule(alone + (((word or f"x{s}.m{lane}", i), 1),), (((old, i), 1),))
                  for i in range(WORD)]
        for k in range(lane):
            latest = same(k, 1) + tuple(lit for j in range(k + 1, lane) for lit in same(j, 0))
            rules += [Rule(latest + (((f"a.n{k}", i), 1),), (((old, i), 1),))
                      for i in range(WORD)]
    g.rule_group(old, rules)


def _update(g: Graph, lane: int) -> None:
    """a.s, a.f, a.z and the new value a.n of one lane."""
    old, v, y = (f"a.{x}{lane}" for x in "ovy")
    total, flags, zero, new = (f"a.{x}{lane}" for x in "sfzn")
    run = ((f"a.r{lane}", 0), 1)
    g.feature(total, WORD)
    gd.add_bits(g, f"{total}.add", old, y, total)
    g.feature(flags, 2)  # old <u v, old == v
    gd.compare(g, f"{flags}.cmp", old, v, lt=(flags, 0), eq=(flags, 1))
    g.feature(zero, 1)
    g.rule_group(zero, [Rule((run,) + tuple(((old, i), 0) for i in range(WORD)),
                             (((zero, 0), 1),))])
    lt, eq = (flags, 0), (flags, 1)
    g.feature(new, WORD)

    def put(cond: tuple, src: str) -> list[Rule]:
        return [Rule((run,) + cond + (((src, i), 1),), (((new, i), 1),)) for i in range(WORD)]

    rules = put(_kind(Atom.ADD), total) + put(_kind(Atom.EXCH), v)
    for k in (Atom.MIN, Atom.MAX, Atom.MINU, Atom.MAXU):
        for o31 in (0, 1):
            for v31 in (0, 1):
                for less in (0, 1):
                    cond = _kind(k) + (((old, WORD - 1), o31), ((v, WORD - 1), v31), (lt, less))
                    rules += put(cond, old if _take_old(k, o31, v31, less) else v)
    rules += put(_kind(Atom.CAS) + ((eq, 1),), y) + put(_kind(Atom.CAS) + ((eq, 0),), old)
    for k, fn in ((Atom.AND, operator.and_), (Atom.OR, operator.or_),
                  (Atom.XOR, operator.xor)):
        rules += [Rule((run,) + _kind(k) + (((old, i), x), ((v, i), w)), (((new, i), 1),))
                  for i in range(WORD) for x in (0, 1) for w in (0, 1) if fn(x, w)]
    rules += put(_kind(Atom.INC) + ((lt, 1),), total)
    rules += put(_kind(Atom.DEC) + (((zero, 0), 1),), v)
    rules += put(_kind(Atom.DEC) + (((zero, 0), 0), (lt, 0), (eq, 0)), v)
    rules += put(_kind(Atom.DEC) + (((zero, 0), 0), (lt, 1)), total)
    rules += put(_kind(Atom.DEC) + (((zero, 0), 0), (eq, 1)), total)
    g.rule_group(new, rules)
