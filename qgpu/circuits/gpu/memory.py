"""Loads and shuffles inside the EXEC pass: parameter words in every slot, and the memory unit
of the memory slots (isa.SLOT_UNITS), which reads global, shared and local memory for 4 lanes.

Every slot keeps its own copy of the parameter words (written by the prompt's PARAM frames) and
reads the word its immediate names; the value is the same for all lanes. A memory slot's adder
forms each lane's byte address a + imm (``execute.access_flags``: port b reads r0 for an access);
its bits 2.. address the lane's copies of global memory (row = word; the read brings the word and
its allocated flag), shared memory (row = word) and local memory (row = (warp, word)), each copy
kept current by the MEM frames that every block's stores leave behind. Only the copy of the
access's space is enabled, so the three reads share one output feature ``x{s}.m{lane}``.
The shuffle unit (SHFL) lives in the memory slots too: it moves operand a between the lanes of
the slot.
"""

from __future__ import annotations

from qgpu import protocol as T
from qgpu.circuits.gpu.banks import (
    ACCESSES,
    EXEC,
    LANES,
    SHARED_SIZE_BITS,
    access_is,
    bits_of,
    global_bank,
    hex_digit,
    instr_bits,
    local_bank,
    op_is,
    operand_b,
    param_bank,
    shared_bank,
)
from qgpu.compiler import gadgets as gd
from qgpu.compiler.graph import Address, Graph, Rule
from qgpu.machine import limits
from qgpu.machine.interp import shuffle_lane
from qgpu.machine.isa import MEMORY_WRITING_OPS, SLOT_UNITS, Op, Shfl, Space

WORD = 32
MEM_WORD = WORD + 1  # a global row: the value, then its allocated flag


def param_load(g: Graph, s: int) -> None:
    """LD.PARAM in slot s: x{s}.prm = parameter word imm / 4, added to every running lane's
    result."""
    flag, prm = f"x{s}.ldp", f"x{s}.prm"
    g.feature(flag, 1)
    g.rule_group(flag, [Rule(EXEC + access_is(s, Op.LD, Space.PARAM), (((flag, 0), 1),))])
    param_bank(g, f"param.{s}")
    g.feature(prm, WORD)
    g.read(f"param.{s}", Address(tuple(instr_bits(s, "imm")[2:6]), (flag, 0)), prm)
    for lane in LANES:
        run = ((f"x{s}.ex{lane}", 0), 1)
        g.rule_group(f"x{s}.res{lane}.param", [
            Rule((run, ((prm, i), 1)), (((f"x{s}.res{lane}", i), 1),)) for i in range(WORD)])


SPACES = (Space.GLOBAL, Space.SHARED, Space.LOCAL)


