"""The null circuit: random weights on circuit dims only, for the isolation tests of the merge."""

from __future__ import annotations

import math

import torch

from qgpu.compiler import numerics as nx
from qgpu.compiler.weights import CIRCUIT_LAYER_KEYS, CircuitWeights, circuit_layer_shapes


def null_circuit(base_config: dict) -> CircuitWeights:
    """A circuit that computes nothing useful: random weights on circuit dims only.

    It exists to test isolation: K is the smallest K >= 2 that makes d_base + K a perfect
    square; two GDN + MLP layers and four tokens, whose rows are [A, 1, random...] (anchor and
    unit dims of qgpu.compiler.numerics). Like any circuit it never writes the anchor dim, so
    its RMSNorms divide by exactly 2**ANCHOR_EXP.
    """
    d_base = base_config["hidden_size"]
    k = nx.pad_k(d_base, 2)
    anchors = nx.anchors(d_base + k, k)
    gen = torch.Generator().manual_seed(0)
    shapes = circuit_layer_shapes(base_config, k)
    layers = [
        {key: _null_tensor(key, shapes[key], gen) for key in CIRCUIT_LAYER_KEYS} for _ in range(2)
    ]
    for layer in layers:
        for key in ("linear_attn.out_proj.weight", "mlp.down_proj.weight"):
            layer[key][list(anchors)] = 0.0
    tokens = torch.randn(4, k, generator=gen)
    for dim, value in anchors.items():
        tokens[:, dim] = value
    tokens[:, nx.UNIT_DIM] = 1.0
    return CircuitWeights(
        k_dims=k,
        layers=layers,
        token_names=[f"<|gpu:null{i}|>" for i in range(4)],
        token_embeddings=tokens,
        final_norm=0.1 * torch.randn(k, generator=gen),
        metadata={"circuit": "null"},
    )


def _null_tensor(key: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    if key.endswith("A_log"):
        return torch.empty(shape).uniform_(1.0, 16.0, generator=gen).log_()
    if key.endswith(("dt_bias", "linear_attn.norm.weight")):
        return torch.ones(shape)
    if len(shape) == 1:
        return 0.1 * torch.randn(shape, generator=gen)
    return torch.randn(shape, generator=gen) / math.sqrt(math.prod(shape[1:]))
