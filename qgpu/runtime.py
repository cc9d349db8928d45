"""The driver of the GPU inside the model: launch a lowered kernel, let the model write it.

The model is a merged checkpoint (``python -m qgpu build``: base + GPU circuit, a stock
``Qwen3_5ForCausalLM``). The host builds the prompt (tokens.prompt_tokens), then only feeds back
the model's own greedy choices over its whole vocabulary, token by token, until the model
chooses ``end`` (or a fault); results are read from the model's recurrent state — global memory
is the ``gmem`` bank, one GDN head whose row w holds word w. The host computes nothing: no
interpreter runs unless a check asks for one, and then only to compare (tests/test_runtime.py
runs launches with the interpreter unavailable).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM
from transformers.cache_utils import DynamicCache

from qgpu import limits
from qgpu import tokens as T
from qgpu.compiler import numerics as nx
from qgpu.compiler.circuit_model import DTYPES
from qgpu.errors import LaunchError, UsageError
from qgpu.merge import METADATA_FILE

DEFAULT_TOKEN_LIMIT = 200_000
"""Generated tokens per launch before a runaway launch is stopped."""


@dataclass
class GpuModel:
    """A merged checkpoint with the GPU circuit, loaded with stock transformers, and what the
    driver needs from its qgpu_circuit.json: the circuit tokens' ids and each bank's head."""

    model: torch.nn.Module
    ids: dict[str, int]  # circuit token name -> id
    banks: dict[str, tuple[int, int]]  # bank -> (layer, GDN head)
    dtype: str
    path: Path
    d_base: int  # circuit dims start here in the merged residual
    circuit_layers: int  # the merged model's first layers

    def __post_init__(self) -> None:
        self.names = {i: n for n, i in self.ids.items()}

    @classmethod
    def load(cls, build: str | Path, dtype: str | None = None, device: str = "cpu") -> GpuModel:
        """Load BUILD/merged (or a merged checkpoint directory itself) in `dtype` (default:
        the dtype it was built in) onto `device` (a torch device: cpu, cuda, cuda:1, ...)."""
        path = Path(build)
        path = path / "merged" if (path / "merged" / METADATA_FILE).is_file() else path
        try:
            meta = json.loads((path / METADATA_FILE).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise UsageError(f"{build}: not a qgpu build or merged checkpoint ({e})") from None
        if meta.get("circuit", {}).get("circuit") != "gpu":
            raise UsageError(f"{path} holds the {meta.get('circuit', {}).get('circuit')!r} "
                             "circuit, not the GPU (python -m qgpu build --circuit gpu)")
        dtype = dtype or meta["dtype"]
        if dtype not in DTYPES:
            raise UsageError(f"dtype must be one of {', '.join(DTYPES)}")
        try:
            where = torch.device(device)
        except RuntimeError as e:
            raise UsageError(f"--device {device!r}: {e}") from None
        if where.type == "cuda" and not torch.cuda.is_available():
            raise UsageError(f"--device {device!r}: this torch sees no CUDA device")
        model = AutoModelForCausalLM.from_pretrained(path, dtype=DTYPES[dtype]).to(where).eval()
        banks = {b: (int(layer), int(head))
                 for b, (layer, head) in meta["circuit"]["banks"].items()}
        return cls(model, dict(meta["token_ids"]), banks, dtype, path,
                   int(meta["circuit_dims"][0]), int(meta["circuit_layers"][1]))

    @cached_property
    def reference(self) -> CircuitReference:
        """The circuit's reference semantics for layer checks (scheduled once, when asked)."""
        return CircuitReference(self)

    def bank_rows(self, cache: DynamicCache, bank: str, rows: int, width: int, batch: int = 0) \
            -> list[int]:
        """Rows of a bits bank read from its head's recurrent state, for sequence `batch` of
        the cache (host side: decoding only). Every data entry must be exactly 0 or
        VALUE_SCALE."""
        layer, head = self.banks[bank]
        state = cache.get_recurrent_state(layer)[batch, head].float().cpu()
        data = state[:rows, nx.ROW_ANCHORS:nx.ROW_ANCHORS + width]
        bad = (data != 0) & (data != nx.VALUE_SCALE)
        if bool(bad.any()):
            r = int(bad.nonzero()[0, 0])
            raise LaunchError(f"bank {bank} row {r} is not exact: {data[r].tolist()}")
        bits = (data == nx.VALUE_SCALE).long()
        return [int(sum(int(b) << i for i, b in enumerate(row))) for row in bits]

    def machine_state(self, cache: DynamicCache, batch: int = 0) -> MachineState:
        """Registers, predicates, lane pcs and memories read from the banks' heads (one copy
        each: the model keeps several, written by the same frames), for sequence `batch`."""
        from qgpu.circuit.gpu.control import EXITED_BIT, LANE_ROW, TAG

        warps, lanes, regs = limits.MAX_WARPS, limits.WARP_LANES, limits.NUM_REGS
        registers = {}
        for lane in range(lanes):
            rows = self.bank_rows(cache, f"regs.{lane}", warps * regs, 32, batch)
            registers |= {(w, lane, r): rows[w * regs + r]
                          for w in range(warps) for r in range(1, regs)}
        preds = self.bank_rows(cache, "preds", warps, 4 * lanes, batch)
        predicates = {(w, lane, p): bool(preds[w] >> (4 * lane + p) & 1)
                      for w in range(warps) for lane in range(lanes)
                      for p in range(limits.NUM_PREDS)}
        pcs = {}
        for lane in range(lanes):
            for w, row in enumerate(self.bank_rows(cache, f"lanes.{lane}", warps, LANE_ROW,
                                                   batch)):
                pcs[(w, lane)] = (row & ((1 << EXITED_BIT) - 1), bool(row >> EXITED_BIT & 1),
                                  row >> TAG)
        mask = (1 << 32) - 1
        glob = [v & mask for v in self.bank_rows(cache, "gmem", limits.GLOBAL_WORDS, 33, batch)]
        return MachineState(registers, predicates, pcs, glob,
                            self.bank_rows(cache, "smem", limits.SHARED_WORDS, 32, batch))


