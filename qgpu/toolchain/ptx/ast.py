"""Typed AST for the subset of PTX that qgpu accepts (integers and float32).

The parser (``qgpu.toolchain.ptx.parser``) only builds nodes for constructs inside the subset,
so every consumer (the PTX interpreter, the lowering) can pattern-match on these classes without
re-checking the source text.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

#: Bit width of each register / instruction type the subset knows (8-bit types only in cvt and
#: ld.param). An ``f32`` register holds the binary32 word (qgpu.machine.float32).
TYPE_WIDTH = {
    "pred": 1,
    "b8": 8, "u8": 8, "s8": 8,
    "b16": 16, "u16": 16, "s16": 16,
    "b32": 32, "u32": 32, "s32": 32, "f32": 32,
    "b64": 64, "u64": 64, "s64": 64,
}  # fmt: skip


def type_width(ptx_type: str) -> int:
    """Bit width of a PTX type name such as ``"u32"`` (``"pred"`` is 1)."""
    return TYPE_WIDTH[ptx_type]


def is_signed(ptx_type: str) -> bool:
    """True for ``.s8/.s16/.s32/.s64``: these sign-extend and compare as signed."""
    return ptx_type.startswith("s")


@dataclass(frozen=True)
class Reg:
    """A virtual register such as ``%r1``; ``negated`` only for a ``!%p`` predicate source."""

    name: str
    negated: bool = False


@dataclass(frozen=True)
class Imm:
    """An integer literal (already decoded from decimal, hex, octal or binary), or a float32
    literal ``0fXXXXXXXX`` as its 32-bit word."""

    value: int


@dataclass(frozen=True)
class Sym:
    """A named entity used as a value: a label (bra), a shared variable or a parameter."""

    name: str


@dataclass(frozen=True)
class SpecialReg:
    """A special register: ``SpecialReg("%tid", "x")``; ``comp`` is None for e.g. ``%laneid``."""

    name: str
    comp: str | None = None


@dataclass(frozen=True)
class Addr:
    """A memory operand ``[base+offset]``: base is a register, a symbol or None (absolute)."""

    base: Reg | Sym | None
    offset: int


@dataclass(frozen=True)
class Pair:
    """The ``d|p`` destination pair of setp and shfl.sync."""

    first: Reg
    second: Reg


@dataclass(frozen=True)
class Vec:
    """The ``{%r1, %r2, ...}`` register list of a vector load or store; None is the ``_`` sink
    (a loaded element nobody keeps)."""

    items: tuple[Reg | Imm | None, ...]


Operand = Reg | Imm | Sym | SpecialReg | Addr | Pair | Vec

#: Opcodes that write no register (their first operand, if any, is a source).
NO_DEST = frozenset({"st", "red", "bra", "ret", "exit", "bar", "barrier", "membar", "fence"})

#: State spaces a modifier can name.
STATE_SPACES = frozenset({"global", "shared", "param", "local", "const", "tex", "surf"})


@dataclass(frozen=True)
class Instr:
    """One instruction: ``@!%p1 add.s32 %r1, %r2, 4;`` -> guard ("%p1", True), opcode "add"."""

    line: int
    text: str
    guard: tuple[str, bool] | None  # (predicate register, negated)
    opcode: str
    mods: tuple[str, ...]  # dotted modifiers in source order
    operands: tuple[Operand, ...]

    @property
    def type(self) -> str:
        """The instruction type suffix (the last modifier), e.g. ``"u32"``; ``""`` if none."""
        return self.mods[-1] if self.mods else ""

    @property
    def space(self) -> str | None:
        """The state space modifier of ld/st/atom/red/cvta, or None (generic addressing)."""
        return next((m for m in self.mods if m in STATE_SPACES), None)

    @property
    def dests(self) -> tuple[str, ...]:
        """Names of the registers this instruction writes."""
        if self.opcode in NO_DEST or not self.operands:
            return ()
        first = self.operands[0]
        if isinstance(first, Pair):
            return (first.first.name, first.second.name)
        if isinstance(first, Vec):
            return tuple(x.name for x in first.items if isinstance(x, Reg))
        if isinstance(first, Reg):
            return (first.name,)
        return ()


@dataclass(frozen=True)
class Label:
    """A branch target ``name:`` inside a kernel body."""

    name: str
    line: int


@dataclass(frozen=True)
class Param:
    """A kernel parameter ``.param .u64 k_param_0``."""

    name: str
    type: str
    line: int


@dataclass(frozen=True)
class SharedDecl:
    """A ``.shared`` array; ``extern`` ones have size 0 and are sized at launch (dynamic)."""

    name: str
    size_bytes: int
    align: int
    line: int
    extern: bool


@dataclass(frozen=True)
class GlobalVar:
    """A module-scope ``.global`` (``__device__``, file-scope ``const``) or ``.const``
    (``__constant__``) variable: the machine keeps it in global memory, placed only for the
    kernels that use it. ``init`` is its whole initial contents (zero-filled, as CUDA
    zero-initialises such variables); ``error`` says why a kernel using it cannot run (e.g. an
    initialiser holding an address), so that only those kernels are rejected."""

    name: str
    space: str  # "global" | "const"
    type: str  # the declared element type (NVVM declares initialised arrays as .b8 bytes)
    size_bytes: int
    align: int
    init: bytes
    line: int
    error: str | None = None

    @property
    def element_bits(self) -> int:
        """Width of one element as the host shows it: the declared type, or for a byte array
        the widest of 32/16 bits that its alignment and size allow (NVVM writes an initialised
        int[4] as ``.align 4 .b8 x[16]``)."""
        bits = TYPE_WIDTH[self.type]
        if bits != 8:
            return bits
        for wide in (32, 16):
            if self.align >= wide // 8 and self.size_bytes % (wide // 8) == 0:
                return wide
        return 8


@dataclass(frozen=True)
class RejectedKernel:
    """A kernel of the module outside the subset: launching it raises ``error``; the module's
    other kernels still run."""

    name: str
    line: int
    error: Exception


@dataclass(frozen=True)
class RegDecl:
    """``.reg .b32 %r<9>`` -> (b32, "%r", 9) declares %r0..%r8; count None is one named reg."""

    type: str
    prefix: str
    count: int | None
    line: int

    def names(self) -> tuple[str, ...]:
        """Every register name the declaration introduces."""
        if self.count is None:
            return (self.prefix,)
        return tuple(f"{self.prefix}{i}" for i in range(self.count))


@dataclass(frozen=True)
class Kernel:
    """One ``.entry``: parameters, registers, kernel-scope shared arrays and the body."""

    name: str
    params: tuple[Param, ...]
    regs: tuple[RegDecl, ...]
    shared: tuple[SharedDecl, ...]
    body: tuple[Instr | Label, ...]
    line: int

    @cached_property
    def reg_types(self) -> dict[str, str]:
        """Register name -> declared type, for width-correct reads and writes."""
        return {name: decl.type for decl in self.regs for name in decl.names()}

    @cached_property
    def zeroes_shared(self) -> bool:
        """True when the kernel stores bytes or halfwords to shared memory. The machine merges
        such a store into the word around it, which it must read first, and shared memory is
        undefined when a thread block starts (docs/ISA.md §1): so for such a kernel every
        static shared word starts at 0 (the lowering's prologue writes them)."""
        return any(ins.opcode in ("st", "atom", "red") and ins.space == "shared"
                   and TYPE_WIDTH.get(ins.type, 32) < 32 for ins in self.instructions)

    @property
    def instructions(self) -> tuple[Instr, ...]:
        """The body without labels, in program order (indices are program counters)."""
        return tuple(item for item in self.body if isinstance(item, Instr))


@dataclass(frozen=True)
class Module:
    """A parsed PTX file: header fields, kernels and module-scope shared arrays."""

    version: str
    target: str
    address_size: int
    kernels: tuple[Kernel, ...]
    module_shared: tuple[SharedDecl, ...]
    globals: tuple[GlobalVar, ...] = ()
    rejected: tuple[RejectedKernel, ...] = ()

    @cached_property
    def global_vars(self) -> dict[str, GlobalVar]:
        """Module-scope .global/.const variables by name."""
        return {g.name: g for g in self.globals}
