"""The machine's instruction set: one instruction format, four terminators, a ROM of blocks.

A program is a list of *machine blocks*. Each block holds at most ``BLOCK_SLOTS`` straight-line
instructions and ends in one terminator (jump, branch, barrier, exit). The model will execute one
block of one warp per generated token, so the block — not the instruction — is the unit of
fetch, scheduling and tracing. docs/ISA.md is the prose version of this module.

All instructions share one format (few formats and small fields win when the decoder becomes an
MLP): ``op mod guard d a b c bi imm``. Unused fields are zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from qgpu.machine import limits
from qgpu.machine.float32 import FCmp, Round


class Op(IntEnum):
    """Opcodes. Comments give the semantics; ``B`` is register b or the immediate when bi."""

    ADD = 0  # d = a + B
    SUB = 1  # d = a - B
    MUL = 2  # d = low 32 bits of a * B
    MULHI = 3  # d = high 32 bits of signed a * B
    MULHIU = 4  # d = high 32 bits of unsigned a * B
    MAD = 5  # d = low 32 bits of a * B + c
    MIN = 6  # signed
    MAX = 7
    MINU = 8  # unsigned
    MAXU = 9
    AND = 10
    OR = 11
    XOR = 12
    SHL = 13  # amounts >= 32 give 0 (B taken unsigned)
    SHR = 14  # logical; amounts >= 32 give 0
    SRA = 15  # arithmetic; amounts >= 32 give the sign fill
    NEG = 16  # d = -a
    ABS = 17  # d = |a| (abs(INT_MIN) = INT_MIN)
    NOT = 18  # d = ~a
    POPC = 19  # d = number of set bits of a
    CLZ = 20  # d = leading zeros of a (32 for 0)
    BREV = 21  # d = a with its 32 bits reversed
    SEL = 22  # d = P ? a : B, P = predicate c (negated when mod bit 0)
    SETP = 23  # predicate d = a <mod cmp> B
    PLOP = 24  # predicate d = [!]pred a <mod op> [!]pred b
    S2R = 25  # d = special register mod
    LD = 26  # d = space mod [a + imm]
    ST = 27  # space mod [a + imm] = b
    # d = old global [a + imm]; global [a + imm] = old <mod op> b (CAS: old == b ? c : old)
    ATOMG = 28
    ATOMS = 29  # same on shared memory
    SHFL = 30  # d = a of the lane chosen by mode mod, B and the packed shape c
    # binary32 (qgpu/machine/float32.py); mod = rounding | FTZ | SAT unless said otherwise
    FADD = 31  # d = a + B
    FSUB = 32  # d = a - B
    FMUL = 33  # d = a * B
    FFMA = 34  # d = a * B + c, rounded once
    FMIN = 35  # d = the smaller of a, B (the non-NaN one; -0 < +0); mod FTZ only
    FMAX = 36
    FSETP = 37  # predicate d = a <mod FCmp> B; c = 1 flushes subnormal operands (ftz)
    I2F = 38  # d = float(a), mod = rounding | I2F_SIGNED
    F2I = 39  # d = a rounded to an integer, saturated, NaN -> 0 (mod: rounding | F2I_* bits)
    FRND = 40  # d = a rounded to an integral float; mod = rounding | FTZ


class Cmp(IntEnum):
    """SETP comparisons: signed (LT..GE) and unsigned (LO..HS), as in PTX."""

    EQ = 0
    NE = 1
    LT = 2
    LE = 3
    GT = 4
    GE = 5
    LO = 6
    LS = 7
    HI = 8
    HS = 9


class PredOp(IntEnum):
    """PLOP operations; mod = op | neg_a << 2 | neg_b << 3."""

    AND = 0
    OR = 1
    XOR = 2


class Space(IntEnum):
    """Memory spaces of LD/ST (mod bits 0-1). LOCAL is per thread (spill slots); PARAM is
    read-only."""

    GLOBAL = 0
    SHARED = 1
    LOCAL = 2
    PARAM = 3


# LD/ST mod bit 2: the address is a + 4*b + imm computed exactly (no 32-bit wrap), so an index
# that a real GPU would send outside memory is caught; bit 3: b is unsigned. An indexed ST takes
# its value from c.
INDEXED = 4
INDEX_UNSIGNED = 8


def mem_space(ins: Instr) -> Space:
    """The memory space an LD/ST/ATOM instruction accesses."""
    if ins.op == Op.ATOMG:
        return Space.GLOBAL
    if ins.op == Op.ATOMS:
        return Space.SHARED
    return Space(ins.mod & 3)


ATOMIC_OPS = (Op.ATOMG, Op.ATOMS)
MEMORY_WRITING_OPS = (Op.ST, *ATOMIC_OPS)  # a block holds at most one (docs/ISA.md §2)


class Atom(IntEnum):
    """Atomic operations of ATOMG/ATOMS (mod field)."""

    ADD = 0
    MIN = 1
    MAX = 2
    MINU = 3
    MAXU = 4
    EXCH = 5
    CAS = 6
    AND = 7
    OR = 8
    XOR = 9
    INC = 10  # old >=u b ? 0 : old + 1
    DEC = 11  # (old == 0 or old >u b) ? b : old - 1


class Shfl(IntEnum):
    """SHFL modes (mod field); c packs (segmask & 3) << 2 | (clamp & 3)."""

    UP = 0
    DOWN = 1
    BFLY = 2
    IDX = 3


class SReg(IntEnum):
    """Special registers readable with S2R."""

    TID_X = 0
    TID_Y = 1
    NTID_X = 2
    NTID_Y = 3
    CTAID_X = 4
    CTAID_Y = 5
    NCTAID_X = 6
    NCTAID_Y = 7


# Float mod bits (bits 0-1: float32.Round): flush subnormal inputs and results, clamp to [0, 1].
# I2F and F2I use bit 2 for a signed integer, F2I bit 3 for ftz.
FTZ = 4
SAT = 8
I2F_SIGNED = 4
F2I_SIGNED = 4
F2I_FTZ = 8
FLOAT_OPS = frozenset({Op.FADD, Op.FSUB, Op.FMUL, Op.FFMA, Op.FMIN, Op.FMAX, Op.FSETP, Op.I2F,
                       Op.F2I, Op.FRND})

# Ops whose d names a predicate rather than a register.
PRED_DEST_OPS = frozenset({Op.SETP, Op.PLOP, Op.FSETP})
UNARY_OPS = frozenset({Op.NEG, Op.ABS, Op.NOT, Op.POPC, Op.CLZ, Op.BREV, Op.I2F, Op.F2I,
                       Op.FRND})
def source_registers(op: Op, mod: int, bi: bool, a: int, b: int, c: int) -> tuple[int, ...]:
    """The register fields an instruction reads, given its op and mod (shared with the IR)."""
    if op in (Op.S2R, Op.PLOP):
        return ()
    if op == Op.LD:
        return (a, b) if mod & INDEXED else (a,)
    if op in UNARY_OPS:
        return (a,)
    if op == Op.ST:
        return (a, b, c) if mod & INDEXED else (a, b)
    regs = [a] if bi else [a, b]
    if op in (Op.MAD, Op.FFMA) or (op in (Op.ATOMG, Op.ATOMS) and mod == Atom.CAS):
        regs.append(c)
    return tuple(regs)


NO_GUARD = 0  # guard field: 0 = always, 1 + p = @p, 1 + NUM_PREDS + p = @!p


def guard_code(pred: int | None, negated: bool = False) -> int:
    """Encode a guard ``@p`` / ``@!p`` (None = always)."""
    if pred is None:
        return NO_GUARD
    return 1 + pred + (limits.NUM_PREDS if negated else 0)


def guard_parts(code: int) -> tuple[int, bool] | None:
    """Decode a guard field into (predicate, negated), or None for always."""
    if code == NO_GUARD:
        return None
    p = code - 1
    return p % limits.NUM_PREDS, p >= limits.NUM_PREDS


@dataclass(frozen=True)
class Instr:
    """One machine instruction. ``imm`` is signed 32-bit; ``bi`` makes it operand B."""

    op: Op
    d: int = 0
    a: int = 0
    b: int = 0
    c: int = 0
    imm: int = 0
    bi: bool = False
    mod: int = 0
    guard: int = NO_GUARD
    comment: str = field(default="", compare=False)
    # writes 0 where CUDA leaves the value undefined (toolchain/lower/undefined.py): the model
    # computes with the 0, the interpreter treats the register as undefined
    undefined: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("d", "a", "b", "c"):
            v = getattr(self, name)
            if not 0 <= v < limits.NUM_REGS:
                raise ValueError(f"{self.op.name}: field {name}={v} out of range")
        if not -(1 << 31) <= self.imm < (1 << 32):
            raise ValueError(f"{self.op.name}: immediate {self.imm} is not 32-bit")
        if not 0 <= self.mod < 16 or not 0 <= self.guard < 1 + 2 * limits.NUM_PREDS:
            raise ValueError(f"{self.op.name}: mod/guard out of range")
        if self.op in (Op.LD, Op.ST) and self.mod & INDEXED and self.imm:
            raise ValueError(f"{self.op.name}: the indexed form a + 4*b has no immediate")
        if self.op in ATOMIC_OPS and self.mod == Atom.CAS and self.imm:
            raise ValueError(f"{self.op.name}.CAS has no immediate (its c comes through port b)")

    def reads(self) -> tuple[int, ...]:
        """General registers this instruction reads (r0 included when named)."""
        return source_registers(self.op, self.mod, self.bi, self.a, self.b, self.c)

    def writes_reg(self) -> int | None:
        """The general register written (None for stores and predicate ops)."""
        if self.op in PRED_DEST_OPS or self.op == Op.ST:
            return None
        return self.d

    def pred_reads(self) -> list[int]:
        """Predicates read: the guard's, SEL's selector, PLOP's operands."""
        uses = []
        g = guard_parts(self.guard)
        if g is not None:
            uses.append(g[0])
        if self.op == Op.SEL:
            uses.append(self.c)
        elif self.op == Op.PLOP:
            uses += [self.a, self.b]
        return uses

    def writes_pred(self) -> int | None:
        return self.d if self.op in PRED_DEST_OPS else None


