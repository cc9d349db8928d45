"""Shared helpers of the compiler tests: input codes, running compiled layers on batches of
sequences, reading the live features back, and checking compiled layers against the evaluator."""

from __future__ import annotations

import torch

from qgpu.compiler import numerics as nx
from qgpu.compiler.circuit_model import build_circuit_model, run_layers
from qgpu.compiler.evaluate import evaluate
from qgpu.compiler.graph import Graph
from qgpu.compiler.schedule import LayerShape, Schedule, decode, schedule
from qgpu.compiler.weights import embed

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


def assert_exact(g: Graph, tokens: list[dict], dtype: str, step: bool,
                 layers: int = 1) -> None:
    sched = schedule(g, SHAPE, layers=layers)
    model, k = build_circuit_model(sched, dtype)
    embeds = torch.stack([embed(sched, k, k, t) for t in tokens])
    residual = run_layers(model, embeds, step=step)
    # an input and its alias: one sum, unless the input was cleared before the selection
    shared = {n: f.alias for n, f in g.features.items() if f.alias and sched.live(f.alias)}
    shared.update({a: n for n, a in list(shared.items())})
    for i, want in enumerate(evaluate(sched.graph, tokens)):  # the graph it compiled (packing)
        got = decode(sched, residual[i])
        for name in got:  # features whose dims were not handed on to later features
            other = want[shared[name]] if name in shared else [0] * len(want[name])
            assert got[name] == [float(v + o) for v, o in zip(want[name], other, strict=True)], \
                (i, name)
