"""Shared helpers of the model tests: what passes through a checkpoint's layers, and how far its
next-token distribution on text is from a reference's."""

from __future__ import annotations

import functools
from pathlib import Path

import torch
from transformers import AutoTokenizer

from qgpu.model.tinybase import VOCAB_SIZE

SENTENCES = (  # real text: prose, code, Chinese, German
    "The quick brown fox jumps over the lazy dog.",
    "In 1905 Einstein published four papers that changed physics for good.",
    "def dot(a, b):\n    return sum(x * y for x, y in zip(a, b))",
    "我们今天下午去公园散步，然后回家吃晚饭。",
    "__global__ void add(int *a, int *b) { a[threadIdx.x] += b[threadIdx.x]; }",
    "Der Zug nach Berlin fährt um halb acht vom Hauptbahnhof ab.",
)


@functools.cache
def tokenizer_of(path: Path):
    return AutoTokenizer.from_pretrained(path)


def trace(model: torch.nn.Module, ids: torch.Tensor) -> tuple[list, torch.Tensor]:
    """Each decoder layer's (input, output) residual, and the logits."""
    records = []

    def hook(module, args, kwargs, output):
        hidden = args[0] if args else kwargs["hidden_states"]
        records.append((hidden.detach().clone(), output.detach().clone()))

    handles = [layer.register_forward_hook(hook, with_kwargs=True) for layer in model.model.layers]
    try:
        with torch.no_grad():
            logits = model(ids).logits
    finally:
        for handle in handles:
            handle.remove()
    return records, logits


def next_token_kl(reference: torch.Tensor, merged: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Per-position KL(reference || merged) on the base vocabulary, and the circuit-token mass."""
    p = torch.log_softmax(reference[..., :VOCAB_SIZE].double(), -1)
    q = torch.log_softmax(merged[..., :VOCAB_SIZE].double(), -1)
    kl = (p.exp() * (p - q)).sum(-1).flatten()
    mass = torch.softmax(merged.double(), -1)[..., VOCAB_SIZE:].sum(-1).flatten()
    return kl, mass


def text_batches(base: Path) -> dict[str, list[torch.Tensor]]:
    """The text KL is measured on: random token ids, and SENTENCES through the base's tokenizer."""
    gen = torch.Generator().manual_seed(7)
    tokenizer = tokenizer_of(base)
    return {
        "random": [torch.randint(0, 248044, (2, 48), generator=gen)],
        "sentences": [tokenizer(s, return_tensors="pt").input_ids for s in SENTENCES],
    }


def measure(reference: torch.nn.Module, other: torch.nn.Module, batches: list) -> dict:
    """KL(reference || other) over every position of the batches (max, mean), and the largest
    circuit-token mass."""
    kls, masses = [], []
    with torch.no_grad():
        for ids in batches:
            kl, mass = next_token_kl(reference(ids).logits, other(ids).logits)
            kls.append(kl)
            masses.append(mass)
    kl, mass = torch.cat(kls), torch.cat(masses)
    return {"max": kl.max().item(), "mean": kl.mean().item(), "mass": mass.max().item()}