class TermKind(IntEnum):
    """How a block ends."""

    JMP = 0  # all active lanes continue at target
    BRA = 1  # lanes with the predicate go to target, the others to other
    BAR = 2  # bar.sync 0, then continue at target
    EXIT = 3  # active lanes finish


@dataclass(frozen=True)
class Term:
    """A block terminator. For BRA, ``pred``/``negated`` select the taken lanes."""

    kind: TermKind
    target: int = 0
    other: int = 0
    pred: int = 0
    negated: bool = False

    def successors(self) -> list[int]:
        """Blocks a thread may run next."""
        return term_successors(self.kind, self.target, self.other)


def term_successors(kind: TermKind, target: int, other: int) -> list[int]:
    """Successors of a terminator, machine or IR: none for EXIT, both arms of a BRA."""
    if kind == TermKind.EXIT:
        return []
    if kind == TermKind.BRA:
        return [target, other]
    return [target]


MUL_OPS = frozenset({Op.MUL, Op.MULHI, Op.MULHIU, Op.MAD})
SLOT_UNITS = ("memory", "multiply", "memory", "multiply")
"""The unit each slot has besides the ALU (every slot has one). A multiplier or a memory unit in
every slot would make every slot as deep as its deepest unit (docs/ISA.md §6)."""

FLOAT_SLOTS = (1, 3)
"""The slots with the float unit: the multiplier slots, whose column compression can form a
significand product and which read port c (FFMA's addend)."""

