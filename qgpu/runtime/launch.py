"""The driver of the GPU inside the model: launch a lowered kernel, let the model write it.

The model is a merged checkpoint (``python -m qgpu build``: base + GPU circuit, a stock
``Qwen3_5ForCausalLM``), run by the sparse engine over its circuit layers (engine.py) or whole
in stock transformers (stock.py). The host builds the prompt (protocol.prompt_tokens), then only
feeds back the model's own greedy choices over its whole vocabulary, token by token, until the
model chooses ``end`` (or a fault); results are read from the model's recurrent state — global
memory is the ``gmem`` bank, one GDN head whose row w holds word w. The host computes nothing:
no interpreter runs unless a check asks for one, and then only to compare
(tests/runtime/test_launch.py runs launches with the interpreter unavailable).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from qgpu import protocol as T
from qgpu.errors import LaunchError
from qgpu.machine import limits
from qgpu.machine.races import Race
from qgpu.runtime.check import Divergence, LayerCheck
from qgpu.runtime.checkpoint import GpuModel, Session

DEFAULT_TOKEN_LIMIT = 200_000
"""Generated tokens per launch before a runaway launch is stopped."""


@dataclass
class ModelRun:
    """A launch the model ran: what it generated and what it left in global memory; with a
    check, whether every token and word was the reference machine's, else the first that was
    not (then `memory` is None if the stream diverged). `seconds` times its batch's prefill
    and decode. `races`: with a check, the data races the reference replay saw (the model
    runs the launch as the machine does; the replay is what can tell)."""

    memory: list[int] | None  # int32 words, as the gmem bank holds them
    prompt_tokens: int
    generated: list[str]
    exact: bool | None = None
    divergence: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    races: list[Race] = field(default_factory=list)


def run_launch(gm: GpuModel, launch: T.Launch, *, token_limit: int = DEFAULT_TOKEN_LIMIT,
               expected: list[str] | None = None, check_layers: bool = False,
               on_token: Callable[[int, str, Session], None] | None = None) -> ModelRun:
    """Prompt the model with a launch and let it generate greedily until END or a fault (a
    fault, a runaway launch or a divergence raises its LaunchError). With `expected` (the
    reference stream), stop at the first token that differs and say where; with
    `check_layers`, also at the first circuit layer whose features differ from the reference
    semantics. `on_token(i, token, session)` runs once the model has read generated token i
    back (its state then holds everything up to it: ``GpuModel.machine_state`` decodes it)."""
    out = run_batch(gm, [launch], token_limit=token_limit,
                    expected=None if expected is None else [expected],
                    check_layers=check_layers,
                    on_token=None if on_token is None else lambda b, i, t, s: on_token(i, t, s))
    if isinstance(out[0], LaunchError):
        raise out[0]
    return out[0]


def run_batch(gm: GpuModel, launches: list[T.Launch], *,
              token_limit: int = DEFAULT_TOKEN_LIMIT, expected: list[list[str]] | None = None,
              check_layers: bool = False,
              on_token: Callable[[int, int, str, Session], None] | None = None) \
        -> list[ModelRun | LaunchError]:
    """Several launches side by side, one sequence each of one batch (``GpuModel.session``),
    one decode step for every launch still running per generated token — the weights are
    read once for all of them. Each launch ends on its own (END, a fault, the token limit, a
    divergence) with its ModelRun or its LaunchError; `on_token(b, i, token, session)` as in
    ``run_launch`` for launch b."""
    reference = gm.reference if check_layers else None
    rows = [_Row(T.prompt_tokens(launch), None if expected is None else expected[b],
                 None if reference is None else LayerCheck(reference))
            for b, launch in enumerate(launches)]
    session = gm.session()
    t0 = time.perf_counter()
    chosen = session.prefill([[gm.ids[t] for t in r.prompt] for r in rows],
                             _layer_check(rows, [r.prompt for r in rows]))
    seconds = {"prefill": time.perf_counter() - t0, "decode": 0.0}
    t0 = time.perf_counter()
    while True:
        for b, r in enumerate(rows):
            if r.outcome is None:
                r.choose(gm, chosen[b], token_limit, session, b)
        if all(r.outcome is not None for r in rows):
            break
        feeds = [None if r.outcome is not None else r.generated[-1] for r in rows]
        chosen = session.step([None if t is None else gm.ids[t] for t in feeds],
                              _layer_check(rows, [[t] if t else [] for t in feeds]))
        if on_token is not None:
            for b, r in enumerate(rows):
                if r.outcome is None:
                    on_token(b, len(r.generated) - 1, r.generated[-1], session)
    seconds["decode"] = time.perf_counter() - t0
    for r in rows:
        if isinstance(r.outcome, ModelRun):
            r.outcome.seconds = seconds
    return [r.outcome for r in rows]


def _layer_check(rows: list[_Row], feeds: list[list[str]]):
    """The on_layer callback comparing every checked, running row's circuit layers as they run
    (None when no row is checked); a row whose check finds a difference ends there."""
    checks = {b: r.check for b, r in enumerate(rows)
              if r.check is not None and r.outcome is None and feeds[b]}
    if not checks:
        return None
    for b, check in checks.items():
        check.feed(feeds[b])

    def on_layer(layer: int, b: int, hidden) -> None:
        if b in checks:
            checks[b].compare(layer, hidden)
            if layer == len(checks[b].reference.plan) - 1 and checks[b].first is not None:
                r = rows[b]
                r.outcome = Divergence(len(r.generated) - 1, r.generated,
                                       checks[b].report(r.prompt))
    return on_layer


@dataclass
class _Row:
    """One launch of a batch while it runs."""

    prompt: list[str]
    expected: list[str] | None
    check: LayerCheck | None
    generated: list[str] = field(default_factory=list)
    outcome: ModelRun | LaunchError | None = None

    def choose(self, gm: GpuModel, nxt: int, token_limit: int, session: Session,
               b: int) -> None:
        """Take the model's greedy choice; settle the outcome when the launch is over."""
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
            rows = gm.bank_rows(session, "gmem", limits.GLOBAL_WORDS, 32, b)
            memory = [v - (1 << 32) if v >> 31 else v for v in rows]
            self.outcome = ModelRun(memory, len(self.prompt), generated)
        elif T.body(generated[-1]).startswith("fault:"):
            kind = T.body(generated[-1]).split(":")[1]
            self.outcome = LaunchError(f"the model reported a {kind} fault after "
                                       f"{len(generated)} tokens (at {T.body(generated[-2])})",
                                       kind)
        elif len(generated) >= token_limit:
            # the limit may cut a frame: look for the last EXEC token itself, not decoded events
            last = next((T.body(t) for t in reversed(generated) if T.body(t).startswith("exec:")),
                        "none")
            self.outcome = LaunchError(f"the launch did not end within {token_limit} generated "
                                       f"tokens (a loop that never ends? a longer launch needs "
                                       f"--step-limit N, step_limit=N in the API); last block "
                                       f"run: {last}")


