"""The host's CUDA-driver role: compile sources, place arguments in memory, launch kernels.

This is the Python API behind ``python -m qgpu run``:

    mod = compile_source(open("dot.cu").read())
    result = mod.kernel("dot").launch(grid=(1, 1), block=(4, 1), args=[[1, 2, 3], [4, 5, 6],
                                      {"zeros": 1}, 3])
    result.args[2]  # [32]

Arguments follow the CLI's JSON form: a list of ints is an input array of int32 words, ``{"zeros":
n}`` an output array of n zero words, an int a scalar. Arrays are placed from byte address 4 (word 0
is the null word) with one unallocated guard word after each, so reading one element past an
array is an out-of-bounds error rather than a read of the next array; pointers are passed as
byte addresses. Every argument is checked before anything is allocated or run: a wrong type or
value is an ArgumentTypeError or UsageError naming the parameter (docs/ERRORS.md).
"""

from __future__ import annotations

import os
import re
import reprlib
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import cached_property
from pathlib import Path
from typing import Any

from qgpu.errors import ArgumentTypeError, ResourceError, UsageError
from qgpu.machine import float32, limits
from qgpu.machine.interp import check_launch_shape, run_program, s32
from qgpu.machine.isa import Program
from qgpu.machine.races import Race
from qgpu.toolchain.cuda import (
    MAX_SOURCE_BYTES,
    available_compilers,
    check_source,
    compile_cuda,
    decode_source,
)
from qgpu.toolchain.lower import lower_kernel
from qgpu.toolchain.ptx import ast
from qgpu.toolchain.ptx.globals import TYPED_ARRAYS, GlobalLayout, global_layout
from qgpu.toolchain.ptx.interp import find_kernel, run_kernel, shared_layout
from qgpu.toolchain.ptx.names import demangle, qualified_name
from qgpu.toolchain.ptx.parser import parse_module

BACKENDS = ("interp", "ptx", "model")


@dataclass(frozen=True)
class Placement:
    """Where a launch's arguments live: initial memory, parameter words, array extents."""

    memory: list[int]
    params: list[int]
    arrays: dict[int, tuple[int, int]]  # argument index -> (byte address, words)
    typed: dict[int, tuple[str, int]] = field(default_factory=dict)  # index -> ("u8", count)
    variables: tuple[tuple[int, int], ...] = ()  # (byte address, bytes) of module variables

    @property
    def allocations(self) -> list[tuple[int, int]]:
        return [(addr, 4 * n) for addr, n in self.arrays.values()] + list(self.variables)


class _Short(reprlib.Repr):
    """reprlib's bounded repr, also of ints too long for str() (4,300+ digits is an error)."""

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:
            return f"<an integer of {x.bit_length()} bits>"
        return super().repr_int(x, level)

    def repr_Decimal(self, x: Decimal, level: int) -> str:  # noqa: N802 - reprlib's naming
        """A number from JSON as it was written (the CLI keeps decimals exact)."""
        text = str(x)
        return text if len(text) <= 40 else text[:37] + "..."


_SHORT = _Short()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxstring, _SHORT.maxlong = 2, 4, 2, 40, 40


def short(value: Any) -> str:
    """A bounded repr for messages (a value from outside may be huge or nested 50,000 deep)."""
    return _SHORT.repr(value)