HIGH_MULTIPLY_OPS = frozenset({Op.MULHI, Op.MULHIU})
HIGH_MULTIPLY_SLOTS = (1,)
"""The multiplier slots that also give a product's high half. Slot 3's multiplier runs MUL and
MAD only: the low half needs 32 column counts per lane, the high half 64 and a fifth layer, and
slot 3's multiply phase is where the residual peaks (docs/ARCHITECTURE.md §9); MULHI and MULHIU
are rare enough that a block holds two of them almost never (+0.2 % generated tokens over the
suite)."""

NOP = Instr(Op.ADD)  # add r0, r0, r0: fills a slot the next instruction cannot use


def unit_of(ins: Instr) -> str:
    """The unit an instruction needs: "alu", "multiply", "float" or "memory". Parameter loads
    (always at a constant address) are ALU work: every slot reads the parameter words."""
    if ins.op in FLOAT_OPS:
        return "float"
    if ins.op in MUL_OPS:
        return "multiply"
    if accesses_memory(ins) or ins.op == Op.SHFL:
        return "memory"
    return "alu"


def accesses_memory(ins: Instr) -> bool:
    """Loads (not of parameters), stores and atomics."""
    return writes_memory(ins) or (ins.op == Op.LD and ins.mod & 3 != Space.PARAM)