@dataclass
class MachineState:
    """The machine as the model's recurrent state holds it (host side: decoding only, for
    views and checks). Rows the launch never wrote read 0; thread blocks do not clear rows."""

    registers: dict[tuple[int, int, int], int]  # (warp, lane, register) -> value, r1..r15
    predicates: dict[tuple[int, int, int], bool]  # (warp, lane, predicate)
    lanes: dict[tuple[int, int], tuple[int, bool, int]]  # (warp, lane) -> (block, exited, cta)
    global_memory: list[int]  # words as stored (unsigned)
    shared_memory: list[int]


@dataclass
class ModelRun:
    """A launch the model ran: what it generated and what it left in global memory; with a
    check, whether every token and word was the reference machine's, else the first that was
    not (then `memory` is None if the stream diverged)."""

    memory: list[int] | None  # int32 words, as the gmem bank holds them
    prompt_tokens: int
    generated: list[str]
    exact: bool | None = None
    divergence: str | None = None


PAD_ID = 0
"""The token id left-padding a batch's shorter prompts (masked: any id would do)."""


def run_launch(gm: GpuModel, launch: T.Launch, *, token_limit: int = DEFAULT_TOKEN_LIMIT,
               expected: list[str] | None = None, check_layers: bool = False,
               on_token: Callable[[int, str, DynamicCache], None] | None = None) -> ModelRun:
    """Prompt the model with a launch and let it generate greedily until END or a fault (a
    fault, a runaway launch or a divergence raises its LaunchError). With `expected` (the
    reference stream), stop at the first token that differs and say where; with
    `check_layers`, also at the first circuit layer whose features differ from the reference
    semantics. `on_token(i, token, cache)` runs once the model has read generated token i back
    (its state then holds everything up to it: ``GpuModel.machine_state`` decodes it)."""
    out = run_batch(gm, [launch], token_limit=token_limit,
                    expected=None if expected is None else [expected],
                    check_layers=check_layers,
                    on_token=None if on_token is None else lambda b, i, t, c: on_token(i, t, c))
    if isinstance(out[0], LaunchError):
        raise out[0]
    return out[0]


