"""Shared helpers of the compiler tests: input codes, running compiled layers on batches of
sequences, and reading the live features back."""

from __future__ import annotations

import torch

from qgpu.compiler import numerics as nx
from qgpu.compiler.schedule import LayerShape, Schedule

SHAPE = LayerShape(gdn_heads=16, head_dim=128, intermediate=6144)  # Qwen3.5-2B
MODES = [(d, s) for d in ("float32", "bfloat16") for s in (False, True)]


def onehot(n: int, i: int | None) -> list[int]:
    return [int(i == x) for x in range(n)]


def bits(value: int, n: int) -> list[int]:
    """Binary, least significant bit first."""
    return [value >> i & 1 for i in range(n)]


def word(value: int | None, digits: int = nx.ROW_DIGITS) -> list[int]:
    """The word code of a value (None: the all-zero code of a read of nothing)."""
    out = [0] * (4 * digits)
    if value is not None:
        for k in range(digits):
            out[4 * k + (value >> 2 * k & 3)] = 1
    return out


def live_values(sched: Schedule, residual: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every feature still live after the last layer, read from residual rows ([S, K]) as
    [S, size] (carriers removed): ``schedule.decode`` for many rows at once."""
    return {name: residual[:, sched.dims[name]] - sched.offset(name)
            for name in sched.graph.features if sched.live(name)}