def writes_memory(ins: Instr) -> bool:
    return ins.op in MEMORY_WRITING_OPS


def slot_allows(slot: int, ins: Instr) -> bool:
    if ins.op in HIGH_MULTIPLY_OPS and slot not in HIGH_MULTIPLY_SLOTS:
        return False
    unit = unit_of(ins)
    if unit == "float":
        return slot in FLOAT_SLOTS
    return unit == "alu" or SLOT_UNITS[slot] == unit


def reads_atomic_result(later: Instr, earlier: Instr) -> bool:
    """Whether `later` reads the register an atomic `earlier` returns, which no later slot of
    the atomic's block may do (the model computes the old value off the slots' path)."""
    return earlier.op in ATOMIC_OPS and earlier.d != 0 and earlier.d in later.reads()


@dataclass(frozen=True)
class Block:
    """At most BLOCK_SLOTS instructions, each in a slot whose unit can run it, no memory access
    after a store or atomic (the model writes memory back after the block), then a
    terminator."""

    instrs: tuple[Instr, ...]
    term: Term

    def __post_init__(self) -> None:
        if len(self.instrs) > limits.BLOCK_SLOTS:
            raise ValueError(f"block has {len(self.instrs)} instructions > {limits.BLOCK_SLOTS}")
        stored = False
        for slot, ins in enumerate(self.instrs):
            if not slot_allows(slot, ins):
                if ins.op in HIGH_MULTIPLY_OPS and SLOT_UNITS[slot] == "multiply":
                    raise ValueError(f"slot {slot}'s multiplier gives no high half for "
                                     f"{ins.op.name} (high halves: slot "
                                     f"{', '.join(map(str, HIGH_MULTIPLY_SLOTS))})")
                raise ValueError(f"slot {slot} has no {unit_of(ins)} unit for {ins.op.name} "
                                 f"(slot units: {', '.join(SLOT_UNITS)}; float: slots "
                                 f"{', '.join(map(str, FLOAT_SLOTS))})")
            if any(reads_atomic_result(ins, e) for e in self.instrs[:slot]):
                raise ValueError(f"slot {slot}: {ins.op.name} reads the result of the block's "
                                 f"atomic")
            if stored and accesses_memory(ins):
                raise ValueError(f"slot {slot}: {ins.op.name} accesses memory after a store or "
                                 f"atomic in the same block")
            stored |= writes_memory(ins)


@dataclass(frozen=True)
class Program:
    """A lowered kernel: its ROM plus what the launch needs to know."""

    name: str
    blocks: tuple[Block, ...]
    num_params: int
    static_shared_bytes: int
    dynamic_shared_offset: int  # byte offset of the extern __shared__ array
    local_words: int  # spill slots used per thread
    param_is_pointer: tuple[bool, ...] = ()  # 64-bit .param entries (pointers or widened ints)

    def instruction_count(self) -> int:
        return sum(len(b.instrs) for b in self.blocks)

    def shared_bytes(self, dynamic_shared: int) -> int:
        """Shared memory a thread block of this kernel uses with this much dynamic shared."""
        return max(self.static_shared_bytes, self.dynamic_shared_offset + dynamic_shared)


