"""What every engine's batch of launch sequences offers (the sparse engine's EngineSession,
the stock model's StockSession): its own module so that the engines and the checkpoint that
picks one share it without importing each other."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

OnLayer = Callable[[int, int, torch.Tensor], None]
"""on_layer(layer, row, hidden): circuit layer `layer`'s output on the circuit dims
([tokens, K]) for the tokens sequence `row` read in this pass (layer checks)."""


class Session(Protocol):
    """A batch of launch sequences on one engine: the prompts, then one token per running row
    per step; each returns every row's greedy choice (a token id of the whole vocabulary)."""

    def prefill(self, prompts: list[list[int]], on_layer: OnLayer | None = None) \
            -> list[int]: ...

    def step(self, ids: list[int | None], on_layer: OnLayer | None = None) -> list[int]: ...

    def head(self, layer: int, head: int, batch: int) -> torch.Tensor:
        """The [dk, dv] recurrent state of GDN head `head` of layer `layer`, sequence `batch`."""
        ...
