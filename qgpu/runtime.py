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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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
    def load(cls, build: str | Path, dtype: str | None = None) -> GpuModel:
        """Load BUILD/merged (or a merged checkpoint directory itself) in `dtype` (default:
        the dtype it was built in)."""
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
        model = AutoModelForCausalLM.from_pretrained(path, dtype=DTYPES[dtype]).eval()
        banks = {b: (int(layer), int(head))
                 for b, (layer, head) in meta["circuit"]["banks"].items()}
        return cls(model, dict(meta["token_ids"]), banks, dtype, path,
                   int(meta["circuit_dims"][0]), int(meta["circuit_layers"][1]))

    def logits(self, cache: DynamicCache, ids: list[int]) -> torch.Tensor:
        """Run tokens through the model; the logits over the whole vocabulary after the last."""
        with torch.no_grad():
            out = self.model(input_ids=torch.tensor([ids]), past_key_values=cache,
                             use_cache=True, logits_to_keep=1)
        return out.logits[0, -1]

    def bank_rows(self, cache: DynamicCache, bank: str, rows: int, width: int) -> list[int]:
        """Rows of a bits bank read from its head's recurrent state (host side: decoding
        only). Every data entry must be exactly 0 or VALUE_SCALE."""
        layer, head = self.banks[bank]
        state = cache.get_recurrent_state(layer)[0, head].float()
        data = state[:rows, nx.ROW_ANCHORS:nx.ROW_ANCHORS + width]
        bad = (data != 0) & (data != nx.VALUE_SCALE)
        if bool(bad.any()):
            r = int(bad.nonzero()[0, 0])
            raise LaunchError(f"bank {bank} row {r} is not exact: {data[r].tolist()}")
        bits = (data == nx.VALUE_SCALE).long()
        return [int(sum(int(b) << i for i, b in enumerate(row))) for row in bits]

    def machine_state(self, cache: DynamicCache) -> MachineState:
        """Registers, predicates, lane pcs and memories read from the banks' heads (one copy
        each: the model keeps several, written by the same frames)."""
        from qgpu.circuit.gpu.control import EXITED_BIT, LANE_ROW, TAG

        warps, lanes, regs = limits.MAX_WARPS, limits.WARP_LANES, limits.NUM_REGS
        registers = {}
        for lane in range(lanes):
            rows = self.bank_rows(cache, f"regs.{lane}", warps * regs, 32)
            registers |= {(w, lane, r): rows[w * regs + r]
                          for w in range(warps) for r in range(1, regs)}
        preds = self.bank_rows(cache, "preds", warps, 4 * lanes)
        predicates = {(w, lane, p): bool(preds[w] >> (4 * lane + p) & 1)
                      for w in range(warps) for lane in range(lanes)
                      for p in range(limits.NUM_PREDS)}
        pcs = {}
        for lane in range(lanes):
            for w, row in enumerate(self.bank_rows(cache, f"lanes.{lane}", warps, LANE_ROW)):
                pcs[(w, lane)] = (row & ((1 << EXITED_BIT) - 1), bool(row >> EXITED_BIT & 1),
                                  row >> TAG)
        mask = (1 << 32) - 1
        glob = [v & mask for v in self.bank_rows(cache, "gmem", limits.GLOBAL_WORDS, 33)]
        return MachineState(registers, predicates, pcs, glob,
                            self.bank_rows(cache, "smem", limits.SHARED_WORDS, 32))


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


def run_launch(gm: GpuModel, launch: T.Launch, *, token_limit: int = DEFAULT_TOKEN_LIMIT,
               expected: list[str] | None = None, layers: LayerCheck | None = None,
               on_token: Callable[[int, str, DynamicCache], None] | None = None) -> ModelRun:
    """Prompt the model with a launch and let it generate greedily until END or a fault. With
    `expected` (the reference stream), stop at the first token that differs and say where;
    with `layers`, also at the first circuit layer whose features differ from the reference
    semantics. `on_token(i, token, cache)` runs once the model has read generated token i back
    (its state then holds everything up to it: ``GpuModel.machine_state`` decodes it)."""
    prompt = T.prompt_tokens(launch)
    cache = DynamicCache(config=gm.model.config)
    generated: list[str] = []

    def forward(names: list[str]) -> torch.Tensor:
        if layers is None:
            return gm.logits(cache, [gm.ids[t] for t in names])
        with layers.watching(names):
            logits = gm.logits(cache, [gm.ids[t] for t in names])
        if layers.first is not None:
            raise Divergence(len(generated) - 1, generated, layers.report(prompt))
        return logits

    logits = forward(prompt)
    stops = {T.name("end")} | {T.name(f"fault:{f}") for f in T.FAULTS}
    while True:
        nxt = int(torch.argmax(logits))
        if nxt not in gm.names:
            raise LaunchError(f"generated token {len(generated)} is text token id {nxt}, not a "
                              "circuit token (after: "
                              f"{' '.join(T.body(t) for t in generated[-4:])})")
        generated.append(gm.names[nxt])
        if expected is not None and generated[-1] != (expected + [None])[len(generated) - 1]:
            note = ("; every circuit layer held the reference semantics' values on the way"
                    if layers is not None else "")
            raise Divergence.token(len(generated) - 1, generated, expected, note)
        if generated[-1] in stops:
            break
        if len(generated) >= token_limit:
            last = [e for e in T.decode(generated[:-1]) if e.kind == "exec"][-1:]
            raise LaunchError(f"the launch did not end within {token_limit} generated tokens "
                              f"(a loop that never ends?); last block run: {last}")
        logits = forward([generated[-1]])
        if on_token is not None:
            on_token(len(generated) - 1, generated[-1], cache)
    if generated[-1] != T.name("end"):
        kind = T.body(generated[-1]).split(":")[1]
        raise LaunchError(f"the model reported a {kind} fault after {len(generated)} tokens "
                          f"(at {T.body(generated[-2])})", kind)
    rows = gm.bank_rows(cache, "gmem", limits.GLOBAL_WORDS, 32)
    memory = [v - (1 << 32) if v >> 31 else v for v in rows]
    return ModelRun(memory, len(prompt), generated)


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


