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
import reprlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from qgpu.errors import ArgumentTypeError, ResourceError, UsageError
from qgpu.machine import limits
from qgpu.machine.interp import check_launch_shape, run_program, s32
from qgpu.machine.isa import Program
from qgpu.toolchain.cuda import (
    MAX_SOURCE_BYTES,
    available_compilers,
    check_source,
    compile_cuda,
    decode_source,
)
from qgpu.toolchain.lower import lower_kernel
from qgpu.toolchain.ptx import ast
from qgpu.toolchain.ptx.interp import find_kernel, run_kernel
from qgpu.toolchain.ptx.parser import parse_module

BACKENDS = ("interp", "ptx", "model")


@dataclass(frozen=True)
class Placement:
    """Where a launch's arguments live: initial memory, parameter words, array extents."""

    memory: list[int]
    params: list[int]
    arrays: dict[int, tuple[int, int]]  # argument index -> (byte address, words)

    @property
    def allocations(self) -> list[tuple[int, int]]:
        return [(addr, 4 * n) for addr, n in self.arrays.values()]


_SHORT = reprlib.Repr()
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
    holds: dict[str, str] = {}  # register -> the parameter it was loaded from or copied of
    used: set[str] = set()
    for ins in kernel.instructions:
        ops = ins.operands
        if ins.opcode == "ld" and ins.space == "param" and len(ops) == 2 \
                and isinstance(ops[0], ast.Reg) and isinstance(ops[1], ast.Addr) \
                and isinstance(ops[1].base, ast.Sym):
            holds[ops[0].name] = ops[1].base.name
            continue
        if ins.opcode in ("mov", "cvta") and len(ops) == 2 and isinstance(ops[1], ast.Reg) \
                and ops[1].name in holds:
            if ins.opcode == "cvta":
                used.add(holds[ops[1].name])
            elif isinstance(ops[0], ast.Reg):
                holds[ops[0].name] = holds[ops[1].name]
        used.update(holds[op.base.name] for op in ops
                    if isinstance(op, ast.Addr) and isinstance(op.base, ast.Reg)
                    and op.base.name in holds)
    return frozenset(used)


def place_arguments(params: tuple[ast.Param, ...], args: list[Any],
                    pointers: frozenset[str] = frozenset()) -> Placement:
    """Lay out argument arrays in global memory and build the parameter words; ``pointers``
    (``pointer_params``) names the parameters that take only arrays."""
    if not isinstance(args, list):
        raise ArgumentTypeError(f"args must be a list with one entry per kernel parameter, got "
                                f"{type(args).__name__}")
    if len(args) != len(params):
        raise UsageError(f"the kernel takes {len(params)} parameters, {len(args)} args were given")
    memory = [0] * limits.GLOBAL_WORDS
    words = [0] * len(params)
    arrays: dict[int, tuple[int, int]] = {}
    next_word = limits.GLOBAL_FIRST_WORD
    for i, (p, arg) in enumerate(zip(params, args, strict=False)):
        wide = ast.type_width(p.type) == 64
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
        if next_word + size > limits.GLOBAL_WORDS:  # checked before anything is allocated
            raise ResourceError(
                f"the argument arrays need at least {next_word - 1 + size} words (with one "
                f"guard word between arrays); global memory holds "
                f"{limits.GLOBAL_WORDS - limits.GLOBAL_FIRST_WORD} words"
            )
        values = [0] * size if isinstance(arg, dict) else \
            [_int32(v, f"argument {i}[{j}]") for j, v in enumerate(arg)]
        memory[next_word:next_word + len(values)] = values
        arrays[i] = (next_word * 4, len(values))
        words[i] = next_word * 4
        next_word += len(values) + 1  # an unallocated guard word: a[n] must not reach b[0]
    return Placement(memory, words, arrays)