# --- binary encoding ------------------------------------------------------------------------
# Instruction word (63 bits): imm:32 | bi:1 | c:4 | b:4 | a:4 | d:4 | guard:4 | mod:4 | op:6
_FIELDS = (("op", 6), ("mod", 4), ("guard", 4), ("d", 4), ("a", 4), ("b", 4), ("c", 4), ("bi", 1))
# Terminator word (19 bits): other:7 | target:7 | negated:1 | pred:2 | kind:2
_TERM_FIELDS = (("kind", 2), ("pred", 2), ("negated", 1), ("target", 7), ("other", 7))
TERM_BITS = sum(width for _, width in _TERM_FIELDS)


def encode_instr(ins: Instr) -> int:
    """Pack an instruction into its 63-bit word."""
    word, shift = 0, 0
    for name, width in _FIELDS:
        word |= int(getattr(ins, name)) << shift
        shift += width
    return word | (ins.imm & 0xFFFFFFFF) << shift


def decode_instr(word: int) -> Instr:
    """Inverse of encode_instr (the comment is lost)."""
    vals: dict[str, int] = {}
    shift = 0
    for name, width in _FIELDS:
        vals[name] = (word >> shift) & ((1 << width) - 1)
        shift += width
    imm = (word >> shift) & 0xFFFFFFFF
    imm = imm - (1 << 32) if imm >= 1 << 31 else imm
    return Instr(
        op=Op(vals["op"]), mod=vals["mod"], guard=vals["guard"], d=vals["d"], a=vals["a"],
        b=vals["b"], c=vals["c"], bi=bool(vals["bi"]), imm=imm,
    )


def encode_term(t: Term) -> int:
    """Pack a terminator."""
    vals = {
        "kind": int(t.kind), "pred": t.pred, "negated": int(t.negated), "target": t.target,
        "other": t.other,
    }
    word, shift = 0, 0
    for name, width in _TERM_FIELDS:
        word |= vals[name] << shift
        shift += width
    return word


def decode_term(word: int) -> Term:
    """Inverse of encode_term."""
    vals: dict[str, int] = {}
    shift = 0
    for name, width in _TERM_FIELDS:
        vals[name] = (word >> shift) & ((1 << width) - 1)
        shift += width
    return Term(TermKind(vals["kind"]), vals["target"], vals["other"], vals["pred"],
                bool(vals["negated"]))


# --- text form --------------------------------------------------------------------------------


def _reg(r: int) -> str:
    return f"r{r}"


def format_instr(ins: Instr) -> str:
    """Assembly text, e.g. ``@!p1 add r3, r2, 4``."""
    g = guard_parts(ins.guard)
    guard = "" if g is None else f"@{'!' if g[1] else ''}p{g[0]} "
    op = ins.op
    bsrc = str(ins.imm) if ins.bi else _reg(ins.b)
    if op in FLOAT_OPS:
        text = _format_float(ins, bsrc)
    elif op == Op.SETP:
        text = f"setp.{Cmp(ins.mod).name.lower()} p{ins.d}, {_reg(ins.a)}, {bsrc}"
    elif op == Op.PLOP:
        na, nb = "!" if ins.mod & 4 else "", "!" if ins.mod & 8 else ""
        text = f"p{PredOp(ins.mod & 3).name.lower()} p{ins.d}, {na}p{ins.a}, {nb}p{ins.b}"
    elif op == Op.SEL:
        neg = "!" if ins.mod & 1 else ""
        text = f"sel r{ins.d}, {_reg(ins.a)}, {bsrc}, {neg}p{ins.c}"
    elif op == Op.S2R:
        text = f"s2r r{ins.d}, %{SReg(ins.mod).name.lower()}"
    elif op in (Op.LD, Op.ST):
        space = Space(ins.mod & 3).name.lower()
        addr = f"{_reg(ins.a)}+{ins.imm}"
        if ins.mod & INDEXED:
            unsigned = "u" if ins.mod & INDEX_UNSIGNED else ""
            addr = f"{_reg(ins.a)}+{unsigned}{_reg(ins.b)}*4+{ins.imm}"
        if op == Op.LD:
            text = f"ld.{space} r{ins.d}, [{addr}]"
        else:
            value = ins.c if ins.mod & INDEXED else ins.b
            text = f"st.{space} [{addr}], {_reg(value)}"
    elif op in (Op.ATOMG, Op.ATOMS):
        sp = "global" if op == Op.ATOMG else "shared"
        extra = f", {_reg(ins.c)}" if ins.mod == Atom.CAS else ""
        text = (f"atom.{sp}.{Atom(ins.mod).name.lower()} r{ins.d}, [{_reg(ins.a)}+{ins.imm}], "
                f"{_reg(ins.b)}{extra}")
    elif op == Op.SHFL:
        text = f"shfl.{Shfl(ins.mod).name.lower()} r{ins.d}, {_reg(ins.a)}, {bsrc}, {ins.c:#x}"
    elif op in UNARY_OPS:
        text = f"{op.name.lower()} r{ins.d}, {_reg(ins.a)}"
    elif op == Op.MAD:
        text = f"mad r{ins.d}, {_reg(ins.a)}, {bsrc}, {_reg(ins.c)}"
    else:
        text = f"{op.name.lower()} r{ins.d}, {_reg(ins.a)}, {bsrc}"
    return guard + text + (f"  ; {ins.comment}" if ins.comment else "")


