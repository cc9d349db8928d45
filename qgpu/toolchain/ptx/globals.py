"""Module-scope variables in global memory: ``__device__`` variables, file-scope ``const`` and
``constexpr`` values NVVM emits as initialised ``.global`` symbols, and ``__constant__`` data.

The machine has one memory, so every such variable a kernel uses is placed in it, at the top
(the highest addresses, each word-aligned with an unallocated guard word below it), and the
argument arrays fill the words below (driver.place_arguments). Both interpreters and the
lowering take the addresses from ``global_layout``, so a launch sees the same memory on every
backend. Variables the kernel does not use take no memory: cooperative_groups.h alone declares
hundreds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qgpu.errors import ResourceError, UnsupportedError, UsageError
from qgpu.machine import limits
from qgpu.toolchain.ptx.ast import Addr, GlobalVar, Kernel, Module, Sym
from qgpu.toolchain.ptx.names import demangle, matches

WORD = limits.WORD_BYTES
TYPED_ARRAYS = {"u8": (8, False), "s8": (8, True), "u16": (16, False), "s16": (16, True),
                "u32": (32, False), "s32": (32, True)}


@dataclass(frozen=True)
class GlobalLayout:
    """Where a kernel's module variables live: byte address of each, in placement order."""

    variables: tuple[GlobalVar, ...]
    addresses: dict[str, int]

    @property
    def limit_word(self) -> int:
        """Argument arrays must end below this word (the guard word under the lowest variable);
        GLOBAL_WORDS when the kernel uses no variables."""
        if not self.addresses:
            return limits.GLOBAL_WORDS
        return min(self.addresses.values()) // WORD - 1

    @property
    def allocations(self) -> list[tuple[int, int]]:
        """(byte address, bytes) of every variable, rounded up to whole words: memory is
        checked a word at a time, so a char array's last word is accessible whole."""
        return [(self.addresses[v.name], _words(v) * WORD) for v in self.variables]

    def initial_words(self, values: dict[str, Any] | None = None) -> dict[int, int]:
        """Word index -> initial value (unsigned 32-bit) of every variable word: its
        initialiser, or the host's value from ``values`` (name -> value, see symbol_bytes)."""
        chosen = resolve_symbols(self.variables, values or {})
        out: dict[int, int] = {}
        for v in self.variables:
            data = chosen.get(v.name, v.init).ljust(_words(v) * WORD, b"\0")
            base = self.addresses[v.name] // WORD
            for i in range(_words(v)):
                out[base + i] = int.from_bytes(data[i * WORD:(i + 1) * WORD], "little")
        return out

    def read_back(self, memory: list[int]) -> dict[str, Any]:
        """Each variable's final value, by its demangled name (see symbol_value)."""
        out = {}
        for v in self.variables:
            base = self.addresses[v.name] // WORD
            raw = b"".join((w & 0xFFFFFFFF).to_bytes(WORD, "little")
                           for w in memory[base:base + _words(v)])
            out[demangle(v.name)] = symbol_value(v, raw[:v.size_bytes])
        return out