def run_batch(gm: GpuModel, launches: list[T.Launch], *,
              token_limit: int = DEFAULT_TOKEN_LIMIT, expected: list[list[str]] | None = None,
              check_layers: bool = False,
              on_token: Callable[[int, int, str, DynamicCache], None] | None = None) \
        -> list[ModelRun | LaunchError]:
    """Several launches side by side, one sequence each of one batch: the prompts left-padded
    (the padding is masked, and a circuit token's dims never see another sequence), then one
    decode step for every launch still running per generated token — the weights are read
    once for all of them. Each launch ends on its own (END, a fault, the token limit, a
    divergence) with its ModelRun or its LaunchError; `on_token(b, i, token, cache)` as in
    ``run_launch`` for launch b."""
    reference = gm.reference if check_layers else None
    rows = [_Row(T.prompt_tokens(launch), None if expected is None else expected[b],
                 None if reference is None else LayerCheck(reference))
            for b, launch in enumerate(launches)]
    width = max(len(r.prompt) for r in rows)
    mask = torch.tensor([[0] * (width - len(r.prompt)) + [1] * len(r.prompt) for r in rows],
                        device=gm.model.device)
    cache = DynamicCache(config=gm.model.config)
    logits = _step(gm, cache, rows, [r.prompt for r in rows], mask)
    while True:
        for b, r in enumerate(rows):
            if r.outcome is None:
                r.choose(gm, logits[b], token_limit, cache, b)
        if all(r.outcome is not None for r in rows):
            return [r.outcome for r in rows]
        feeds = [[r.generated[-1]] for r in rows]
        mask = torch.cat([mask, mask.new_ones(len(rows), 1)], dim=1)
        logits = _step(gm, cache, rows, feeds, mask)
        if on_token is not None:
            for b, r in enumerate(rows):
                if r.outcome is None:
                    on_token(b, len(r.generated) - 1, r.generated[-1], cache)


def _step(gm: GpuModel, cache: DynamicCache, rows: list[_Row], feeds: list[list[str]],
          mask: torch.Tensor) -> torch.Tensor:
    """One forward pass of the batch (row b reads feeds[b], right-aligned); with layer checks,
    every running row's circuit layers are compared as they run. Logits after the last."""
    width = max(len(f) for f in feeds)
    ids = torch.tensor([[PAD_ID] * (width - len(f)) + [gm.ids[t] for t in f] for f in feeds],
                       device=gm.model.device)
    checks = [(b, r.check) for b, r in enumerate(rows) if r.check is not None and r.outcome is None]
    for b, check in checks:
        check.feed(feeds[b])
    hooks = []
    if checks:
        layers = gm.model.model.layers
        for i in range(gm.circuit_layers):
            def compare(module: torch.nn.Module, args: tuple, out: torch.Tensor,
                        layer: int = i) -> None:
                for b, check in checks:
                    check.compare(layer, out[b, width - len(feeds[b]):])
            hooks.append(layers[i].register_forward_hook(compare))
    try:
        with torch.no_grad():
            out = gm.model(input_ids=ids, attention_mask=mask, past_key_values=cache,
                           use_cache=True, logits_to_keep=1)
    finally:
        for h in hooks:
            h.remove()
    for b, check in checks:
        if check.first is not None:
            r = rows[b]
            r.outcome = Divergence(len(r.generated) - 1, r.generated, check.report(r.prompt))
    return out.logits[:, -1].float().cpu()


@dataclass
class _Row:
    """One launch of a batch while it runs."""

    prompt: list[str]
    expected: list[str] | None
    check: LayerCheck | None
    generated: list[str] = field(default_factory=list)
    outcome: ModelRun | LaunchError | None = None

    def choose(self, gm: GpuModel, logits: torch.Tensor, token_limit: int,
               cache: DynamicCache, b: int) -> None:
        """Take the model's greedy choice; settle the outcome when the launch is over."""
        nxt = int(torch.argmax(logits))
        if nxt not in gm.names:
            self.outcome = LaunchError(
                f"generated token {len(self.generated)} is text token id {nxt}, not a circuit "
                f"token (after: {' '.join(T.body(t) for t in self.generated[-4:])})")
            return
        generated = self.generated
        generated.append(gm.names[nxt])
        if self.expected is not None and generated[-1] != (self.expected + [None])[
                len(generated) - 1]:
            note = ("; every circuit layer held the reference semantics' values on the way"
                    if self.check is not None else "")
            self.outcome = Divergence.token(len(generated) - 1, generated, self.expected, note)
        elif generated[-1] == T.name("end"):
            rows = gm.bank_rows(cache, "gmem", limits.GLOBAL_WORDS, 32, b)
            memory = [v - (1 << 32) if v >> 31 else v for v in rows]
            self.outcome = ModelRun(memory, len(self.prompt), generated)
        elif T.body(generated[-1]).startswith("fault:"):
            kind = T.body(generated[-1]).split(":")[1]
            self.outcome = LaunchError(f"the model reported a {kind} fault after "
                                       f"{len(generated)} tokens (at {T.body(generated[-2])})",
                                       kind)
        elif len(generated) >= token_limit:
            last = [e for e in T.decode(generated[:-1]) if e.kind == "exec"][-1:]
            self.outcome = LaunchError(f"the launch did not end within {token_limit} generated "
                                       f"tokens (a loop that never ends?); last block run: {last}")