def _int32(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise UsageError(f"{where}: expected an integer, got {short(v)}")
    if not -(1 << 31) <= v < 1 << 32:
        raise UsageError(f"{where}: {short(v)} does not fit in 32 bits")
    return s32(v)


def _count(value: Any, name: str, low: int) -> int:
    """An int parameter that must be at least ``low`` (bool is not a count)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name} must be an int, got {type(value).__name__} "
                                f"{short(value)}")
    if value < low:
        raise UsageError(f"{name} must be at least {low}, got {short(value)}")
    return value


def _dims(value: Any, name: str) -> tuple[int, ...]:
    """grid or block as a tuple of ints; their number and sizes are check_launch_shape's."""
    if not isinstance(value, (tuple, list)) or \
            any(isinstance(v, bool) or not isinstance(v, int) for v in value):
        raise ArgumentTypeError(f"{name} must be a tuple of ints such as (4, 1), got "
                                f"{short(value)}")
    return tuple(value)


def pointer_params(kernel: ast.Kernel) -> frozenset[str]:
    """The parameters the kernel uses as global addresses: the register it loads one into is
    converted by ``cvta`` or is the base of an address (what NVVM and clang write for a
    pointer). A 64-bit integer parameter (size_t, long long) is never used so."""
    return frozenset(_param_registers(kernel, ("mov", "cvta"))[1])


def pointer_kinds(kernel: ast.Kernel) -> dict[str, str | None]:
    """Each pointer parameter -> "f32" when the kernel loads, stores and updates its global
    memory only as f32 (a ``float *``), "int" when only as integers, None otherwise (b32
    accesses, none, or both). A float array takes numbers as C converts them to float and
    reads back as floats; an int array refuses floats."""
    pointers = pointer_params(kernel)
    kinds = _param_registers(kernel, ("mov", "cvta", "add", "sub"))[1]
    return {p: next(iter(kinds[p])) if len(kinds.get(p, ())) == 1 else None for p in pointers}


def _param_registers(kernel: ast.Kernel, through: tuple[str, ...]) \
        -> tuple[dict[str, str], dict[str, set[str]]]:
    """Registers holding a value computed from a parameter (loaded, then passed ``through``
    these opcodes), and each parameter used as an address (``cvta``'d or an address's base)
    -> the kinds ("f32", "int") of the global accesses through it."""
    holds: dict[str, str] = {}
    used: dict[str, set[str]] = {}
    for ins in kernel.instructions:
        ops = ins.operands
        if ins.opcode == "ld" and ins.space == "param" and len(ops) == 2 \
                and isinstance(ops[0], ast.Reg) and isinstance(ops[1], ast.Addr) \
                and isinstance(ops[1].base, ast.Sym):
            holds[ops[0].name] = ops[1].base.name
            continue
        sources = {holds[op.name] for op in ops[1:] if isinstance(op, ast.Reg)
                   and op.name in holds}
        if ins.opcode == "cvta" and sources:
            used.setdefault(next(iter(sources)), set())
        if ins.opcode in through and len(sources) == 1 and isinstance(ops[0], ast.Reg):
            holds[ops[0].name] = next(iter(sources))
        for op in ops:
            if isinstance(op, ast.Addr) and isinstance(op.base, ast.Reg) \
                    and op.base.name in holds:
                kinds = used.setdefault(holds[op.base.name], set())
                if ins.opcode in ("ld", "st", "atom", "red") and ins.space in (None, "global") \
                        and ins.mods[-1] != "b32":
                    kinds.add("f32" if ins.mods[-1] == "f32" else "int")
    return holds, used


NON_FINITE = frozenset({"nan", "inf", "-inf", "+inf", "infinity", "-infinity", "+infinity"})
FLOAT_FORMS = ('a number, "nan", "inf", "-inf" or {"bits": w} (the IEEE-754 word)')


def is_float_element(v: Any) -> bool:
    """Whether a list element makes its array a float array: a number written with a decimal
    point or exponent, a non-finite name, or raw bits."""
    return isinstance(v, (float, Decimal)) or \
        (isinstance(v, str) and v.strip().lower() in NON_FINITE) or \
        (isinstance(v, dict) and list(v) == ["bits"])


def float_word(v: Any, where: str) -> int:
    """A float argument's word: a number rounded to float32 as C converts it (a decimal
    directly, never through a double), a non-finite name, or ``{"bits": w}``."""
    if isinstance(v, dict) and list(v) == ["bits"]:
        bits = v["bits"]
        if isinstance(bits, bool) or not isinstance(bits, int) or not 0 <= bits < 1 << 32:
            raise UsageError(f"{where}: bits must be a 32-bit word 0..0xFFFFFFFF, got "
                             f"{short(bits)}")
        return s32(bits)
    if isinstance(v, str) and v.strip().lower() in NON_FINITE:
        return s32(float32.from_decimal(v.strip().lower().replace("infinity", "inf")))
    if isinstance(v, bool) or not isinstance(v, (int, float, Decimal)):
        raise UsageError(f"{where}: expected {FLOAT_FORMS}, got {short(v)}")
    return s32(float32.from_decimal(v))


def float_words(arg: Any, where: str, kind: str | None = None) -> list[int] | None:
    """The words of a float array argument, or None when it is not one: ``{"f32": [...]}``,
    ``{"bits": [w, ...]}``, a list given to a ``float *`` (``kind`` "f32": its ints convert
    as C does; ``{"zeros": n}`` is n zeros), or, when the kernel does not say (``kind``
    None), a list with a float element."""
    if kind == "f32" and isinstance(arg, dict) and list(arg) == ["zeros"]:
        return None  # zeros are +0.0 as much as 0; typed by the caller
    if kind == "f32" and isinstance(arg, list):
        return [float_word(v, f"{where}[{j}]") for j, v in enumerate(arg)]
    if isinstance(arg, dict) and len(arg) == 1 and next(iter(arg)) in ("f32", "bits"):
        kind, elems = next(iter(arg.items()))
        if not isinstance(elems, list):
            raise UsageError(f"{where}: a float array is written {{\"{kind}\": [...]}}, got "
                             f"{short(elems)}")
        if kind == "bits":
            return [float_word({"bits": w}, f"{where}[{j}]") for j, w in enumerate(elems)]
        return [float_word(v, f"{where}[{j}]") for j, v in enumerate(elems)]
    if kind is None and isinstance(arg, list) and any(is_float_element(v) for v in arg):
        return [float_word(v, f"{where}[{j}]") for j, v in enumerate(arg)]
    return None


def typed_words(arg: dict, where: str) -> tuple[list[int], str, int]:
    """``{"u8": [..]}`` (u8 s8 u16 s16 u32 s32): the elements packed little-endian into words,
    as char/short arrays lie in a GPU's memory; (words, type, element count)."""
    kind, elems = next(iter(arg.items()))
    bits, signed = TYPED_ARRAYS[kind]
    if not isinstance(elems, list):
        raise UsageError(f"{where}: a typed array is written {{\"{kind}\": [ints]}}, got "
                         f"{short(elems)}")
    low, high = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    data = bytearray()
    for j, v in enumerate(elems):
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v < high:
            raise UsageError(f"{where}[{j}]: expected a {kind} value ({low}..{high - 1}), got "
                             f"{short(v)}")
        data += (v & ((1 << bits) - 1)).to_bytes(bits // 8, "little")
    data += bytes(-len(data) % 4)
    words = [s32(int.from_bytes(data[k:k + 4], "little")) for k in range(0, len(data), 4)]
    return words, kind, len(elems)


def typed_values(words: list[int], kind: str, count: int) -> list[int]:
    """Inverse of typed_words: the elements of a typed array read back from its words."""
    bits, signed = TYPED_ARRAYS[kind]
    data = b"".join((w & 0xFFFFFFFF).to_bytes(4, "little") for w in words)
    step = bits // 8
    return [int.from_bytes(data[j * step:(j + 1) * step], "little", signed=signed)
            for j in range(count)]


def place_variables(place: Placement, layout: GlobalLayout,
                    symbols: dict[str, Any] | None = None) -> Placement:
    """Add a kernel's __device__/__constant__ variables (at the top of memory, see
    qgpu.toolchain.ptx.globals) to placed arguments; ``symbols`` sets them first, as
    cudaMemcpyToSymbol does (name -> an int, a list of elements or {"u8": [...]})."""
    if symbols and not layout.variables:
        raise UsageError("symbols were given, but the kernel uses no __device__ or "
                         "__constant__ variable")
    if not layout.variables:
        return place
    used = max((addr // 4 + n for addr, n in place.arrays.values()), default=1)
    if used > layout.limit_word:
        globals_words = limits.GLOBAL_WORDS - layout.limit_word
        raise ResourceError(
            f"the argument arrays need at least {used - 1} words and the kernel's "
            f"__device__/__constant__ variables {globals_words} (with one guard word between "
            f"arrays); global memory holds {limits.GLOBAL_WORDS - limits.GLOBAL_FIRST_WORD} "
            f"words")
    memory = list(place.memory)
    for word, value in layout.initial_words(symbols).items():
        memory[word] = s32(value)
    return Placement(memory, place.params, place.arrays, place.typed,
                     tuple(layout.allocations))


def place_arguments(params: tuple[ast.Param, ...], args: list[Any],
                    pointers: dict[str, str | None] | frozenset[str] = frozenset(),
                    align: int = 4) -> Placement:
    """Lay out argument arrays in global memory and build the parameter words; ``pointers``
    (``pointer_kinds``) names the parameters that take only arrays, with their element kind
    where the kernel tells it; ``align`` (bytes) is where each array starts (a kernel reading
    int4 needs 16, as cudaMalloc gives)."""
    kinds = pointers if isinstance(pointers, dict) else dict.fromkeys(pointers)
    if not isinstance(args, list):
        raise ArgumentTypeError(f"args must be a list with one entry per kernel parameter, got "
                                f"{type(args).__name__}")
    if len(args) != len(params):
        raise UsageError(f"the kernel takes {len(params)} parameters, {len(args)} args were given")
    memory = [0] * limits.GLOBAL_WORDS
    words = [0] * len(params)
    arrays: dict[int, tuple[int, int]] = {}
    typed: dict[int, tuple[str, int]] = {}
    next_word = limits.GLOBAL_FIRST_WORD
    for i, (p, arg) in enumerate(zip(params, args, strict=False)):
        wide = ast.type_width(p.type) == 64
        if p.type == "f32":
            if isinstance(arg, (list, dict)) and not (isinstance(arg, dict) and list(arg) ==
                                                      ["bits"]):
                raise UsageError(f"argument {i} ({p.name}) is a float: pass {FLOAT_FORMS}, "
                                 f"not {short(arg)}")
            words[i] = float_word(arg, f"argument {i} ({p.name})")
            continue
        if not isinstance(arg, (list, dict)) and is_float_element(arg):
            raise UsageError(f"argument {i} ({p.name}) is an integer parameter (.{p.type}), "
                             f"got the float {short(arg)}")
        floats = float_words(arg, f"argument {i}", kinds.get(p.name))
        if floats is not None:
            arg = floats
            typed[i] = ("f32", len(floats))
        elif kinds.get(p.name) == "f32" and isinstance(arg, dict) and list(arg) == ["zeros"]:
            typed[i] = ("f32", arg["zeros"] if isinstance(arg["zeros"], int) else 0)
        if isinstance(arg, dict) and len(arg) == 1 and next(iter(arg)) in TYPED_ARRAYS:
            arg, kind, count = typed_words(arg, f"argument {i}")
            typed[i] = (kind, count)
        if isinstance(arg, dict):
            if list(arg) != ["zeros"]:
                raise UsageError(f"argument {i}: an output array is written {{\"zeros\": n}}, "
                                 f"got {short(arg)}")
            n = arg["zeros"]
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise UsageError(f"argument {i}: zeros must be a non-negative integer, got "
                                 f"{short(n)}")
            size = n
        elif isinstance(arg, list):
            size = len(arg)
        else:
            v = _int32(arg, f"argument {i}")
            if p.name in pointers:
                raise UsageError(f"argument {i} ({p.name}) is a pointer: pass an array (a list "
                                 f"of ints) or {{\"zeros\": n}}, not the integer {v}")
            if wide and not 0 <= v < 1 << 31:
                raise UsageError(f"argument {i} ({p.name}) is a 64-bit parameter: the machine "
                                 f"passes only values in 0..2^31-1 there, got {v}")
            words[i] = v
            continue
        if not wide:
            raise UsageError(f"argument {i}: an array was given for the 32-bit scalar parameter "
                             f"{p.name}")
        next_word = -(-next_word * 4 // align) * align // 4
        if next_word + size > limits.GLOBAL_WORDS:  # checked before anything is allocated
            raise ResourceError(
                f"the argument arrays need at least {next_word - 1 + size} words (with one "
                f"guard word between arrays); global memory holds "
                f"{limits.GLOBAL_WORDS - limits.GLOBAL_FIRST_WORD} words"
            )
        values = [0] * size if isinstance(arg, dict) else arg if floats is not None else \
            [_int32(v, f"argument {i}[{j}]") for j, v in enumerate(arg)]
        memory[next_word:next_word + len(values)] = values
        arrays[i] = (next_word * 4, len(values))
        words[i] = next_word * 4
        next_word += len(values) + 1  # an unallocated guard word: a[n] must not reach b[0]
    return Placement(memory, words, arrays, typed)


def read_back(placement: Placement, args: list[Any], memory: list[int]) -> list[Any]:
    """Final value of every parameter: arrays from memory, scalars as given."""
    out: list[Any] = []
    for i, arg in enumerate(args):
        if i in placement.typed:
            addr, n = placement.arrays[i]
            words = memory[addr // 4:addr // 4 + n]
            kind, count = placement.typed[i]
            out.append([float32.Float32(w) for w in words] if kind == "f32" else
                       typed_values(words, kind, count))
        elif i in placement.arrays:
            addr, n = placement.arrays[i]
            out.append(memory[addr // 4:addr // 4 + n])
        else:
            out.append(arg)
    return out


def vector_span(ins: ast.Instr) -> int:
    """Bytes a vector load or store moves at once (0 for anything else): its alignment."""
    if ins.opcode not in ("ld", "st") or not {"v2", "v4"} & set(ins.mods):
        return 0
    return (2 if "v2" in ins.mods else 4) * ast.type_width(ins.type) // 8


def launch_shape(grid: tuple[int, ...], block: tuple[int, ...]) -> \
        tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Grid and block as (x, y, z), a missing y or z being 1, checked against the machine's
    totals: 16 threads per block and 16 blocks per grid, in any of the three dimensions."""
    for name, dims in (("grid", grid), ("block", block)):
        if not 1 <= len(dims) <= 3 or any(v < 1 for v in dims):
            raise UsageError(f"{name} must be one, two or three positive integers, got "
                             f"{short(dims)}")
    g, b = (*grid, 1, 1)[:3], (*block, 1, 1)[:3]
    if g[2] == 1 and b[2] == 1:
        check_launch_shape(g[:2], b[:2])
    elif b[0] * b[1] * b[2] > limits.MAX_THREADS:
        raise ResourceError(
            f"block {'x'.join(map(str, b))} has {b[0] * b[1] * b[2]} threads; the machine holds "
            f"at most {limits.MAX_THREADS} per block ({limits.MAX_WARPS} warps of "
            f"{limits.WARP_LANES})")
    elif g[0] * g[1] * g[2] > limits.MAX_GRID_BLOCKS:
        raise ResourceError(
            f"grid {'x'.join(map(str, g))} has {g[0] * g[1] * g[2]} blocks; at most "
            f"{limits.MAX_GRID_BLOCKS} thread blocks per launch")
    return g, b


def hidden_3d(grid: tuple[int, int, int], block: tuple[int, int, int]) -> list[int]:
    """The hidden parameters of a 3-D launch's program (lower.select.HIDDEN_3D): the block's
    and the grid's y extent, each with ceil(2^16 / y) to divide the machine's y' = y + z*Y."""
    return [block[1], -(-(1 << 16) // block[1]), grid[1], -(-(1 << 16) // grid[1])]


@dataclass
class LaunchResult:
    """What a launch returns: final arguments, counters and (machine backend) the trace."""

    kernel: str
    backend: str
    args: list[Any] | None  # None: a checked model run that diverged
    stats: dict[str, int]
    trace: list = field(default_factory=list)
    model: dict[str, Any] = field(default_factory=dict)
    """Model backend: prompt_tokens, generated_tokens, and with a check exact (and divergence:
    the first token or word that was not the reference machine's)."""
    symbols: dict[str, Any] = field(default_factory=dict)
    """Final value of each __device__/__constant__ variable the kernel uses, by C++ name."""
    races: list[Race] = field(default_factory=list)
    """Data races between warps or thread blocks the interpreter saw (the model backend:
    with check, its reference replay's), each word named as the kernel names it."""

    @property
    def warnings(self) -> list[str]:
        """The races in words, with what fixes each (docs/ISA.md §9)."""
        return [r.message() for r in self.races]


@dataclass
class Kernel:
    """One kernel of a compiled module; lowering to the machine happens on first use."""

    module: ast.Module
    ptx: ast.Kernel

    @property
    def name(self) -> str:
        """The kernel's name as written in C++ (``ns::kernel``, ``reduce<8>``): a kernel
        without ``extern "C"`` has a mangled PTX name."""
        return qualified_name(self.ptx.name)

    @cached_property
    def program(self) -> Program:
        return lower_kernel(self.ptx, self.module)

    @cached_property
    def program_3d(self) -> Program:
        """The program for launches with a z extent: they run as 2-D machine launches
        (x, y*z), and the kernel's y and z come from hidden parameters (docs/ISA.md)."""
        return lower_kernel(self.ptx, self.module, three_d=True)

    @cached_property
    def variables(self) -> GlobalLayout:
        """Where the kernel's __device__/__constant__ variables live in global memory."""
        return global_layout(self.ptx, self.module)

    def place(self, args: list[Any], symbols: dict[str, Any] | None = None) -> Placement:
        """Arguments and module variables in memory, and the parameter words."""
        align = max([4, *(vector_span(ins) for ins in self.ptx.instructions)])
        place = place_arguments(self.ptx.params, args, self.pointers, align)
        return place_variables(place, self.variables, symbols)

    @cached_property
    def pointers(self) -> dict[str, str | None]:
        """The parameters that take arrays only, with their element kind
        (``pointer_kinds``)."""
        return pointer_kinds(self.ptx)

    def launch(
        self,
        *,
        grid: tuple[int, int],
        block: tuple[int, int],
        args: list[Any],
        dynamic_shared: int = 0,
        backend: str = "interp",
        step_limit: int | None = None,
        model: Any = None,
        check: bool = False,
        symbols: dict[str, Any] | None = None,
    ) -> LaunchResult:
        """Run the kernel on a backend: "interp" (the machine), "ptx" (the PTX oracle) or
        "model" (the GPU inside a merged model: `model` is a runtime.GpuModel; `check` replays
        the launch on the machine and compares every generated token and global word; the
        step limit counts generated tokens). grid and block are (x[, y[, z]]); ``symbols``
        sets __device__/__constant__ variables before the launch (name -> value, as
        cudaMemcpyToSymbol), and the result's ``symbols`` holds their final values."""
        if not isinstance(backend, str) or backend not in BACKENDS:
            raise UsageError(f"unknown backend {short(backend)}; choose one of "
                             f"{', '.join(BACKENDS)}")
        grid3, block3 = launch_shape(_dims(grid, "grid"), _dims(block, "block"))
        three_d = grid3[2] > 1 or block3[2] > 1
        grid, block = (grid3[0], grid3[1] * grid3[2]), (block3[0], block3[1] * block3[2])
        dynamic_shared = _count(dynamic_shared, "dynamic_shared", 0)
        if step_limit is not None:
            step_limit = _count(step_limit, "step_limit", 1)
        if not isinstance(check, bool):
            raise ArgumentTypeError(f"check must be a bool, got {type(check).__name__}")
        if backend != "model" and (model is not None or check):
            raise UsageError("model and check belong to backend='model'")
        place = self.place(args, symbols)
        if backend != "ptx" and three_d:
            place = Placement(place.memory, place.params + hidden_3d(grid3, block3),
                              place.arrays, place.typed, place.variables)
        if backend == "model":
            return self._launch_model(grid, block, args, place, dynamic_shared, step_limit,
                                      model, check, three_d)
        if backend == "interp":
            prog = self.program_3d if three_d else self.program
            run = run_program(
                prog, grid=grid, block=block, params=place.params,
                memory=place.memory, dynamic_shared=dynamic_shared,
                allocations=place.allocations,
                step_limit=step_limit or limits.DEFAULT_STEP_LIMIT,
            )
            stats = dict(run.stats, rom_blocks=len(prog.blocks),
                         instructions=prog.instruction_count(), spill_slots=prog.local_words)
            return LaunchResult(self.name, backend, read_back(place, args, run.memory), stats,
                                run.trace, symbols=self.variables.read_back(run.memory),
                                races=self.name_races(run.races, place, dynamic_shared))
        ptx_run = run_kernel(
            self.ptx, self.module, grid=grid3, block=block3, params=place.params,
            memory=place.memory, dynamic_shared=dynamic_shared, allocations=place.allocations,
            **({"step_limit": step_limit} if step_limit else {}),
        )
        return LaunchResult(self.name, backend, read_back(place, args, ptx_run.memory),
                            dict(ptx_run.stats),
                            symbols=self.variables.read_back(ptx_run.memory),
                            races=self.name_races(ptx_run.races, place, dynamic_shared))

    def _launch_model(self, grid: tuple[int, int], block: tuple[int, int], args: list[Any],
                      place: Placement, dynamic_shared: int, step_limit: int | None, model: Any,
                      check: bool, three_d: bool = False) -> LaunchResult:
        from qgpu.protocol import Launch
        from qgpu.runtime import DEFAULT_TOKEN_LIMIT, GpuModel, run_checked, run_launch

        if not isinstance(model, GpuModel):
            raise ArgumentTypeError(f"the model backend needs model=GpuModel.load(BUILD_DIR) "
                                    f"(--model BUILD_DIR), got {type(model).__name__}")
        prog = self.program_3d if three_d else self.program
        launch = Launch.checked(prog, grid, block, place, dynamic_shared)
        limit = step_limit or DEFAULT_TOKEN_LIMIT
        run = run_checked(model, launch, token_limit=limit) \
            if check else run_launch(model, launch, token_limit=limit)
        info: dict[str, Any] = {"prompt_tokens": run.prompt_tokens,
                                "generated_tokens": len(run.generated), "engine": model.engine,
                                "decode_step": model.decode_step,
                                "seconds": {"load": model.load_seconds, **run.seconds}}
        if check:
            info["exact"] = run.exact
            if run.divergence:
                info["divergence"] = run.divergence
        result = None if run.memory is None else read_back(place, args, run.memory)
        stats = {"rom_blocks": len(prog.blocks), "instructions": prog.instruction_count()}
        final = {} if run.memory is None else self.variables.read_back(run.memory)
        return LaunchResult(self.name, "model", result, stats, model=info, symbols=final,
                            races=self.name_races(run.races, place, dynamic_shared))

    def name_races(self, races: list[Race], place: Placement, dynamic_shared: int = 0) \
            -> list[Race]:
        """Each race's word as the kernel names it — an argument array's element (``arg
        2[5]``), a __device__ variable's, a shared array's — so a warning points into the
        source rather than at an address."""
        return [replace(r, name=self._word_name(r.space, r.address, place, dynamic_shared))
                for r in races]

    def _word_name(self, space: str, address: int, place: Placement,
                   dynamic_shared: int) -> str | None:
        if space == "global":
            for i, (start, words) in place.arrays.items():
                if start <= address < start + 4 * words:
                    j = (address - start) // 4
                    if i not in place.typed or place.typed[i][0] == "f32" or \
                            TYPED_ARRAYS[place.typed[i][0]][0] == 32:
                        return f"arg {i}[{j}]"
                    per = 32 // TYPED_ARRAYS[place.typed[i][0]][0]
                    return f"arg {i}[{j * per}..{j * per + per - 1}]"
            for v in self.variables.variables:
                start = self.variables.addresses[v.name]
                if start <= address < start + v.size_bytes:
                    return demangle(v.name) + (f" word {(address - start) // 4}"
                                               if v.size_bytes > 4 else "")
            return None
        layout = shared_layout(self.ptx, self.module, dynamic_shared)
        words = all(ast.type_width(ins.type) == 32 for ins in self.ptx.instructions
                    if ins.opcode in ("ld", "st", "atom", "red") and ins.space == "shared")
        for decl in (*self.module.module_shared, *self.ptx.shared):
            start = layout.offsets[decl.name]
            size = dynamic_shared if decl.extern else decl.size_bytes
            if start <= address < start + size:
                name = _variable_name(decl.name)
                # 32-bit accesses only: an int array, whose index the word's is
                return f"{name}[{(address - start) // 4}]" if words else \
                    f"{name} byte {address - start}"
        return None


def _variable_name(symbol: str) -> str:
    """A shared array's C++ name: NVVM mangles a function's static ``__shared__ int s[8]`` as
    ``_ZZ<function>E1s``, which ``demangle`` leaves alone."""
    m = re.fullmatch(r"_ZZ.*E(\d+)([A-Za-z_]\w*)", symbol)
    if m and len(m.group(2)) == int(m.group(1)):
        return m.group(2)
    return demangle(symbol)


@dataclass
class CompiledModule:
    """PTX text, where it came from, and its parsed form."""

    ptx: str
    compiler: str
    parsed: ast.Module

    warnings: list[str] = field(default_factory=list)
    """The compiler's warnings, one entry per diagnostic (empty for PTX given as is)."""

    def kernel(self, name: str | None = None) -> Kernel:
        """The kernel called ``name`` (its C++ name is enough); None if the module has one."""
        if name is not None and not isinstance(name, str):
            raise ArgumentTypeError(f"kernel name must be a str or None, got "
                                    f"{type(name).__name__}")
        if not self.parsed.kernels and not getattr(self.parsed, "rejected", ()):
            raise UsageError("the source defines no kernel (an extern \"C\" __global__ "
                             "function)")
        return Kernel(self.parsed, find_kernel(self.parsed, name))

    @property
    def kernel_names(self) -> list[str]:
        """Every kernel's C++ name, in source order (a rejected one raises its reason when it
        is picked)."""
        entries = sorted([*self.parsed.kernels, *self.parsed.rejected], key=lambda k: k.line)
        return [qualified_name(k.name) for k in entries]


def load_ptx(ptx: str, compiler: str = "ptx", *, filename: str = "kernel.ptx") -> \
        CompiledModule:
    """Wrap PTX text (already compiled elsewhere); checked like a CUDA source first."""
    return CompiledModule(ptx, compiler, parse_module(check_source(ptx, filename)))


def compile_source(source: str, *, filename: str = "kernel.cu", compiler: str = "auto",
                   untrusted: bool = False) -> CompiledModule:
    """CUDA source -> parsed PTX module (NVRTC, nvcc or clang; see qgpu.toolchain.cuda).
    ``untrusted``: a server's user wrote it — refused where no compiler can be confined."""
    result = compile_cuda(source, filename=filename, compiler=compiler, untrusted=untrusted)
    return CompiledModule(result.ptx, result.compiler, parse_module(result.ptx),
                          result.warnings)


def _suite_dir() -> Path:
    """The kernel suite's CUDA sources and committed PTX: ``kernels/`` beside the package in a
    checkout, ``qgpu/kernels/`` where a wheel installed them."""
    package = Path(__file__).resolve().parent
    installed = package / "kernels"
    return installed if installed.is_dir() else package.parent / "kernels"


SUITE_DIR = _suite_dir()


def read_source(path: str | os.PathLike) -> str:
    """A source file's text, or a UsageError saying why it cannot be read (missing, a
    directory, not a regular file, unreadable) and a ResourceError past MAX_SOURCE_BYTES,
    checked before reading it."""
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentTypeError(f"path must be a str or a Path, got {type(path).__name__}")
    if "\0" in str(path):
        raise UsageError(f"{short(str(path))}: a path with a NUL character")
    path = Path(path)
    try:
        if path.is_dir():
            raise UsageError(f"{path} is a directory, not a source file")
        if not path.exists():
            raise UsageError(f"no such file: {path}")
        if not path.is_file():
            raise UsageError(f"{path} is not a regular file")
        size = path.stat().st_size
        if size > MAX_SOURCE_BYTES:
            raise ResourceError(f"{path} has {size:,} bytes; sources (CUDA or PTX) are at most "
                                f"{MAX_SOURCE_BYTES:,} bytes (256 KiB)")
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {short(str(path))}: {exc.strerror or exc}") from None
    return decode_source(data, path.name)


def compile_file(path: str | os.PathLike, *, compiler: str = "auto") -> CompiledModule:
    """A .ptx file as is; a .cu file through the compiler, or — for a suite kernel on a machine
    with no CUDA compiler — its committed PTX (kept current by tests/toolchain/test_cuda.py)."""
    text = read_source(path)
    path = Path(path)
    if path.suffix == ".ptx":
        return load_ptx(text, filename=path.name)
    committed = SUITE_DIR / "ptx" / f"{path.stem}.ptx"
    if compiler == "auto" and not available_compilers() and committed.is_file() \
            and path.resolve().parent == SUITE_DIR:
        return load_ptx(committed.read_text(encoding="utf-8"), "committed")
    return compile_source(text, filename=path.name, compiler=compiler)
