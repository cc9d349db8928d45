"""Shared helpers for the PTX front-end tests: fixtures on disk, memory images, launches."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from qgpu.machine import limits
from qgpu.toolchain.ptx.ast import Kernel, Module
from qgpu.toolchain.ptx.interp import PtxRun, find_kernel, run_kernel
from qgpu.toolchain.ptx.parser import parse_module

SAMPLES = Path(__file__).resolve().parents[2] / "ptx_samples"
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1


def sample(name: str) -> str:
    """Text of a committed PTX fixture (nvcc 13.0 output unless the name says otherwise)."""
    return (SAMPLES / name).read_text(encoding="utf-8")


@functools.cache
def module(name: str) -> Module:
    return parse_module(sample(name))


def parse_kernel(text: str, name: str | None = None) -> Kernel:
    """Parse a module and take one kernel: a kernel outside the subset raises here (a module's
    other kernels stay usable)."""
    return find_kernel(parse_module(text), name)


def s32(value: int) -> int:
    """Signed view of a 32-bit pattern (what memory words hold)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >> 31 else value


def isolate(text: str, kernel: str, *keep: str) -> str:
    """Blank every line except the header, lines containing a ``keep`` string and one kernel.

    Line numbers stay those of the fixture, so errors can be checked against it.
    """
    lines = text.split("\n")
    start = next(i for i, ln in enumerate(lines) if re.match(rf"\.visible \.entry {kernel}\(", ln))
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    kept = []
    for i, ln in enumerate(lines):
        header = ln.startswith((".version", ".target", ".address_size"))
        if start <= i <= end or header or any(k in ln for k in keep):
            kept.append(ln)
        else:
            kept.append("")
    return "\n".join(kept)


def line_of(text: str, fragment: str) -> int:
    """1-based line of the first line containing ``fragment``."""
    return next(i + 1 for i, ln in enumerate(text.split("\n")) if fragment in ln)


class Memory:
    """A global memory image that hands out argument arrays after the null word."""

    def __init__(self) -> None:
        self.words = [0] * limits.GLOBAL_WORDS
        self.next_word = limits.GLOBAL_FIRST_WORD
        self.allocations: list[tuple[int, int]] = []

    def array(self, values: list[int] | int) -> int:
        """Allocate an array (values, or n zeros) and return its byte address."""
        data = [0] * values if isinstance(values, int) else [s32(v) for v in values]
        first = self.next_word
        self.words[first : first + len(data)] = data
        self.next_word += len(data)
        assert self.next_word <= limits.GLOBAL_WORDS, "test memory overflow"
        self.allocations.append((first * 4, len(data) * 4))
        return first * 4


def read(run: PtxRun, address: int, n: int) -> list[int]:
    return run.memory[address // 4 : address // 4 + n]


def launch(mod: Module | str, kernel: str | None, params: list[int], mem: Memory,
           **kw: object) -> PtxRun:
    """Run a kernel of a fixture (by file name) or of a parsed module on ``mem``."""
    m = module(mod) if isinstance(mod, str) else mod
    kw.setdefault("grid", (1, 1))
    kw.setdefault("block", (16, 1))
    kw.setdefault("allocations", mem.allocations)
    return run_kernel(find_kernel(m, kernel), m, params=params, memory=mem.words, **kw)


def entry(body: str, params: str = ".param .u64 k_param_0", decls: str = "") -> str:
    """A hand-written one-kernel module named ``k``."""
    return (f".version 9.0\n.target sm_75\n.address_size 64\n{decls}\n"
            f".visible .entry k({params})\n{{\n{body}\n}}\n")


_ALU = """
    .reg .pred %p<8>;
    .reg .f32 %f<16>;
    .reg .b16 %rs<8>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<32>;
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd2, [k_param_1];
    ld.param.u64 %rd3, [k_param_2];
    ld.param.u64 %rd4, [k_param_3];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd1, %rd5;
    ld.global.f32 %f1, [%rd6];
    ld.global.u32 %r2, [%rd6];
    add.s64 %rd7, %rd2, %rd5;
    ld.global.f32 %f2, [%rd7];
    ld.global.u32 %r3, [%rd7];
    add.s64 %rd8, %rd3, %rd5;
    ld.global.f32 %f3, [%rd8];
    ld.global.u32 %r4, [%rd8];
    mul.wide.u32 %rd9, %r1, 16;
    add.s64 %rd10, %rd4, %rd9;
    mov.u32 %r10, 0;
    mov.u32 %r11, 0;
    mov.u32 %r12, 0;
    mov.u32 %r13, 0;
{lines}
    st.global.u32 [%rd10], %r10;
    st.global.u32 [%rd10+4], %r11;
    st.global.u32 [%rd10+8], %r12;
    st.global.u32 [%rd10+12], %r13;
    ret;
"""


@functools.cache
def _alu_module(lines: str) -> Module:
    params = ", ".join(f".param .u64 k_param_{i}" for i in range(4))
    return parse_module(entry(_ALU.replace("{lines}", lines), params))


def alu(lines: str, a: list[int], b: list[int] | None = None,
        c: list[int] | None = None) -> list[tuple[int, int, int, int]]:
    """Run ``lines`` for thread t with %f1/%r2 = a[t], %f2/%r3 = b[t], %f3/%r4 = c[t] (words);
    the results are %r10..%r13 of every thread, as ``read`` gives them (16 threads a launch)."""
    out: list[tuple[int, int, int, int]] = []
    for start in range(0, len(a), 16):
        chunk = [xs[start:start + 16] if xs is not None else [0] * len(a[start:start + 16])
                 for xs in (a, b, c)]
        n = len(chunk[0])
        mem = Memory()
        ptrs = [mem.array(list(xs)) for xs in chunk]
        dst = mem.array(4 * n)
        result = launch(_alu_module(lines), "k", [*ptrs, dst], mem, block=(n, 1))
        got = read(result, dst, 4 * n)
        out += [tuple(got[4 * t:4 * t + 4]) for t in range(n)]  # type: ignore[misc]
    return out
