"""A stock Qwen3.5 text model holding only the circuit layers (hidden size = K).

Circuit tokens see exact zeros from every base layer of a merged model (docs/ARCHITECTURE.md), so
running them through the circuit layers alone gives the same circuit dims: this is how compiled
gadgets are tested exhaustively, and a fast path for launches. It uses the unmodified
``Qwen3_5TextModel``; because it has no full-attention layer, the forward pass gets explicit
position ids and a per-layer-type mask, as stock generation would build them.
"""

from __future__ import annotations

import torch
from transformers import Qwen3_5TextConfig
from transformers.cache_utils import DynamicCache
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextModel

from qgpu.compiler import numerics as nx
from qgpu.compiler.schedule import LayerShape, Schedule
from qgpu.compiler.weights import emit_layer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def circuit_config(shape: LayerShape, hidden: int, layers: int) -> Qwen3_5TextConfig:
    return Qwen3_5TextConfig(
        hidden_size=hidden, intermediate_size=shape.intermediate, num_hidden_layers=layers,
        layer_types=["linear_attention"] * layers, linear_num_key_heads=shape.gdn_heads,
        linear_num_value_heads=shape.gdn_heads, linear_key_head_dim=shape.head_dim,
        linear_value_head_dim=shape.head_dim, linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
        vocab_size=8, num_attention_heads=2, num_key_value_heads=1, head_dim=64,
        tie_word_embeddings=True,
    )


def build_circuit_model(sched: Schedule, dtype: str = "float32", k: int | None = None) \
        -> tuple[Qwen3_5TextModel, int]:
    """The compiled layers in a Qwen3_5TextModel; returns it and its width (by default the
    smallest perfect square that holds the circuit). Built a layer at a time in `dtype`, so a
    large circuit is never held twice."""
    k = nx.pad_k(0, sched.k_used) if k is None else k
    with torch.device("meta"):
        model = Qwen3_5TextModel(circuit_config(sched.shape, k, sched.layers))
    model = model.to(DTYPES[dtype]).to_empty(device="cpu")
    with torch.no_grad():
        for p in model.parameters():  # embeddings and the final norm: unused by run_layers
            p.zero_()
        for i, layer in enumerate(model.layers):
            params = dict(layer.named_parameters())
            tensors = emit_layer(sched, k, i)
            if set(tensors) != set(params):
                raise ValueError(f"emitted tensors {sorted(set(tensors) ^ set(params))} differ "
                                 "from the layer's parameters")
            for name, value in tensors.items():
                params[name].copy_(value)
    return model.eval(), k


def run_layers(model: Qwen3_5TextModel, embeds: torch.Tensor, *, step: bool) -> torch.Tensor:
    """Residual after the last circuit layer, float32, for every token of one sequence ([T, K])
    or of a batch of independent sequences ([B, T, K]): the whole sequence at once (prefill) or
    token by token with a cache (decode)."""
    single = embeds.dim() == 2
    x = embeds.to(model.dtype)
    x = x.unsqueeze(0) if single else x
    cache = DynamicCache(config=model.config)
    chunks = [x[:, i:i + 1] for i in range(x.shape[1])] if step else [x]
    outs = []
    with torch.no_grad():
        for h in chunks:
            for layer in model.layers:  # GDN layers use no position embeddings
                h = layer(h, position_embeddings=None, past_key_values=cache, use_cache=True)
            outs.append(h)
    out = torch.cat(outs, dim=1).float()
    return out[0] if single else out
