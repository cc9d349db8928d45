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
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM
from transformers.cache_utils import DynamicCache

from qgpu import limits
from qgpu import tokens as T
from qgpu.compiler import numerics as nx
from qgpu.compiler.circuit_model import DTYPES
from qgpu.driver import Placement
from qgpu.errors import LaunchError, UsageError
from qgpu.interp import check_launch
from qgpu.isa import Program
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
        return cls(model, dict(meta["token_ids"]), banks, dtype, path)

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


def make_launch(prog: Program, grid: tuple[int, int], block: tuple[int, int],
                place: Placement, dynamic_shared: int = 0) -> T.Launch:
    """A launch of a lowered program with placed arguments, checked as every backend checks
    it (interp.check_launch)."""
    shared = check_launch(prog, grid, block, place.params, place.memory, dynamic_shared)
    return T.Launch(prog, grid, block, place.params, place.memory, place.allocations,
                    shared // 4)


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
               expected: list[str] | None = None,
               on_token: Callable[[int, str, DynamicCache], None] | None = None) -> ModelRun:
    """Prompt the model with a launch and let it generate greedily until END or a fault. With
    `expected` (the reference stream), stop at the first token that differs and say where.
    `on_token(i, token, cache)` runs once the model has read generated token i back (its state
    then holds everything up to it: ``GpuModel.machine_state`` decodes it, for views)."""
    prompt = T.prompt_tokens(launch)
    cache = DynamicCache(config=gm.model.config)
    logits = gm.logits(cache, [gm.ids[t] for t in prompt])
    stops = {T.name("end")} | {T.name(f"fault:{f}") for f in T.FAULTS}
    generated: list[str] = []
    while True:
        nxt = int(torch.argmax(logits))
        if nxt not in gm.names:
            raise LaunchError(f"generated token {len(generated)} is text token id {nxt}, not a "
                              "circuit token (after: "
                              f"{' '.join(T.body(t) for t in generated[-4:])})")
        generated.append(gm.names[nxt])
        if expected is not None and generated[-1] != (expected + [None])[len(generated) - 1]:
            raise Divergence(len(generated) - 1, generated, expected)
        if generated[-1] in stops:
            break
        if len(generated) >= token_limit:
            last = [e for e in T.decode(generated[:-1]) if e.kind == "exec"][-1:]
            raise LaunchError(f"the launch did not end within {token_limit} generated tokens "
                              f"(a loop that never ends?); last block run: {last}")
        logits = gm.logits(cache, [nxt])
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
    """The model's stream left the reference stream (--check): where and how."""

    def __init__(self, index: int, generated: list[str], expected: list[str]) -> None:
        got = T.body(generated[index])
        want = T.body(expected[index]) if index < len(expected) else "(the stream had ended)"
        context = " ".join(T.body(t) for t in generated[max(0, index - 4):index])
        super().__init__(f"generated token {index} is {got}, the reference machine says {want} "
                         f"(after: {context})")
        self.index, self.generated = index, generated


def run_checked(gm: GpuModel, launch: T.Launch, *, dynamic_shared: int = 0,
                token_limit: int = DEFAULT_TOKEN_LIMIT) -> ModelRun:
    """``--check``: the reference interpreter runs the launch first; the model's run must give
    its token stream exactly (stopping at the first token that differs) and leave every global
    word as the machine does. A launch that faults must fault the same way."""
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
        run = run_launch(gm, launch, token_limit=token_limit, expected=expected)
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
