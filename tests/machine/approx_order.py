"""Regenerate ``qgpu.machine.approx.ORDER``: for each macro, the program order of its steps that
makes the fewest generated tokens (then ROM blocks) on the machine, found by a local search.

The lowering cuts a basic block into ROM blocks greedily, in program order (layout.pack_slots),
and a value a block writes for a later block costs a write-back frame (up to 4 tokens per lane),
so the order in which a macro's independent steps are written matters: the builders write them
in a natural dataflow order, and this search moves one step at a time (anywhere between its
operands' writers and its first reader), keeping every move that does not add tokens, on a
kernel that loads two floats, runs the instruction and stores the result (one warp).

    python -m tests.machine.approx_order [--fresh]   # prints ORDER for approx.py
"""

from __future__ import annotations

import random
import sys

from qgpu import protocol as T
from qgpu.driver import load_ptx, place_arguments
from qgpu.machine import approx
from qgpu.machine.interp import check_launch
from qgpu.toolchain.lower import select
from qgpu.toolchain.lower.select import core
from qgpu.toolchain.lower.select.float_approx import APPROX_OPCODES, FloatApprox

KERNEL = """.version 8.0
.target sm_75
.address_size 64
.visible .entry k(.param .u64 k_param_0, .param .u64 k_param_1)
{{
    .reg .f32 %f<4>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [k_param_0];
    ld.param.u64 %rd2, [k_param_1];
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 8;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.f32 %f1, [%rd6];
    ld.global.f32 %f2, [%rd6+4];
    {line}
    add.s64 %rd7, %rd4, %rd5;
    st.global.f32 [%rd7], %f3;
    ret;
}}
"""
ARGS = [{"f32": [0.5, 3.0, 1.25, 2.0, -2.0, 7.0, 3.0, 0.1]}, {"f32": [0.0] * 8}]
INSTRUCTIONS = {  # macro name -> the PTX line that uses it
    m: f"{m}.f32 %f3, %f1{', %f2' if m.startswith('div') else ''};"
    for m in ["ex2.approx", "ex2.approx.ftz", "lg2.approx", "lg2.approx.ftz", "sin.approx",
              "sin.approx.ftz", "cos.approx", "cos.approx.ftz", "tanh.approx", "rsqrt.approx",
              "rsqrt.approx.ftz", "sqrt.approx", "sqrt.approx.ftz", "rcp.approx",
              "rcp.approx.ftz", "div.approx", "div.approx.ftz", "div.full", "div.full.ftz"]
}


def with_approx(selector: type) -> type:
    """Selector's class with FloatApprox among its bases, before FloatDivide (the edit that
    select/__init__.py needs)."""
    from qgpu.toolchain.lower.select.float_divide import FloatDivide

    bases = list(selector.__bases__)
    bases.insert(bases.index(FloatDivide) if FloatDivide in bases else len(bases), FloatApprox)
    return type("Selector", tuple(bases), {"__doc__": selector.__doc__})


def use_approx_lowering() -> None:
    """Select the approximate instructions even where Selector does not include the mixin
    yet and core.FLOAT_OPCODES does not name their opcodes (what the fixture of
    tests/toolchain/test_float_approx.py patches for a test)."""
    if FloatApprox not in select.Selector.__mro__:
        select.Selector = with_approx(select.Selector)
    core.FLOAT_OPCODES = core.FLOAT_OPCODES | APPROX_OPCODES


def cost(line: str) -> tuple[int, int]:
    """(generated tokens, executed blocks) of the kernel around ``line``."""
    kernel = load_ptx(KERNEL.format(line=line)).kernel("k")
    run = kernel.launch(grid=(1,), block=(4,), args=ARGS, backend="interp")
    place = place_arguments(kernel.ptx.params, ARGS)
    shared = check_launch(kernel.program, (1, 1), (4, 1), place.params, place.memory, 0)
    # T.Launch.checked refuses float programs (no float unit in the model yet): count anyway
    launch = T.Launch(kernel.program, (1, 1), (4, 1), place.params, place.memory,
                      place.allocations, shared // 4)
    return len(T.expected_tokens(launch, run.trace)), run.stats["blocks_executed"]


def _reads(s: approx.Step) -> set[str]:
    names = {s.a} | ({s.b} if isinstance(s.b, str) else set())
    if isinstance(s.c, str):
        names.add(s.c)
    return names - {approx.ZERO}


def search(name: str, iterations: int = 1500, seed: int = 0) -> tuple[list[str], tuple, tuple]:
    """The best order found for a macro: (step names, cost before, cost after)."""
    key, ftz = name.removesuffix(".ftz"), name.endswith(".ftz")
    key = key if key.startswith("div") else key.removesuffix(".approx")
    original = approx.macro(key, ftz)  # the current order: the search goes on from it
    line = INSTRUCTIONS[name]
    rng = random.Random(seed)

    def measure(steps: list[approx.Step]) -> tuple[int, int]:
        approx.ORDER[name] = " ".join(s.d for s in steps)
        approx.macro.cache_clear()
        return cost(line)

    saved = approx.ORDER.pop(name, None)
    cur = list(original.steps)
    start = best = measure(cur)
    for _ in range(iterations):
        cand = list(cur)
        i = rng.randrange(len(cand) - 1)
        step = cand.pop(i)
        reads = _reads(step)
        lo = max([k + 1 for k, t in enumerate(cand) if t.d in reads] + [0])
        hi = min([k for k, t in enumerate(cand) if step.d in _reads(t)] + [len(cand) - 1])
        if hi < lo:
            continue
        cand.insert(rng.randint(lo, hi), step)
        c = measure(cand)
        if c <= best:
            cur, best = cand, c
    if saved is not None:
        approx.ORDER[name] = saved
    approx.macro.cache_clear()
    return [s.d for s in cur], start, best


def main() -> None:
    use_approx_lowering()
    if "--fresh" in sys.argv:  # from the builders' order
        approx.ORDER.clear()
    approx.macro.cache_clear()
    base = cost("mov.f32 %f3, %f1;")
    found = {}
    for name in INSTRUCTIONS:
        order, start, best = search(name)
        found[name] = order
        print(f"# {name}: {start[0] - base[0]} -> {best[0] - base[0]} tokens, "
              f"{start[1] - base[1]} -> {best[1] - base[1]} blocks", file=sys.stderr)
    print("ORDER = {")
    for name, order in found.items():
        text = " ".join(order)
        print(f'    "{name}": "{text}",')
    print("}")


if __name__ == "__main__":
    main()
