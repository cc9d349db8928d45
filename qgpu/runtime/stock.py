"""The reference path: a batch of launch sequences through the whole merged model in stock
transformers (``AutoModelForCausalLM``, a ``DynamicCache``), as ``model.generate`` would run
them — the prompts left-padded and masked, then one decode step for every sequence."""

from __future__ import annotations

import torch
from transformers.cache_utils import DynamicCache

from qgpu.runtime.session import OnLayer

PAD_ID = 0
"""The token id left-padding a batch's shorter prompts (masked: any id would do)."""

class StockSession:
    """One batch on the stock model. Rows keep stepping after they finish (with their last
    token): the padded batch cannot shrink."""

    def __init__(self, model: torch.nn.Module, d_base: int, circuit_layers: int) -> None:
        """`model`: the merged checkpoint in transformers; its first `d_base` residual dims are
        the base model's, its last `circuit_layers` layers the circuit's."""
        self.model, self.d_base, self.circuit_layers = model, d_base, circuit_layers
        self.cache = DynamicCache(config=self.model.config)
        self.mask: torch.Tensor | None = None
        self.last: list[int] = []

    def prefill(self, prompts: list[list[int]], on_layer: OnLayer | None = None) -> list[int]:
        width = max(len(p) for p in prompts)
        self.mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts],
                                 device=self.model.device)
        ids = [[PAD_ID] * (width - len(p)) + p for p in prompts]
        return self._forward(ids, [len(p) for p in prompts], on_layer)

    def step(self, ids: list[int | None], on_layer: OnLayer | None = None) -> list[int]:
        """One token for every row (None: a finished row, fed its last token again)."""
        assert self.mask is not None
        feeds = [self.last[b] if i is None else i for b, i in enumerate(ids)]
        self.mask = torch.cat([self.mask, self.mask.new_ones(len(feeds), 1)], dim=1)
        return self._forward([[i] for i in feeds], [1] * len(feeds), on_layer)

    def head(self, layer: int, head: int, batch: int) -> torch.Tensor:
        return self.cache.get_recurrent_state(layer)[batch, head]

    def _forward(self, ids: list[list[int]], lengths: list[int],
                 on_layer: OnLayer | None) -> list[int]:
        width, d_base = len(ids[0]), self.d_base
        hooks = []
        if on_layer is not None:
            for i in range(self.circuit_layers):
                def hook(module: torch.nn.Module, args: tuple, out: torch.Tensor,
                         layer: int = i) -> None:
                    for b, n in enumerate(lengths):
                        on_layer(layer, b, out[b, width - n:, d_base:])
                hooks.append(self.model.model.layers[i].register_forward_hook(hook))
        try:
            with torch.no_grad():
                out = self.model(input_ids=torch.tensor(ids, device=self.model.device),
                                 attention_mask=self.mask, past_key_values=self.cache,
                                 use_cache=True, logits_to_keep=1)
        finally:
            for h in hooks:
                h.remove()
        self.last = [row[-1] for row in ids]
        return out.logits[:, -1].float().argmax(-1).tolist()
