"""``python -m qgpu chat-eval``: the chat scored on question sets with exact answers.

The sets live in ``qgpu/chat/evalsets/``: ``normal.json`` (plain-word questions for gpu_calc,
covering every operation; one asks for an overflow, which the GPU must report instead of a
number) and ``advanced.json`` (tasks for cuda_launch: the model writes the kernel). Each item
carries a reference — an expression, or a kernel and launch — that tests run to keep the
answers honest; the model never sees it.

A normal question counts as answered when a gpu_calc call returned the expected value, every
launch of it was exact (checked against the machine token by token), and the final text holds
the number (for a vector or matrix: its numbers in order). An advanced task counts first-try
when the model's first cuda_launch left the answer in an output argument, and after repair
when any of its launches did; the final text must hold it too. On the tiny random base the
scores mean nothing — its text is noise, so it rarely even calls a tool; the command is meant
for a real base such as Qwen/Qwen3.5-2B (docs/CHAT.md).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from qgpu.chat.plan import flat
from qgpu.chat.session import Chat, ChatOptions, DoneEvent
from qgpu.chat.tools import ToolResult
from qgpu.errors import UsageError

EVALSETS = Path(__file__).resolve().parent / "evalsets"
SETS = ("normal", "advanced")
_INT = re.compile(r"(?<![\w.])-?\d+(?!\w|\.\d)")  # not inside words or decimals


def load_set(name: str) -> list[dict]:
    if name not in SETS:
        raise UsageError(f"--set must be one of {', '.join(SETS)}, not {name!r}")
    return json.loads((EVALSETS / f"{name}.json").read_text())["questions"]


def numbers(text: str) -> list[int]:
    """The integers written in a text, in order."""
    return [int(m) for m in _INT.findall(text)]


def holds(text: str, value: Any) -> bool:
    """Whether a text states a value: an integer among its numbers, a vector's or matrix's
    numbers one after another."""
    want = flat(value)
    got = numbers(text)
    return any(got[i:i + len(want)] == want for i in range(len(got) - len(want) + 1))


@dataclass
class Outcome:
    """One question: what the model did and how it scored."""

    id: str
    question: str
    expected: Any
    answer: str = ""
    calls: list[dict] = field(default_factory=list)
    called: bool = False
    gpu_value: bool = False  # a call computed the expected value (or reported the error)
    exact: bool = False  # ... with every launch exact
    first_try: bool = False  # the first call did
    in_text: bool = False  # the final text states it
    correct: bool = False
    rounds: int = 0
    generated_tokens: int = 0
    seconds: float = 0.0
    failure: str | None = None  # the turn itself failed (not a tool error)


def _call_json(r: ToolResult) -> dict:
    return {"title": r.title, "ok": r.ok, "value": r.value, "error": r.error,
            "launches": len(r.launches), "generated_tokens": r.generated_tokens,
            "exact": all(x.exact is not False for x in r.launches)}


def _matches(item: dict, r: ToolResult, mode: str) -> bool:
    if "error" in item:
        return not r.ok and r.error is not None and r.error["kind"] == item["error"]
    if not r.ok:
        return False
    if mode == "normal":
        return r.value == item["answer"]
    want = item["answer"] if isinstance(item["answer"], list) else [item["answer"]]
    return any(isinstance(a, list) and a == want for a in r.value)


def score(item: dict, done: DoneEvent, mode: str) -> Outcome:
    """How a finished turn answered one question."""
    expected = item.get("answer", {"error": item.get("error")})
    out = Outcome(item["id"], item["question"], expected, done.answer, rounds=done.rounds)
    results = done.results
    out.calls = [_call_json(r) for r in results]
    out.called = bool(results)
    hits = [r for r in results if _matches(item, r, mode)]
    out.gpu_value = bool(hits)
    out.exact = any(all(x.exact is not False for x in r.launches) for r in hits)
    out.first_try = bool(results) and _matches(item, results[0], mode)
    if "error" in item:
        out.in_text = item["error"].replace("_", " ") in done.answer.lower().replace("_", " ")
    else:
        out.in_text = holds(done.answer, item["answer"])
    out.correct = out.gpu_value and out.exact and out.in_text
    out.generated_tokens = sum(r.generated_tokens for r in results)
    return out


@dataclass
class Report:
    set: str
    model: str
    options: dict
    outcomes: list[Outcome]
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        o = self.outcomes
        return {"questions": len(o), "called a tool": sum(x.called for x in o),
                "GPU computed the answer": sum(x.gpu_value and x.exact for x in o),
                "first try": sum(x.first_try for x in o),
                "answered (GPU value in the text)": sum(x.correct for x in o)}

    def summary(self) -> str:
        c = self.counts()
        n = c["questions"] or 1
        lines = [f"chat-eval --set {self.set} on {self.model}: {c['questions']} questions, "
                 f"{self.seconds:.0f} s"]
        lines += [f"  {k}: {v}/{c['questions']} ({100 * v / n:.0f} %)"
                  for k, v in c.items() if k != "questions"]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"set": self.set, "model": self.model, "options": self.options,
                "counts": self.counts(), "seconds": round(self.seconds, 1),
                "outcomes": [asdict(o) for o in self.outcomes]}

    def markdown(self) -> str:
        rows = ["| id | correct | called | GPU value | first try | in text | tokens | answer |",
                "|---|---|---|---|---|---|---|---|"]
        for o in self.outcomes:
            answer = " ".join(o.answer.split())[:80].replace("|", "\\|")
            rows.append(f"| {o.id} | {'yes' if o.correct else 'no'} | {o.called:d} | "
                        f"{o.gpu_value:d} | {o.first_try:d} | {o.in_text:d} | "
                        f"{o.generated_tokens} | {answer or o.failure or ''} |")
        head, *counts = self.summary().splitlines()
        return (f"# {head}\n\n" + "\n".join(f"- {c.strip()}" for c in counts) + "\n\n"
                + "\n".join(rows) + "\n")


def evaluate(chat: Chat, set_name: str, items: list[dict], options: ChatOptions,
             model: str = "", on_outcome: Callable[[Outcome], None] | None = None) -> Report:
    """Ask every question in a fresh chat and score the turn."""
    t0 = time.perf_counter()
    outcomes = []
    for item in items:
        t = time.perf_counter()
        try:
            done = chat.ask([], item["question"], options)
            outcome = score(item, done, options.mode)
        except Exception as e:  # noqa: BLE001 (a failed turn is scored, the run goes on)
            outcome = Outcome(item["id"], item["question"], item.get("answer"),
                              failure=f"{type(e).__name__}: {e}")
        outcome.seconds = time.perf_counter() - t
        outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)
    options_json = {k: v for k, v in asdict(options).items() if k != "sampling"}
    return Report(set_name, model, options_json, outcomes, time.perf_counter() - t0)


def run_evaluation(set_name: str, build: str, out: Path, *, n: int | None = None,
                   dtype: str | None = None, device: str = "cpu", greedy: bool = False,
                   thinking: bool = False, seed: int = 0) -> Report:
    """Load a build's chat, run a question set (the first `n`), write the report as JSON to
    `out` and as Markdown beside it."""
    items = load_set(set_name)[:n]
    chat = Chat.load(build, dtype, device, check=True)
    options = ChatOptions(mode=set_name, thinking=thinking, greedy=greedy, seed=seed,
                          max_new_tokens=2048 if thinking else 768)

    def progress(o: Outcome) -> None:
        print(f"{o.id:18} {'correct' if o.correct else 'wrong  '} calls={len(o.calls)} "
              f"{o.seconds:6.1f} s  {' '.join(o.answer.split())[:60]}", flush=True)

    report = evaluate(chat, set_name, items, options, str(build), progress)
    out.write_text(json.dumps(report.to_json(), indent=1))
    out.with_suffix(".md").write_text(report.markdown())
    return report
