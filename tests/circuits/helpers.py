"""Shared helpers of the circuit tests: a suite launch with the token stream the circuit must
produce, and the machine state it must hold afterwards."""

from __future__ import annotations

from qgpu import protocol as T
from qgpu.driver import place_arguments
from qgpu.machine import rom
from qgpu.machine.interp import run_program
from qgpu.suite.runner import by_name, make_args, suite_module


def launch_stream(name: str):
    """A suite kernel's launch on its seed-0 arguments, the reference run, and the whole token
    stream: the prompt, then every token the model must generate."""
    k = by_name(name)
    grid, block = k.grid, k.block
    args = make_args(k, 0)
    kernel = suite_module(k).kernel(name)
    prog = kernel.program
    place = place_arguments(kernel.ptx.params, args)
    run = run_program(prog, grid=grid, block=block, params=place.params, memory=place.memory,
                      dynamic_shared=k.dynamic_shared, allocations=place.allocations)
    launch = T.Launch.checked(prog, grid, block, place, k.dynamic_shared)
    return launch, run, T.prompt_tokens(launch) + T.expected_tokens(launch, run.trace)


def value(bits: list[int]) -> int:
    """The integer of bits read from a bank or feature, least significant first."""
    return sum(b << i for i, b in enumerate(bits))


def expected_registers(launch: T.Launch, run) -> dict[tuple[int, int, int], int]:
    """(lane, warp, register) -> the last live-out value written back (what the model holds)."""
    live = rom.live_out(launch.program)
    regs: dict[tuple[int, int, int], int] = {}
    for rec in run.trace:
        for lane, r, v, _ in rec.regs:
            if live[rec.block].regs >> r & 1:
                regs[(lane, rec.warp, r)] = v & 0xFFFFFFFF
    return regs