def _words(v: GlobalVar) -> int:
    return -(-v.size_bytes // WORD)


def used_variables(kernel: Kernel, module: Module) -> tuple[GlobalVar, ...]:
    """The module variables a kernel names (as an address or a memory operand), in module
    order; a variable the machine cannot hold rejects the kernel here, naming it."""
    names: set[str] = set()
    for ins in kernel.instructions:
        for op in ins.operands:
            base = op.base if isinstance(op, Addr) else op
            if isinstance(base, Sym) and base.name in module.global_vars:
                names.add(base.name)
    used = tuple(v for v in module.globals if v.name in names)
    for v in used:
        if v.error is not None:
            kind = "__constant__" if v.space == "const" else "__device__"
            raise UnsupportedError(f"line {v.line}: `.{v.space}` variable `{v.name}` ({kind} "
                                   f"variable: {v.error}) is not supported")
    return used


def global_layout(kernel: Kernel, module: Module) -> GlobalLayout:
    """Place the kernel's module variables at the top of global memory (module order,
    ascending; ResourceError when they do not fit)."""
    used = used_variables(kernel, module)
    cursor = limits.GLOBAL_WORDS * WORD
    addresses: dict[str, int] = {}
    for v in reversed(used):
        cursor -= _words(v) * WORD
        cursor -= cursor % max(WORD, v.align)
        addresses[v.name] = cursor
        cursor -= WORD  # the guard word below it
    if cursor < limits.GLOBAL_FIRST_WORD * WORD:
        need = sum(_words(v) + 1 for v in used)
        raise ResourceError(
            f"kernel {demangle(kernel.name)} uses {len(used)} __device__/__constant__ "
            f"variables needing {need} words (with a guard word each); global memory holds "
            f"{limits.GLOBAL_WORDS - limits.GLOBAL_FIRST_WORD} words")
    return GlobalLayout(used, {v.name: addresses[v.name] for v in used})


def find_variable(variables: tuple[GlobalVar, ...], name: str) -> GlobalVar:
    """A variable by its PTX name or its C++ name (``lut``, ``ns::lut``)."""
    found = [v for v in variables if matches(v.name, name)]
    if len(found) == 1:
        return found[0]
    names = ", ".join(demangle(v.name) for v in variables) or "(none)"
    if found:
        raise UsageError(f"variable name {name!r} is ambiguous: {names}")
    raise UsageError(f"the kernel uses no __device__/__constant__ variable {name!r}; it uses: "
                     f"{names}")


def resolve_symbols(variables: tuple[GlobalVar, ...], values: dict[str, Any]) -> \
        dict[str, bytes]:
    """Host values for variables (cudaMemcpyToSymbol before the launch), as their bytes."""
    if not isinstance(values, dict):
        raise UsageError("symbols must be a JSON object: {\"name\": value, ...}")
    out = {}
    for name, value in values.items():
        v = find_variable(variables, name)
        out[v.name] = symbol_bytes(v, value)
    return out


def symbol_bytes(v: GlobalVar, value: Any) -> bytes:
    """The bytes of a host value for variable ``v``: an int (a scalar), a list of its elements
    (element width: GlobalVar.element_bits), or ``{"u8": [...]}`` (u8 s8 u16 s16 u32 s32) to
    give the element type explicitly. Shorter lists leave the rest zero."""
    bits = v.element_bits
    if isinstance(value, dict):
        if len(value) != 1 or next(iter(value)) not in TYPED_ARRAYS:
            raise UsageError(f"{demangle(v.name)}: a typed value is written "
                             f"{{\"u8\"|\"s8\"|\"u16\"|\"s16\"|\"u32\"|\"s32\": [...]}}")
        kind, value = next(iter(value.items()))
        bits = TYPED_ARRAYS[kind][0]
    items = value if isinstance(value, list) else [value]
    step = bits // 8
    if len(items) * step > v.size_bytes:
        raise UsageError(f"{demangle(v.name)} holds {v.size_bytes // step} {bits}-bit "
                         f"elements, {len(items)} were given")
    data = bytearray()
    for i, x in enumerate(items):
        if isinstance(x, bool) or not isinstance(x, int) or not -(1 << (bits - 1)) <= x < 1 << bits:
            raise UsageError(f"{demangle(v.name)}[{i}]: expected a {bits}-bit integer, got {x!r}")
        data += (x & ((1 << bits) - 1)).to_bytes(step, "little")
    return bytes(data)


def symbol_value(v: GlobalVar, raw: bytes) -> int | list[int]:
    """A variable's bytes as the host shows them: elements of element_bits (32 and 16 bits
    signed, 8 bits unsigned, like int, short and unsigned char data); a scalar as an int."""
    bits = v.element_bits
    step = bits // 8
    values = [int.from_bytes(raw[i:i + step], "little", signed=bits != 8)
              for i in range(0, len(raw) - step + 1, step)]
    return values[0] if len(values) == 1 and v.size_bytes == step else values