def read_back(placement: Placement, args: list[Any], memory: list[int]) -> list[Any]:
    """Final value of every parameter: arrays from memory, scalars as given."""
    out: list[Any] = []
    for i, arg in enumerate(args):
        if i in placement.arrays:
            addr, n = placement.arrays[i]
            out.append(memory[addr // 4:addr // 4 + n])
        else:
            out.append(arg)
    return out


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


@dataclass
class Kernel:
    """One kernel of a compiled module; lowering to the machine happens on first use."""

    module: ast.Module
    ptx: ast.Kernel

    @property
    def name(self) -> str:
        return self.ptx.name

    @cached_property
    def program(self) -> Program:
        return lower_kernel(self.ptx, self.module)

    @cached_property
    def pointers(self) -> frozenset[str]:
        """The parameters that take arrays only (``pointer_params``)."""
        return pointer_params(self.ptx)

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
    ) -> LaunchResult:
        """Run the kernel on a backend: "interp" (the machine), "ptx" (the PTX oracle) or
        "model" (the GPU inside a merged model: `model` is a runtime.GpuModel; `check` replays
        the launch on the machine and compares every generated token and global word; the
        step limit counts generated tokens)."""
        if not isinstance(backend, str) or backend not in BACKENDS:
            raise UsageError(f"unknown backend {short(backend)}; choose one of "
                             f"{', '.join(BACKENDS)}")
        grid, block = _dims(grid, "grid"), _dims(block, "block")
        check_launch_shape(grid, block)
        dynamic_shared = _count(dynamic_shared, "dynamic_shared", 0)
        if step_limit is not None:
            step_limit = _count(step_limit, "step_limit", 1)
        if not isinstance(check, bool):
            raise ArgumentTypeError(f"check must be a bool, got {type(check).__name__}")
        if backend != "model" and (model is not None or check):
            raise UsageError("model and check belong to backend='model'")
        place = place_arguments(self.ptx.params, args, self.pointers)
        if backend == "model":
            return self._launch_model(grid, block, args, place, dynamic_shared, step_limit,
                                      model, check)
        if backend == "interp":
            prog = self.program
            run = run_program(
                prog, grid=grid, block=block, params=place.params,
                memory=place.memory, dynamic_shared=dynamic_shared,
                allocations=place.allocations,
                step_limit=step_limit or limits.DEFAULT_STEP_LIMIT,
            )
            stats = dict(run.stats, rom_blocks=len(prog.blocks),
                         instructions=prog.instruction_count(), spill_slots=prog.local_words)
            return LaunchResult(self.name, backend, read_back(place, args, run.memory), stats,
                                run.trace)
        ptx_run = run_kernel(
            self.ptx, self.module, grid=grid, block=block, params=place.params,
            memory=place.memory, dynamic_shared=dynamic_shared, allocations=place.allocations,
            **({"step_limit": step_limit} if step_limit else {}),
        )
        return LaunchResult(self.name, backend, read_back(place, args, ptx_run.memory),
                            dict(ptx_run.stats))

    def _launch_model(self, grid: tuple[int, int], block: tuple[int, int], args: list[Any],
                      place: Placement, dynamic_shared: int, step_limit: int | None, model: Any,
                      check: bool) -> LaunchResult:
        from qgpu.protocol import Launch
        from qgpu.runtime import DEFAULT_TOKEN_LIMIT, GpuModel, run_checked, run_launch

        if not isinstance(model, GpuModel):
            raise ArgumentTypeError(f"the model backend needs model=GpuModel.load(BUILD_DIR) "
                                    f"(--model BUILD_DIR), got {type(model).__name__}")
        prog = self.program
        launch = Launch.checked(prog, grid, block, place, dynamic_shared)
        limit = step_limit or DEFAULT_TOKEN_LIMIT
        run = run_checked(model, launch, dynamic_shared=dynamic_shared, token_limit=limit) \
            if check else run_launch(model, launch, token_limit=limit)
        info: dict[str, Any] = {"prompt_tokens": run.prompt_tokens,
                                "generated_tokens": len(run.generated), "engine": model.engine,
                                "seconds": {"load": model.load_seconds, **run.seconds}}
        if check:
            info["exact"] = run.exact
            if run.divergence:
                info["divergence"] = run.divergence
        result = None if run.memory is None else read_back(place, args, run.memory)
        stats = {"rom_blocks": len(prog.blocks), "instructions": prog.instruction_count()}
        return LaunchResult(self.name, "model", result, stats, model=info)


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
        return [k.name for k in self.parsed.kernels]


def load_ptx(ptx: str, compiler: str = "ptx", *, filename: str = "kernel.ptx") -> \
        CompiledModule:
    """Wrap PTX text (already compiled elsewhere); checked like a CUDA source first."""
    return CompiledModule(ptx, compiler, parse_module(check_source(ptx, filename)))


def compile_source(source: str, *, filename: str = "kernel.cu", compiler: str = "auto") -> \
        CompiledModule:
    """CUDA source -> parsed PTX module (NVRTC, nvcc or clang; see qgpu.toolchain.cuda)."""
    result = compile_cuda(source, filename=filename, compiler=compiler)
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
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise UsageError(f"cannot read {short(str(path))}: "
                         f"{getattr(exc, 'strerror', None) or exc}") from None
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
