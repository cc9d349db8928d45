"""The GPU circuit's foundation: every token's input features, the banks the prompt loads and
the write-back fills (ROM, parameters, launch shape, registers, predicates, memories), the
current warp's state, the fetch, and the field tests every later stage shares (machine.py
builds the whole graph from these and the stages after them)."""

from __future__ import annotations

from qgpu.circuits.gpu.encoding import FIELDS, KINDS, SHAPE_BITS
from qgpu.compiler.graph import Address, Dim, Graph, Part, Rule
from qgpu.machine import limits, rom
from qgpu.machine.isa import SLOT_UNITS, Op, Space

DATA_TAPS = [Part(f"d{k}", k, 8 * k) for k in range(1, 4)]
"""Bytes 1..3 of a header's frame: the data tokens 1..3 places before it."""
PART_TAPS = [Part(f"d{k}", k, 8 * (k - 1)) for k in range(1, 4)]
"""A payload-less header (ROM parts): its 24 bits are the three data tokens before it."""


def rom_parts() -> list[tuple[int, int, int]]:
    """(slot, part, bits) of every ROM part that can be non-zero."""
    out = []
    for s in range(rom.SLOTS):
        row_bits = rom.TERM_ROW_BITS if s == rom.TERM_SLOT else rom.ROW_BITS
        for p in range(rom.PARTS):
            bits = min(rom.PART_BITS, row_bits - p * rom.PART_BITS)
            if bits > 0:
                out.append((s, p, bits))
    return out


# instruction word fields (qgpu/isa.py): name -> (first bit, width)
INSTR_FIELDS = {"op": (0, 6), "mod": (6, 4), "guard": (10, 4), "d": (14, 4), "a": (18, 4),
                "b": (22, 4), "c": (26, 4), "bi": (30, 1), "imm": (31, 32)}  # fmt: skip
TERM_FIELDS = {"kind": (0, 2), "pred": (2, 2), "negated": (4, 1), "target": (5, 7),
               "other": (12, 7), "live_regs": (19, 15), "live_preds": (34, 4)}  # fmt: skip


def kind_dim(kind: str) -> Dim:
    return ("kind", KINDS.index(kind))


def rails(field: str, width: int, value: int) -> tuple:
    """Literals that hold iff a dual-rail field holds `value` (never for a token without it)."""
    return tuple(((f"{field}{value >> i & 1}", i), 1) for i in range(width))


def one_rail(field: str, width: int, value: int) -> tuple:
    """Literals on a dual-rail field's 1-rail alone: they hold iff the field holds `value` on a
    token that has the field, so a rule using them must also name the token's kind. A 0-rail
    that only the output selection reads is cleared at birth and its dims lent until then."""
    return tuple(((f"{field}1", i), value >> i & 1) for i in range(width))


# --- stages ---------------------------------------------------------------------------------


def inputs(g: Graph) -> None:
    for f in FIELDS:
        for name, size in f.features().items():
            code = "onehot" if f.code == "onehot" else "bits"
            g.feature(name, size, code, token_input=True)
    g.feature("one", 1, "onehot")
    g.rule_group("one", [Rule((), ((("one", 0), 1),))])  # 1 in every token: 1-row addresses


def bits_of(feature: str, width: int, first: int = 0) -> tuple[Dim, ...]:
    return tuple((feature, first + i) for i in range(width))


BLOCK = bits_of("blk1", 7)  # the block an EXEC or ROM token names
CUR_WARP = bits_of("cur.wm", 2)  # the warp of the last EXEC (write-back frames are its)


VALUE = [Part("byte1")] + DATA_TAPS  # a frame's 32-bit value: header byte and data tokens


def param_bank(g: Graph, name: str) -> None:
    """A copy of the parameter words (row = word), filled by the prompt's PARAM frames."""
    g.bank(name, limits.PARAM_WORDS, "bits")
    g.write(name, Address(bits_of("pword", 4)), parts=VALUE, enable=kind_dim("param"))