def _format_float(ins: Instr, bsrc: str) -> str:
    """``fadd.rz.ftz r1, r2, 0x3f800000`` and the like: float immediates in hex (their bits)."""
    op = ins.op
    if ins.bi:
        bsrc = f"{ins.imm & 0xFFFFFFFF:#010x}"
    rnd = "." + Round(ins.mod & 3).name.lower()
    if op == Op.FSETP:
        ftz = ".ftz" if ins.c else ""
        return f"fsetp.{FCmp(ins.mod).name.lower()}{ftz} p{ins.d}, {_reg(ins.a)}, {bsrc}"
    if op in (Op.I2F, Op.F2I):
        signed = ".s32" if ins.mod & 4 else ".u32"
        mods = (".rn", ".rz", ".rm", ".rp")[ins.mod & 3]
        if op == Op.F2I:
            mods = (".rni", ".rzi", ".rmi", ".rpi")[ins.mod & 3]
            mods += ".ftz" if ins.mod & F2I_FTZ else ""
        return f"{op.name.lower()}{mods}{signed} r{ins.d}, {_reg(ins.a)}"
    ftz = ".ftz" if ins.mod & FTZ else ""
    if op in (Op.FMIN, Op.FMAX):
        return f"{op.name.lower()}{ftz} r{ins.d}, {_reg(ins.a)}, {bsrc}"
    if op == Op.FRND:
        return f"frnd{rnd}i{ftz} r{ins.d}, {_reg(ins.a)}"
    sat = ".sat" if ins.mod & SAT else ""
    text = f"{op.name.lower()}{rnd}{ftz}{sat} r{ins.d}, {_reg(ins.a)}, {bsrc}"
    return text + (f", {_reg(ins.c)}" if op == Op.FFMA else "")


def format_term(t: Term) -> str:
    """Assembly text of a terminator."""
    if t.kind == TermKind.JMP:
        return f"jmp B{t.target}"
    if t.kind == TermKind.BAR:
        return f"bar.sync -> B{t.target}"
    if t.kind == TermKind.EXIT:
        return "exit"
    neg = "!" if t.negated else ""
    return f"bra {neg}p{t.pred} ? B{t.target} : B{t.other}"


def format_program(prog: Program) -> str:
    """The whole ROM as readable assembly."""
    lines = [f"// {prog.name}: {len(prog.blocks)} blocks, {prog.instruction_count()} instructions"]
    for i, blk in enumerate(prog.blocks):
        lines.append(f"B{i}:")
        lines += [f"    {format_instr(ins)}" for ins in blk.instrs]
        lines.append(f"    {format_term(blk.term)}")
    return "\n".join(lines)
