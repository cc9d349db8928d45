"""The prompt: everything the host knows before a launch (ROM, parameters, global memory, the
launch shape), as tokens."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from qgpu.errors import UnsupportedError
from qgpu.machine import limits, rom
from qgpu.machine.interp import MachineRun, check_launch, run_program
from qgpu.machine.isa import FLOAT_OPS, Program, format_instr
from qgpu.protocol.vocabulary import frame, name, part_frame


@dataclass(frozen=True)
class Launch:
    """Everything the host knows before a launch, as the prompt states it."""

    program: Program
    grid: tuple[int, int]
    block: tuple[int, int]
    params: list[int]
    memory: list[int]  # initial global memory, GLOBAL_WORDS words
    allocations: list[tuple[int, int]]  # (byte address, bytes) of every argument array
    shared_words: int
    dynamic_shared: int = 0  # bytes of the launch's dynamic shared memory (in shared_words)

    @classmethod
    def checked(cls, program: Program, grid: tuple[int, int], block: tuple[int, int],
                place: Placed, dynamic_shared: int = 0) -> Launch:
        """A launch of a lowered program with placed arguments (driver.place_arguments),
        checked as every backend checks it (interp.check_launch); the GPU circuit has no
        float unit yet, so a program with float instructions is refused here."""
        for b, blk in enumerate(program.blocks):
            for ins in blk.instrs:
                if ins.op in FLOAT_OPS:
                    raise UnsupportedError(
                        f"{program.name}: `{format_instr(ins)}` (block B{b}) is a float "
                        f"instruction: float kernels run on the ptx and interp backends; the "
                        f"GPU inside the model has no float unit yet")
        shared = check_launch(program, grid, block, place.params, place.memory, dynamic_shared)
        return cls(program, grid, block, place.params, place.memory, place.allocations,
                   shared // 4, dynamic_shared)

    def replay(self, step_limit: int = limits.DEFAULT_STEP_LIMIT) -> MachineRun:
        """The launch on the reference machine (a fault raises its LaunchError)."""
        return run_program(self.program, grid=self.grid, block=self.block, params=self.params,
                           memory=self.memory, dynamic_shared=self.dynamic_shared,
                           allocations=self.allocations, step_limit=step_limit)


class Placed(Protocol):
    """Arguments placed in memory (driver.Placement)."""

    params: list[int]
    memory: list[int]
    allocations: list[tuple[int, int]]


def allocated_words(allocations: Iterable[tuple[int, int]]) -> list[int]:
    return sorted({w for addr, n in allocations for w in range(addr // 4, (addr + n) // 4)})


def prompt_tokens(launch: Launch) -> list[str]:
    """ROM parts, parameter words, every allocated global word (its value and that it may be
    accessed: unloaded words fault), the launch shape, then GO."""
    out: list[str] = []
    for (b, s), row in sorted(rom.rows(launch.program).items()):
        for p, part in enumerate(rom.parts(row)):
            out += part_frame(f"rom:{b}:{s}:{p}", part)
    for w, v in enumerate(launch.params):
        out += frame(f"param:{w}:{{}}", v)
    for w in allocated_words(launch.allocations):
        out += frame(f"mem:g{w}:{{}}", launch.memory[w])
    bx, by = launch.block
    gx, gy = launch.grid
    out += [name(f"block:{bx}x{by}"), name(f"grid:{gx}x{gy}"),
            name(f"shared:{launch.shared_words}"), name("go")]  # fmt: skip
    return out