class LayerCheck:
    """``--check`` inside the model: after every circuit layer, each feature whose writers have
    all run and whose dims are not cleared yet must hold exactly what the weight-free evaluator
    (the circuit's reference semantics, qgpu/compiler/evaluate.py) gives on the same tokens.
    Forward hooks on the circuit layers compare while the model runs; the first (token, layer)
    that differs is kept, with the features that differ there."""

    def __init__(self, gm: GpuModel) -> None:
        from qgpu.circuit.gpu import encoding, machine
        from qgpu.compiler.evaluate import Evaluator
        from qgpu.compiler.schedule import LayerShape, schedule

        sched = schedule(machine.build(), LayerShape.from_config(gm.model.config.to_dict()))
        g = sched.graph  # the graph the build compiled (packing.py rewrites the machine's)
        if sched.heads != gm.banks or sched.layers != gm.circuit_layers:
            raise UsageError(f"{gm.path} was built from another version of the GPU circuit "
                             "than this qgpu's: rebuild it (python -m qgpu build)")
        self.gm, self.encode, self.ev = gm, encoding.features, Evaluator(g)
        self.fed: list[str] = []  # every token the model has read
        self.first: tuple[int, int, list[str]] | None = None  # (fed index, layer, what differs)
        done: dict[str, int] = {n: -1 for n, f in g.features.items() if f.token_input}
        for bank, (layer, _) in sched.heads.items():
            for r in (r for r in g.reads if r.bank == bank):
                done[r.out] = max(done.get(r.out, -1), 2 * layer)
        last = {n: sched.clears[n][0] - 1 if n in sched.clears else sched.layers - 1
                for n in g.features}
        for grp, (layer, _) in sched.neurons.items():
            for f in g.rule_outputs[grp]:
                done[f] = max(done.get(f, -1), 2 * layer + 1)
                if g.features[f].alias:  # selection adds onto the token input's dims
                    target = g.features[f].alias
                    last[target] = min(last[target], layer - 1)
        self.plan = []  # per circuit layer: (residual dims, evaluator positions, offsets, names)
        for layer in range(sched.layers):
            dims, pos, off, names = [], [], [], []
            for n, f in g.features.items():
                if f.alias or not done[n] <= 2 * layer + 1 or layer > last[n]:
                    continue
                dims += [gm.d_base + d for d in sched.dims[n]]
                pos += [self.ev.offset[n] + i for i in range(f.size)]
                off += [sched.offset(n)] * f.size
                names += [f"{n}[{i}]" for i in range(f.size)]
            self.plan.append((torch.tensor(dims), torch.tensor(pos), torch.tensor(off), names))
        self._refs = torch.zeros(0)

    @contextmanager
    def watching(self, names: list[str]) -> Iterator[None]:
        """Hooks on the circuit layers while the model reads `names` (after what it read)."""
        base = len(self.fed)
        self._refs = torch.from_numpy(np.stack(
            [self.ev.step_vector(self.encode(n)).copy() for n in names])).float()
        self.fed += names
        layers = self.gm.model.model.layers
        hooks = [layers[i].register_forward_hook(self._hook(i, base))
                 for i in range(len(self.plan))]
        try:
            yield
        finally:
            for h in hooks:
                h.remove()

    def _hook(self, layer: int, base: int) -> Callable:
        dims, pos, off, names = self.plan[layer]

        def compare(module: torch.nn.Module, args: tuple, out: torch.Tensor) -> None:
            got = out[0][:, dims].float() - off
            want = self._refs[:, pos]
            bad = (got != want).nonzero()
            if not len(bad):
                return
            t = int(bad[0, 0])
            if self.first is not None and (self.first[0], self.first[1]) <= (base + t, layer):
                return
            cols = bad[bad[:, 0] == t, 1].tolist()
            self.first = (base + t, layer, [f"{names[c]} holds {got[t, c].item():g}, the "
                                            f"reference {want[t, c].item():g}" for c in cols])
        return compare

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
    """``--check``: the reference interpreter runs the launch first; the model's run must give
    its token stream exactly and leave every global word as the machine does (a launch that
    faults must fault the same way), and every circuit layer must hold the reference
    semantics' feature values at every token (``LayerCheck``). It stops at the first token or
    layer that differs and says where."""
    from qgpu.interp import run_program

    try:
        ref = run_program(launch.program, grid=launch.grid, block=launch.block,
                          params=launch.params, memory=launch.memory,
                          dynamic_shared=dynamic_shared, allocations=launch.allocations)
        expected, want = T.expected_tokens(launch, ref.trace), ref.memory
    except LaunchError as e:
        if e.fault not in T.FAULTS:
            raise
        expected, want = T.fault_tokens(launch, e), None
    try:
        run = run_launch(gm, launch, token_limit=token_limit, expected=expected,
                         layers=LayerCheck(gm))
    except Divergence as d:
        return ModelRun(None, len(T.prompt_tokens(launch)), d.generated, False, d.message)
    words = [w for w in range(limits.GLOBAL_WORDS)
             if run.memory[w] & 0xFFFFFFFF != want[w] & 0xFFFFFFFF]
    if words:
        w = words[0]
        run.exact, run.divergence = False, (f"global word {w}: the model holds {run.memory[w]}, "
                                            f"the reference machine {want[w]}")
    else:
        run.exact = True
    return run
