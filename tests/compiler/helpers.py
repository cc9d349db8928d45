"""Shared helpers of the compiler tests: input codes, running compiled layers on batches of
sequences, and reading the live features back."""

from __future__ import annotations

import torch
from transformers.cache_utils import DynamicCache

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


def run_batched(model, embeds: torch.Tensor, *, step: bool) -> torch.Tensor:
    """Residual after the last layer for a batch of independent sequences ([B, T, K] in, float32
    out): the whole sequences at once (prefill) or token by token through the cache, as
    ``circuit_model.run_layers`` does for one sequence."""
    x = embeds.to(model.dtype)
    cache = DynamicCache(config=model.config)
    chunks = [x[:, i:i + 1] for i in range(x.shape[1])] if step else [x]
    outs = []
    with torch.no_grad():
        for h in chunks:
            for layer in model.layers:  # GDN layers use no position embeddings
                h = layer(h, position_embeddings=None, past_key_values=cache, use_cache=True)
            outs.append(h)
    return torch.cat(outs, dim=1).float()


def live_values(sched: Schedule, residual: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every feature still live after the last layer, read from residual rows ([S, K]) as
    [S, size] (carriers removed): ``schedule.decode`` for many rows at once."""
    carrier = torch.zeros(residual.shape[-1])
    carrier[sched.carriers] = nx.CARRIER
    values = residual - carrier
    return {name: values[:, sched.dims[name]] for name in sched.graph.features
            if sched.live(name)}