def prompt(g: Graph) -> None:
    """Banks the prompt fills: ROM parts, parameter words, launch shape."""
    for s, p, _ in rom_parts():
        bank = f"rom.{s}.{p}"
        g.bank(bank, limits.ROM_BLOCKS, "bits")
        g.write(bank, Address(BLOCK), parts=PART_TAPS, enable=("romsel", s * rom.PARTS + p))
    param_bank(g, "param")
    for kind, fields in (("block", ("bx", "by")), ("grid", ("gx", "gy")), ("shared", ("shw",))):
        g.bank(f"cfg.{kind}", 1, "bits")
        offsets = [0, SHAPE_BITS]
        g.write(f"cfg.{kind}", "one",
                parts=[Part(f, 0, off) for f, off in zip(fields, offsets, strict=False)],
                enable=kind_dim(kind))


REG_ROWS = limits.MAX_WARPS * limits.NUM_REGS  # a lane's register file: row = (warp, register)
LOCAL_ROWS = limits.MAX_WARPS * limits.LOCAL_WORDS
MEM_ROWS = limits.GLOBAL_WORDS  # global; shared uses the first SHARED_WORDS rows of its bank
ALLOCATED_BIT = 32  # global rows: the word's value, then "allocated" (loaded by the prompt)
LANES = range(limits.WARP_LANES)


SHARED_SIZE_BITS = 7  # 0..SHARED_WORDS


def state(g: Graph) -> None:
    """cur.wm = (warp, active lanes) of the last EXEC; cur.cta = the running thread block;
    cfg.b / cfg.g = the launch shape (each extent minus 1, x then y); cfg.s = the shared words
    of a thread block."""
    g.bank("cur.wm", 1, "bits")
    g.write("cur.wm", "one", parts=[Part("wrp1"), Part("msk1", 0, 2)], enable=kind_dim("exec"))
    g.feature("cur.wm", 2 + limits.WARP_LANES)
    g.read("cur.wm", "one", "cur.wm")
    g.bank("cur.cta", 1, "bits")
    g.write("cur.cta", "one", parts=[Part("cta1")], enable=kind_dim("cta"))
    g.feature("cur.cta", 4)
    g.read("cur.cta", "one", "cur.cta")
    for bank, out in (("cfg.block", "cfg.b"), ("cfg.grid", "cfg.g")):  # extents - 1, x then y
        g.feature(out, 2 * SHAPE_BITS)
        g.read(bank, "one", out)
    g.feature("cfg.s", SHARED_SIZE_BITS)  # shared words per thread block
    g.read("cfg.shared", "one", "cfg.s")


def cur_lane_active(lane: int) -> tuple:
    return ((("cur.wm", 2 + lane), 1),)


WB_REG = Address(bits_of("reg1", 4) + CUR_WARP)  # row = (warp, register) of a VAL frame


def writeback(g: Graph) -> None:
    """Write-back frames: registers (one bank per lane, row = (warp, register)), predicates (one
    bank, row = warp: all lanes' predicates), global / shared / local memory."""
    g.feature("wb.lane", limits.WARP_LANES)
    g.rule_group("wb.lane", [
        Rule(((("lanesel", lane), 1),), ((("wb.lane", lane), 1),)) for lane in LANES
    ] + [
        Rule(((("lanesel", limits.WARP_LANES), 1),) + cur_lane_active(lane),
             ((("wb.lane", lane), 1),)) for lane in LANES
    ])
    for lane in LANES:
        reg_bank(g, lane, f"regs.{lane}")
    pred_bank(g, "preds")
    g.feature("wb.allocated", 1)
    g.rule_group("wb.allocated", [Rule(((kind_dim("mem"), 1),), ((("wb.allocated", 0), 1),))])
    global_bank(g, "gmem")
    shared_bank(g, "smem")
    for lane in LANES:
        local_bank(g, lane, f"lmem.{lane}")


def reg_bank(g: Graph, lane: int, name: str) -> None:
    """A copy of lane `lane`'s register file (row = (warp, register)), kept by VAL frames."""
    g.bank(name, REG_ROWS, "bits")
    g.write(name, WB_REG, parts=VALUE, enable=("wb.lane", lane))


def pred_bank(g: Graph, name: str) -> None:
    """A copy of the predicate rows (row = warp; bit 4 * lane + predicate), kept by PROW
    frames (the header's byte: lanes 0-1, the data token before it: lanes 2-3)."""
    g.bank(name, limits.MAX_WARPS, "bits")
    g.write(name, Address(CUR_WARP), parts=[Part("byte1"), Part("d1", 1, 8)],
            enable=kind_dim("prow"))