class Divergence(LaunchError):
    """The model left the reference (--check): generated token `index` was not the reference
    machine's, or (with a layer check) a circuit layer went wrong in the pass that read it."""

    def __init__(self, index: int, generated: list[str], message: str) -> None:
        super().__init__(message)
        self.index, self.generated = index, generated

    @classmethod
    def token(cls, index: int, generated: list[str], expected: list[str], note: str = "") \
            -> Divergence:
        got = T.body(generated[index])
        want = T.body(expected[index]) if index < len(expected) else "(the stream had ended)"
        context = " ".join(T.body(t) for t in generated[max(0, index - 4):index])
        return cls(index, generated, f"generated token {index} is {got}, the reference machine "
                                     f"says {want} (after: {context}){note}")


class CircuitReference:
    """What a layer check needs from the circuit the model was built with: its graph (the
    reference semantics) and, per circuit layer, the features settled there — every writer has
    run and the dims are not cleared yet — with their residual dims and carrier offsets."""

    def __init__(self, gm: GpuModel) -> None:
        from qgpu.circuit.gpu.compiled import gpu_schedule
        from qgpu.compiler.evaluate import flat_offsets
        from qgpu.compiler.schedule import LayerShape

        sched = gpu_schedule(LayerShape.from_config(gm.model.config.to_dict()))
        if sched.heads != gm.banks or sched.layers != gm.circuit_layers:
            raise UsageError(f"{gm.path} was built from another version of the GPU circuit "
                             "than this qgpu's: rebuild it (python -m qgpu build)")
        g = self.graph = sched.graph  # the graph the build compiled (packing.py rewrote it)
        done = sched.ready
        last = {n: sched.clears[n][0] - 1 if n in sched.clears else sched.layers - 1
                for n in g.features}
        for grp, (layer, _) in sched.neurons.items():
            for f in g.rule_outputs[grp]:
                if g.features[f].alias:  # selection adds onto the token input's dims
                    target = g.features[f].alias
                    last[target] = min(last[target], layer - 1)
        offsets = flat_offsets(g)
        self.plan = []  # per circuit layer: (residual dims, evaluator positions, offsets, names)
        for layer in range(sched.layers):
            dims, pos, off, names = [], [], [], []
            for n, f in g.features.items():
                if f.alias or not done[n] <= 2 * layer + 1 or layer > last[n]:
                    continue
                dims += [gm.d_base + d for d in sched.dims[n]]
                pos += [offsets[n] + i for i in range(f.size)]
                off += [sched.offset(n)] * f.size
                names += [f"{n}[{i}]" for i in range(f.size)]
            self.plan.append((torch.tensor(dims), torch.tensor(pos), torch.tensor(off), names))