def record_fields(g: Graph) -> None:
    """The space and word of lane l's store or atomic, for its memory record (emit.records). A
    block holds at most one, so the memory slot that holds it writes them where it forms its
    own space and word (``x{s}.sp{l}``, ``x{s}.w7{l}``), which then die with the slot's checks:
    written through to base-16 digits (``rec.spd{l}``, ``rec.wd{l}``: 3 dims, not 10 bits),
    they wait for the outbox, which reads their bits again (``o.sp{l}``, ``o.w{l}``)."""
    for lane in LANES:
        for x, size in (("sp", len(SPACES)), ("w", SHARED_SIZE_BITS)):
            written, digits, bits = f"rec.{x}{lane}", f"rec.{x}d{lane}", f"o.{x}{lane}"
            g.feature(written, size)
            g.feature(digits, -(-size // 4), accumulate=True)
            g.mirror(written, digits, hex_digit, through=True)
            g.feature(bits, size)
            gd.unpack(g, bits, digits, bits)


def memory_unit(g: Graph, s: int) -> None:
    """Loads of a memory slot: per lane, the space of the access (x{s}.sp{lane}, one-hot; a
    store's or atomic's also for its record, ``record_fields``), the read of that space's copy
    at the address the adder formed, and LD's result."""
    for lane in LANES:
        run = ((f"x{s}.ex{lane}", 0), 1)
        sp, m, total = f"x{s}.sp{lane}", f"x{s}.m{lane}", f"x{s}.sum{lane}"
        g.feature(sp, len(SPACES), "onehot")
        rules = []
        for op, space in ACCESSES:
            k = SPACES.index(Space.GLOBAL if op == Op.ATOMG else Space.SHARED
                             if op == Op.ATOMS else space)
            into = (sp,) if op == Op.LD else (sp, f"rec.sp{lane}")
            rules.append(Rule((run,) + access_is(s, op, space), tuple(((f, k), 1) for f in into)))
        g.rule_group(sp, rules)
        g.feature(m, MEM_WORD, accumulate=True)
        global_bank(g, f"gmem.{s}.{lane}")
        g.read(f"gmem.{s}.{lane}", Address(bits_of(total, 7, 2), (sp, 0)), m)
        shared_bank(g, f"smem.{s}.{lane}")
        g.read(f"smem.{s}.{lane}", Address(bits_of(total, 6, 2), (sp, 1)), m)
        local_bank(g, lane, f"lmem.{s}.{lane}")
        g.read(f"lmem.{s}.{lane}", Address(bits_of(total, 4, 2) + bits_of("wrp1", 2), (sp, 2)),
               m)
        g.rule_group(f"x{s}.res{lane}.load", [
            Rule((run,) + access_is(s, Op.LD, None) + (((m, i), 1),),
                 (((f"x{s}.res{lane}", i), 1),)) for i in range(WORD)])


def shuffle_sources(lane: int) -> list[tuple[tuple[tuple[str, int], ...], int | None]]:
    """Where lane `lane` of a warp takes a SHFL's value from, as (conditions, source): the
    conditions name the mode, bits of bval = B & 31 (``b0``..``b4``), of the shape (``c0``..
    ``c3``) and of the warp (``w0``, ``w1``) that decide it; the source is a lane 0..3 of the
    warp, or None when it lies outside the warp (a fault). Cases not listed take the lane's own
    value. Built from ``interp.shuffle_lane``: with bval < 4 the warp does not matter, above it
    UP/DOWN give the own value, IDX ignores bval's high bits, and BFLY leaves the warp or the
    segment whatever the shape (tests/circuits/test_gpu_execute.py checks every case)."""
    out: list[tuple[tuple[tuple[str, int], ...], int | None]] = []

    def source(mode: Shfl, bval: int, shape: int, warp: int) -> int | None:
        j = shuffle_lane(mode, bval, shape, limits.WARP_LANES * warp + lane)
        src = j - limits.WARP_LANES * warp
        return src if 0 <= src < limits.WARP_LANES else None

    def bits(name: str, value: int, width: int) -> tuple[tuple[str, int], ...]:
        return tuple((f"{name}{i}", value >> i & 1) for i in range(width))

    for mode in Shfl:
        for low in range(4):
            for shape in range(16):
                high = () if mode == Shfl.IDX else bits("b", 0, 5)[2:]
                src = source(mode, low, shape, 0)
                if src != lane:
                    out.append(((("mode", int(mode)),) + bits("b", low, 2) + high
                                + bits("c", shape, 4), src))
    for high in range(1, 8):
        for warp in range(limits.MAX_WARPS):
            src = source(Shfl.BFLY, high << 2, 0, warp)
            if src != lane:
                out.append(((("mode", int(Shfl.BFLY)),) + bits("b", high << 2, 5)[2:]
                            + bits("w", warp, 2), src))
    return out


def shuffle_unit(g: Graph, s: int) -> None:
    """SHFL in a memory slot: per lane a one-hot of the source lane (``x{s}.src{lane}``: the
    lane's own unless a listed case says otherwise; an out-of-warp source sets
    ``x{s}.shfault{lane}``), then the result is that lane's operand a."""
    mod, shape = instr_bits(s, "mod"), instr_bits(s, "c")
    shfl = EXEC + op_is(s, Op.SHFL)
    for lane in LANES:
        run = ((f"x{s}.ex{lane}", 0), 1)
        b, src, fault = operand_b(s, lane), f"x{s}.src{lane}", f"x{s}.shfault{lane}"
        g.feature(src, limits.WARP_LANES, "onehot")
        g.feature(fault, 1)
        dims = {"mode": None, **{f"b{i}": (b, i) for i in range(5)},
                **{f"c{i}": shape[i] for i in range(4)},
                **{f"w{i}": ("wrp1", i) for i in range(2)}}
        rules = [Rule((run,) + shfl, (((src, lane), 1),))]
        for conds, source in shuffle_sources(lane):
            lits: tuple = ()
            for key, v in conds:
                if key == "mode":
                    lits += tuple((mod[i], v >> i & 1) for i in range(2))
                else:
                    lits += ((dims[key], v),)
            moved = (((fault, 0), 1),) if source is None else (((src, source), 1),)
            rules.append(Rule((run,) + shfl + lits, moved + (((src, lane), -1),)))
        g.rule_group(src, rules)
        g.rule_group(f"x{s}.res{lane}.shfl", [
            Rule((run,) + shfl + (((src, k), 1), ((f"x{s}.a{k}", i), 1)),
                 (((f"x{s}.res{lane}", i), 1),))
            for k in LANES for i in range(WORD)])


def _any_set(dims: list[tuple[str, int]]) -> list[tuple]:
    """Literal sets, one of which holds (exactly) when some dim is 1: the highest set one."""
    return [((d, 1),) + tuple((e, 0) for e in dims[k + 1:]) for k, d in enumerate(dims)]


def overflow(g: Graph, s: int) -> None:
    """x{s}.ov{lane}: an indexed address a + 4*b is not below 2**32 (or is negative), which
    the 32-bit sum hides: the adder's carry and the index's two top bits (``x{s}.ix``, lost by
    the shift) must all be 0 — or, for a signed index, all 1 (a negative index that the carry
    brings back)."""
    unsigned = (instr_bits(s, "mod")[3], 1)
    for lane in LANES:
        ov, top = f"x{s}.ov{lane}", f"x{s}.ix{lane}"
        g.feature(ov, 1)
        rules = []
        for carry in (0, 1):
            for hi in range(4):
                bits = ((f"x{s}.fl{lane}", 0), carry), ((top, 0), hi & 1), ((top, 1), hi >> 1)
                if carry or hi:
                    rules.append(Rule((((f"x{s}.idx", 0), 1), unsigned) + bits, (((ov, 0), 1),)))
                if (carry, hi) not in ((0, 0), (1, 3)):
                    rules.append(Rule((((f"x{s}.idx", 0), 1), (unsigned[0], 0)) + bits,
                                      (((ov, 0), 1),)))
        g.rule_group(ov, rules)


def fault_checks(g: Graph, s: int) -> None:
    """x{s}.fk{lane}: the fault (one-hot over tokens.FAULTS) the lane's access or shuffle
    raises, in the interpreter's order of checks: misaligned, then per space null / bounds
    (global: outside the 512 bytes or not allocated; shared: at or beyond the thread block's
    shared words; local: beyond the thread's 16 words); shuffles: a source outside the warp or
    not executing."""
    overflow(g, s)
    for lane in LANES:
        run = ((f"x{s}.ex{lane}", 0), 1)
        sp, m, total = f"x{s}.sp{lane}", f"x{s}.m{lane}", f"x{s}.sum{lane}"
        fk = f"x{s}.fk{lane}"
        g.feature(fk, len(T.FAULTS), "onehot")
        # the address as the checks need it, so its 32 bits die with the memory reads:
        # x{s}.w7 = bits 2..8 (the word, also compared with the shared size), x{s}.at = bits
        # 0 and 1 and "some bit 9..31 is set"
        word7, tail = f"x{s}.w7{lane}", f"x{s}.at{lane}"
        g.feature(word7, SHARED_SIZE_BITS)
        g.feature(tail, 3)
        g.rule_group(word7, [Rule((((total, 2 + i), 1),), (((word7, i), 1),))
                             for i in range(SHARED_SIZE_BITS)]
                     + [Rule((run,) + op_is(s, op) + (((total, 2 + i), 1),),
                             (((f"rec.w{lane}", i), 1),))
                        for op in MEMORY_WRITING_OPS for i in range(SHARED_SIZE_BITS)]
                     + [Rule((((total, i), 1),), (((tail, i), 1),)) for i in range(2)]
                     + [Rule(lits, (((tail, 2), 1),))
                        for lits in _any_set([(total, i) for i in range(9, WORD)])])
        allocated = f"x{s}.al{lane}"  # the global word read is allocated: m need not wait
        g.feature(allocated, 1)
        g.rule_group(allocated, [Rule((((m, WORD), 1),), (((allocated, 0), 1),))])
        beyond = f"x{s}.sb{lane}"  # word index >= shared words
        g.feature(beyond, 1)
        gd.compare(g, f"{beyond}.cmp", word7, "cfg.s", ge=(beyond, 0))

        def fault(kind: str, fk: str = fk) -> tuple:
            return (((fk, T.FAULTS.index(kind)), 1),)

        word = [(word7, i) for i in range(SHARED_SIZE_BITS)]  # address bits 2..8
        high = ((tail, 2), 1)  # some address bit 9..31 is set
        low = ((tail, 2), 0)
        aligned = (((tail, 0), 0), ((tail, 1), 0))
        access = [((sp, k), 1) for k in range(3)]
        rules = [Rule((run, a, ((tail, 0), 1)), fault("misaligned")) for a in access]
        rules += [Rule((run, a, ((tail, 0), 0), ((tail, 1), 1)), fault("misaligned"))
                  for a in access]
        over = (f"x{s}.ov{lane}", 0)
        rules.append(Rule((run, access[0], (over, 1)) + aligned, fault("global_bounds")))
        g_ = (run, access[0], (over, 0)) + aligned
        rules.append(Rule(g_ + (low,) + tuple((d, 0) for d in word), fault("null")))
        rules.append(Rule(g_ + (high,), fault("global_bounds")))
        rules += [Rule(g_ + (low,) + lits + (((allocated, 0), 0),), fault("global_bounds"))
                  for lits in _any_set(word)]
        s_ = (run, access[1]) + aligned
        rules.append(Rule(s_ + (high,), fault("shared_bounds")))
        rules.append(Rule(s_ + (low, ((beyond, 0), 1)), fault("shared_bounds")))
        l_ = (run, access[2]) + aligned
        rules += [Rule(l_ + lits, fault("local_bounds"))
                  for lits in _any_set(word[4:] + [(tail, 2)])]  # bits 6..31
        shfl = (run,) + op_is(s, Op.SHFL)
        rules.append(Rule(shfl + (((f"x{s}.shfault{lane}", 0), 1),), fault("shuffle_lane")))
        rules += [Rule(shfl + (((f"x{s}.src{lane}", k), 1), ((f"x{s}.ex{k}", 0), 0)),
                       fault("shuffle_lane")) for k in LANES if k != lane]
        g.rule_group(fk, rules)


def first_fault(g: Graph) -> None:
    """``x.fault``: the first fault of the block (slot order, then lane order), one-hot over
    tokens.FAULTS; all zero when the block runs through."""
    slots = [s for s in range(limits.BLOCK_SLOTS) if SLOT_UNITS[s] == "memory"]
    places = [(s, lane) for s in slots for lane in LANES]
    g.feature("x.fault", len(T.FAULTS), "onehot")
    rules = []
    for n, (s, lane) in enumerate(places):
        clear = tuple(((f"x{t}.fk{k}", f), 0) for t, k in places[:n] for f in range(len(T.FAULTS)))
        rules += [Rule(clear + (((f"x{s}.fk{lane}", f), 1),), ((("x.fault", f), 1),))
                  for f in range(len(T.FAULTS))]
    g.rule_group("x.fault", rules)


def store_records(g: Graph, s: int) -> None:
    """The memory records a store or atomic leaves, in lane order: lane l's (space
    ``x{s}.sp{l}``; word ``x{s}.w7{l}``, bits 2..8 of the address; value: the store's
    ``x{s}.v{l}``, the atomic's new word ``a.n{l}``) goes out iff ``x{s}.keep{l}`` — it writes
    and no later lane writes the same global or shared word (the last lane's value is the
    word's; local words are per lane and never collide). Word equality of two lanes
    (``x{s}.cl{lo}{hi}``, which the atomic unit uses too) is a count of differing bits that
    must be 0."""
    run = {lane: ((f"x{s}.ex{lane}", 0), 1) for lane in LANES}
    st = {lane: [(run[lane],) + op_is(s, op) for op in MEMORY_WRITING_OPS] for lane in LANES}
    pairs = [(lo, hi) for lo in LANES for hi in LANES if lo < hi]
    for lo, hi in pairs:
        diff, same = f"x{s}.df{lo}{hi}", f"x{s}.cl{lo}{hi}"
        g.feature(diff, 1)
        g.rule_group(diff, [Rule((((f"x{s}.w7{lo}", i), v), ((f"x{s}.w7{hi}", i), 1 - v)),
                                 (((diff, 0), 1),)) for i in range(7) for v in (0, 1)])
        g.feature(same, 1)  # both store to one shared or global word
        rules = []
        for space in (0, 1):  # one instruction: both lanes run it or its op is the same
            for a, b in zip(st[lo], st[hi], strict=True):
                both = a + b + (((f"x{s}.sp{lo}", space), 1), ((f"x{s}.sp{hi}", space), 1))
                rules += [Rule(both, (((same, 0), 1),)),
                          Rule(both, (((same, 0), -1),), count=((diff, 0), 1))]
        g.rule_group(same, rules)
    for lane in LANES:
        keep = f"x{s}.keep{lane}"
        g.feature(keep, 1)
        later = tuple(((f"x{s}.cl{lane}{hi}", 0), 0) for hi in LANES if hi > lane)
        g.rule_group(keep, [Rule(lits + later + (((f"x{s}.sp{lane}", k), 1),),
                                 (((keep, 0), 1),)) for lits in st[lane] for k in range(3)])
