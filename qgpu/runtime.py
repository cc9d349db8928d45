"""The driver of the GPU inside the model: launch a lowered kernel, let the model write it.

The host builds the prompt (tokens.prompt_tokens), then only feeds back the model's own greedy
choices, token by token, until the model chooses ``end`` (or a fault); results are read from the
model's recurrent state — global memory is the ``gmem`` bank, one GDN head whose row w holds
word w. The host computes nothing: no interpreter runs unless ``check`` asks for one, and then
only to compare (tests/test_runtime.py runs launches with the interpreter unavailable).

Launches run through the circuit layers alone (docs/ARCHITECTURE.md §5: circuit tokens see exact
zeros from every base layer, so this is the merged model's computation on the circuit dims).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers.cache_utils import DynamicCache

from qgpu import limits
from qgpu import tokens as T
from qgpu.circuit.gpu import encoding, machine
from qgpu.compiler import numerics as nx
from qgpu.compiler.circuit_model import DTYPES, build_circuit_model
from qgpu.compiler.schedule import LayerShape, Schedule, embed_all, schedule
from qgpu.errors import LaunchError, UsageError

DEFAULT_TOKEN_LIMIT = 200_000
"""Generated tokens per launch before a runaway launch is stopped."""


@dataclass
class GpuModel:
    """The compiled GPU circuit in a stock Qwen3.5 model (circuit layers only, hidden = K),
    with the circuit tokens' embeddings (tied: also their output rows) and the final norm."""

    sched: Schedule
    model: torch.nn.Module
    embeddings: torch.Tensor  # [vocabulary, K]
    names: list[str]
    dtype: str
    ids: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.ids = {n: i for i, n in enumerate(self.names)}

    @classmethod
    def compile(cls, dtype: str = "float32", shape: LayerShape | None = None) -> GpuModel:
        """Compile the machine (machine.build) for a layer shape (default: Qwen3.5-2B's)."""
        if dtype not in DTYPES:
            raise UsageError(f"dtype must be one of {', '.join(DTYPES)}")
        sched = schedule(machine.build(), shape or LayerShape())
        model, k = build_circuit_model(sched, dtype)
        names = T.vocabulary()
        emb = embed_all(sched, k, k, [encoding.features(n) for n in names])
        final = torch.full((k,), -1.0)  # silence every circuit dim but the selection fields
        for f in encoding.FIELDS:
            if f.selects:
                for name in f.features():
                    final[sched.dims[name]] = nx.SCALE - 1.0
        with torch.no_grad():
            model.norm.weight.copy_(final)
        return cls(sched, model, emb.to(DTYPES[dtype]), names, dtype)

    def bank_rows(self, cache: DynamicCache, bank: str, rows: int, width: int) -> list[int]:
        """Rows of a bits bank read from its head's recurrent state (host side: decoding
        only). Every data entry must be exactly 0 or VALUE_SCALE."""
        layer, head = self.sched.heads[bank]
        state = cache.get_recurrent_state(layer)[0, head].float()
        data = state[:rows, nx.ROW_ANCHORS:nx.ROW_ANCHORS + width]
        bad = (data != 0) & (data != nx.VALUE_SCALE)
        if bool(bad.any()):
            r = int(bad.nonzero()[0, 0])
            raise LaunchError(f"bank {bank} row {r} is not exact: {data[r].tolist()}")
        bits = (data == nx.VALUE_SCALE).long()
        return [int(sum(int(b) << i for i, b in enumerate(row))) for row in bits]


@dataclass
class ModelRun:
    """A launch the model ran: what it generated and what it left in global memory."""

    memory: list[int]  # int32 words, as the gmem bank holds them
    prompt_tokens: int
    generated: list[str]


def _step(gm: GpuModel, cache: DynamicCache, ids: list[int]) -> torch.Tensor:
    """Run tokens through the circuit layers; the next token's logits after the last one."""
    h = gm.embeddings[torch.tensor(ids)].unsqueeze(0)
    with torch.no_grad():
        for layer in gm.model.layers:
            h = layer(h, position_embeddings=None, past_key_values=cache, use_cache=True)
        last = gm.model.norm(h[0, -1])
        return last.float() @ gm.embeddings.float().T


def run_launch(gm: GpuModel, launch: T.Launch, *, token_limit: int = DEFAULT_TOKEN_LIMIT,
               expected: list[str] | None = None) -> ModelRun:
    """Prompt the model with a launch and let it generate until END or a fault. With
    `expected` (the reference stream), stop at the first token that differs and say where."""
    prompt = T.prompt_tokens(launch)
    cache = DynamicCache(config=gm.model.config)
    logits = _step(gm, cache, [gm.ids[t] for t in prompt])
    stops = {gm.ids[T.name("end")]} | {gm.ids[T.name(f"fault:{f}")] for f in T.FAULTS}
    generated: list[str] = []
    while True:
        nxt = int(torch.argmax(logits))
        generated.append(gm.names[nxt])
        if expected is not None and generated[-1] != (expected + [None])[len(generated) - 1]:
            raise Divergence(len(generated) - 1, generated, expected)
        if nxt in stops:
            break
        if len(generated) >= token_limit:
            last = [e for e in T.decode(generated[:-1]) if e.kind == "exec"][-1:]
            raise LaunchError(f"the launch did not end within {token_limit} generated tokens "
                              f"(a loop that never ends?); last block run: {last}")
        logits = _step(gm, cache, [nxt])
    if generated[-1] != T.name("end"):
        kind = T.body(generated[-1]).split(":")[1]
        raise LaunchError(f"the model reported a {kind} fault after {len(generated)} tokens "
                          f"(at {T.body(generated[-2])})", kind)
    rows = gm.bank_rows(cache, "gmem", limits.GLOBAL_WORDS, 32)
    memory = [v - (1 << 32) if v >> 31 else v for v in rows]
    return ModelRun(memory, len(prompt), generated)


class Divergence(LaunchError):
    """The model's stream left the reference stream (--check): where and how."""

    def __init__(self, index: int, generated: list[str], expected: list[str]) -> None:
        got = T.body(generated[index])
        want = T.body(expected[index]) if index < len(expected) else "(the stream had ended)"
        context = " ".join(T.body(t) for t in generated[max(0, index - 4):index])
        super().__init__(f"generated token {index} is {got}, the reference machine says {want} "
                         f"(after: {context})")
        self.index = index