MEM_ROW = Address(bits_of("mrow1", 7))  # the word a MEM frame names


def global_bank(g: Graph, name: str) -> None:
    """A copy of global memory: row = word, the value and then the allocated flag (bit 32)."""
    g.bank(name, MEM_ROWS, "bits")
    g.write(name, MEM_ROW, parts=VALUE + [Part("wb.allocated", 0, ALLOCATED_BIT)],
            enable=("mspace", 0))


def shared_bank(g: Graph, name: str) -> None:
    g.bank(name, limits.SHARED_WORDS, "bits")
    g.write(name, MEM_ROW, parts=VALUE, enable=("mspace", 1))


def local_bank(g: Graph, lane: int, name: str) -> None:
    """A copy of lane `lane`'s local memory: row = (warp, word)."""
    g.bank(name, LOCAL_ROWS, "bits")
    g.write(name, Address(bits_of("mrow1", 4) + CUR_WARP), parts=VALUE,
            enable=("mspace", 2 + lane))


def fetch(g: Graph) -> None:
    """An EXEC token reads every ROM row of its block (the slots decode the bits they need)."""
    for s, p, bits in rom_parts():
        g.feature(f"ins{s}.{p}", bits)
        g.read(f"rom.{s}.{p}", Address(BLOCK, kind_dim("exec")), f"ins{s}.{p}")


def instr_bits(slot: int, field: str) -> list[Dim]:
    """The dims holding a field of slot `slot`'s instruction (or terminator) word."""
    first, width = (TERM_FIELDS if slot == rom.TERM_SLOT else INSTR_FIELDS)[field]
    out = []
    for bit in range(first, first + width):
        part, i = divmod(bit, rom.PART_BITS)
        out.append((f"ins{slot}.{part}", i))
    return out


EXEC = ((kind_dim("exec"), 1),)


def bits_are(dims: list[Dim], value: int) -> tuple:
    """Literals: the binary dims (least significant first) hold `value`."""
    return tuple((d, value >> i & 1) for i, d in enumerate(dims))


def field_is(slot: int, field: str, value: int) -> tuple:
    """Literals: the slot's instruction field holds `value`."""
    return bits_are(instr_bits(slot, field), value)


def cta_is(c: int) -> tuple:
    """Literals: the current thread block is c."""
    return bits_are([("cur.cta", i) for i in range(4)], c)


def op_is(slot: int, op: Op) -> tuple:
    return field_is(slot, "op", int(op))


ACCESSES = ((Op.LD, Space.GLOBAL), (Op.LD, Space.SHARED), (Op.LD, Space.LOCAL),
            (Op.ST, Space.GLOBAL), (Op.ST, Space.SHARED), (Op.ST, Space.LOCAL),
            (Op.ATOMG, None), (Op.ATOMS, None))  # fmt: skip
"""The memory accesses of a memory slot (an atomic's space is its opcode's)."""


def access_is(s: int, op: Op, space: Space | None) -> tuple:
    """Literals: slot s holds `op` on `space` (mod bits 0-1; None: any)."""
    mod = instr_bits(s, "mod")
    return op_is(s, op) + (() if space is None else ((mod[0], space & 1), (mod[1], space >> 1)))


def operand_a(s: int, lane: int) -> str:
    """Operand a as slot s's units read it: port a in a memory slot; in a multiplier slot the
    adder's operand ``x{s}.p{lane}``, which is port a unless the slot multiplies (and then no
    other unit runs) — so port a dies when the multiplier and the pass to the adder read it."""
    return f"x{s}.p{lane}" if SLOT_UNITS[s] == "multiply" else f"x{s}.a{lane}"


def operand_b(s: int, lane: int) -> str:
    """Operand b as slot s's units read it: the adder's operand ``x{s}.q{lane}``. In a
    multiplier slot that is port b unless the slot multiplies; in a memory slot port b itself,
    except for an indexed access's shifted index and a CAS's swap value, which no other unit
    reads (the atomic unit reads the swap value from port b) — so port b dies as soon as q is
    formed."""
    return f"x{s}.q{lane}"


def hex_digit(bit: int) -> tuple[int, int]:
    """(digit, weight) of a bit in base-16 digits (a module function: schedules pickle)."""
    return bit // 4, 1 << bit % 4