class LayerCheck:
    """``--check`` inside the model, for one launch: after every circuit layer, each settled
    feature (``CircuitReference``) must hold exactly what the weight-free evaluator (the
    circuit's reference semantics, qgpu/compiler/evaluate.py) gives on the same tokens. The
    first (token, layer) that differs is kept, with the features that differ there."""

    def __init__(self, reference: CircuitReference) -> None:
        from qgpu.circuit.gpu.encoding import features
        from qgpu.compiler.evaluate import Evaluator

        self.reference, self.encode, self.ev = reference, features, Evaluator(reference.graph)
        self.fed: list[str] = []  # every token the model has read
        self.first: tuple[int, int, list[str]] | None = None  # (fed index, layer, differences)
        self._refs = torch.zeros(0)

    def feed(self, names: list[str]) -> None:
        """The tokens the next forward pass reads: their reference values."""
        self._base = len(self.fed)
        self._refs = torch.from_numpy(np.stack(
            [self.ev.step_vector(self.encode(n)).copy() for n in names])).float()
        self.fed += names

    def compare(self, layer: int, out: torch.Tensor) -> None:
        """Circuit layer `layer`'s output for the tokens fed last ([tokens, hidden])."""
        dims, pos, off, names = self.reference.plan[layer]
        got = out[:, dims.to(out.device)].float().cpu() - off
        want = self._refs[:, pos]
        bad = (got != want).nonzero()
        if not len(bad):
            return
        t = int(bad[0, 0])
        if self.first is not None and (self.first[0], self.first[1]) <= (self._base + t, layer):
            return
        cols = bad[bad[:, 0] == t, 1].tolist()
        self.first = (self._base + t, layer, [f"{names[c]} holds {got[t, c].item():g}, the "
                                              f"reference {want[t, c].item():g}" for c in cols])

    def report(self, prompt: list[str]) -> str:
        """The first divergence in words: the token whose pass went wrong, the layer, and the
        features that differ there (up to 4)."""
        at, layer, what = self.first
        where = f"prompt token {at}" if at < len(prompt) \
            else f"generated token {at - len(prompt)}"
        more = f" and {len(what) - 4} more" if len(what) > 4 else ""
        return (f"in the pass that read {where} ({T.body(self.fed[at])}), circuit layer {layer} "
                f"left the reference semantics: {'; '.join(what[:4])}{more}")


def run_checked(gm: GpuModel, launch: T.Launch, *, dynamic_shared: int = 0,
                token_limit: int = DEFAULT_TOKEN_LIMIT) -> ModelRun:
    """``--check`` of one launch (``run_checked_batch``)."""
    out = run_checked_batch(gm, [launch], dynamic_shared=[dynamic_shared],
                            token_limit=token_limit)[0]
    if isinstance(out, LaunchError):
        raise out
    return out


def run_checked_batch(gm: GpuModel, launches: list[T.Launch], *, dynamic_shared: list[int],
                      token_limit: int = DEFAULT_TOKEN_LIMIT, layers: bool = True) \
        -> list[ModelRun | LaunchError]:
    """``--check``: the reference interpreter runs each launch first; the model's run must give
    its token stream exactly and leave every global word as the machine does (a launch that
    faults must fault the same way), and every circuit layer must hold the reference
    semantics' feature values at every token (``LayerCheck``; `layers` False leaves that out:
    the evaluator costs ~20 ms of one CPU core per token and launch). Each stops at the first
    token or layer that differs and says where (a ModelRun with exact False); a launch the
    interpreter rejects gives its error."""
    from qgpu.interp import run_program

    expected: list[list[str]] = []
    wants: list[list[int] | None] = []
    for launch, shared in zip(launches, dynamic_shared, strict=True):
        try:
            ref = run_program(launch.program, grid=launch.grid, block=launch.block,
                              params=launch.params, memory=launch.memory,
                              dynamic_shared=shared, allocations=launch.allocations)
            expected.append(T.expected_tokens(launch, ref.trace))
            wants.append(ref.memory)
        except LaunchError as e:
            if e.fault not in T.FAULTS:
                raise
            expected.append(T.fault_tokens(launch, e))
            wants.append(None)
    runs = run_batch(gm, launches, token_limit=token_limit, expected=expected,
                     check_layers=layers)
    out: list[ModelRun | LaunchError] = []
    for launch, run, want in zip(launches, runs, wants, strict=True):
        if isinstance(run, Divergence):
            run = ModelRun(None, len(T.prompt_tokens(launch)), run.generated, False, run.message)
        elif isinstance(run, ModelRun):
            words = [w for w in range(limits.GLOBAL_WORDS)
                     if run.memory[w] & 0xFFFFFFFF != want[w] & 0xFFFFFFFF]
            run.exact = not words
            if words:
                w = words[0]
                run.divergence = (f"global word {w}: the model holds {run.memory[w]}, the "
                                  f"reference machine {want[w]}")
        out.append(run)
    return out