def run_checked(gm: GpuModel, launch: T.Launch, *,
                token_limit: int = DEFAULT_TOKEN_LIMIT) -> ModelRun:
    """``--check`` of one launch (``run_checked_batch``)."""
    out = run_checked_batch(gm, [launch], token_limit=token_limit)[0]
    if isinstance(out, LaunchError):
        raise out
    return out


def run_checked_batch(gm: GpuModel, launches: list[T.Launch], *,
                      token_limit: int = DEFAULT_TOKEN_LIMIT, layers: bool = True) \
        -> list[ModelRun | LaunchError]:
    """``--check``: the reference interpreter runs each launch first; the model's run must give
    its token stream exactly and leave every global word as the machine does (a launch that
    faults must fault the same way), and every circuit layer must hold the reference
    semantics' feature values at every token (``LayerCheck``; `layers` False leaves that out:
    the evaluator costs ~20 ms of one CPU core per token and launch). Each stops at the first
    token or layer that differs and says where (a ModelRun with exact False); a launch the
    interpreter rejects gives its error."""
    refs = [T.reference(launch) for launch in launches]
    for ref in refs:
        if ref.tokens is None:
            raise ref.error
    expected: list[list[str]] = [ref.tokens for ref in refs]
    wants = [ref.memory for ref in refs]
    races = [ref.races for ref in refs]
    runs = run_batch(gm, launches, token_limit=token_limit, expected=expected,
                     check_layers=layers)
    out: list[ModelRun | LaunchError] = []
    for launch, run, want, found in zip(launches, runs, wants, races, strict=True):
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
        if isinstance(run, ModelRun):
            run.races = found
        out.append(run)
    return out
