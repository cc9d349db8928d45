"""The host's tool loop: one chat turn, streamed as events.

    chat = Chat.load("build/gpu")                  # text path + tokenizer + the GPU, one checkpoint
    for event in chat.turn(history, "What is the dot product of [1,2,3] and [4,5,6]?"):
        ...                                        # TextEvent, CallEvent, LaunchEvent, ...
    history += event.messages                      # the last event is a DoneEvent

Like a CUDA driver reacting to a launch, the host lets the model write its turn (streamed;
thinking off by default; the model card's sampling or greedy), and when the model closes a
``<tool_call>`` (one opened inside thinking counts) it stops the text there, parses the call,
compiles, launches on the same model's GPU — each launch a sequence of its own — reads the
result from the model's state and answers with a ``<tool_response>``; the model then goes on.
At most `max_rounds` rounds of calls (4) per turn; a turn that still calls after them ends
without running those calls. Every failure goes back to the model as a tool response naming
its cause (tools.py).

The language model is pluggable (generate.Generator): ``TextModel`` generates, ``ScriptedModel``
plays given assistant texts so tests drive the loop — and real launches — deterministically.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qgpu.chat.calc import Launcher, LaunchRecord
from qgpu.chat.generate import Generator, Sampling, TextModel
from qgpu.chat.prompts import SYSTEM
from qgpu.chat.toolcalls import (
    ToolCall,
    parse_tool_calls,
    split_reasoning,
    stop_after_calls,
    thinking_end,
)
from qgpu.chat.tools import TOOLS, ToolResult, ToolRunner, title
from qgpu.errors import UsageError

MODES = ("normal", "advanced")
MAX_CALLS_PER_ROUND = 4


@dataclass
class ChatOptions:
    """How one turn runs. `sampling` overrides the model card's defaults (thinking or not)."""

    mode: str = "normal"  # "normal" (gpu_calc) or "advanced" (cuda_launch)
    thinking: bool = False
    greedy: bool = False
    max_rounds: int = 4
    max_new_tokens: int = 1024
    grammar: bool = True  # constrain gpu_calc's expression to the calculator's language
    seed: int | None = None
    sampling: Sampling | None = None

    def resolved_sampling(self) -> Sampling:
        if self.sampling is not None:
            return self.sampling
        return Sampling.default(self.thinking, greedy=self.greedy,
                                max_new_tokens=self.max_new_tokens, seed=self.seed)


@dataclass
class TextEvent:
    """A piece of the assistant's text as it streams (`thinking`: inside its reasoning)."""

    text: str
    thinking: bool
    round: int
    kind: str = "text"


@dataclass
class CallEvent:
    """The model closed a tool call; the host is about to run it (the page shows it pending).
    `call` numbers the calls of this turn from 0."""

    call: int
    name: str | None
    arguments: dict[str, Any]
    title: str
    round: int
    kind: str = "call"


@dataclass
class ProgressEvent:
    """A model launch of call `call` has generated `tokens` tokens (of `total`, when the launch
    is checked against the machine)."""

    call: int
    what: str
    tokens: int
    total: int | None
    kind: str = "progress"


@dataclass
class LaunchEvent:
    """One launch of call `call` finished (calculations take several)."""

    call: int
    record: LaunchRecord
    kind: str = "launch"


@dataclass
class ResultEvent:
    """Call `call` is done: its response (what the model reads), value or error, launches."""

    call: int
    result: ToolResult
    kind: str = "result"


@dataclass
class DoneEvent:
    """The turn is over. `messages` are the turn's new chat messages (the user's, each
    assistant round with its tool calls, the tool responses, the final answer) to append to
    the history; `answer` is the final text without reasoning."""

    messages: list[dict]
    answer: str
    results: list[ToolResult] = field(default_factory=list)
    rounds: int = 0
    limit_reached: bool = False
    kind: str = "done"


Event = TextEvent | CallEvent | ProgressEvent | LaunchEvent | ResultEvent | DoneEvent


class Chat:
    """A language model (generate.Generator) and the GPU it calls (calc.Launcher)."""

    def __init__(self, generator: Generator, launcher: Launcher, grammar: Any = None) -> None:
        self.generator, self.launcher, self.grammar = generator, launcher, grammar

    @classmethod
    def load(cls, build: str | Path, dtype: str | None = None, device: str = "cpu",
             engine: str = "sparse", check: bool = True, token_limit: int = 20_000,
             gpu: Any = None) -> Chat:
        """A build's (or a merged checkpoint's) text path and tokenizer for the chat, and the
        GPU in the same checkpoint for the launches (``runtime.GpuModel``; pass `gpu` to share
        one already loaded, e.g. by the page's CUDA tab). `check`: every launch also runs on
        the reference machine and must match it exactly."""
        from qgpu.chat.grammar import ExpressionGrammar
        from qgpu.runtime import GpuModel

        text = TextModel.load(build, dtype, device)
        gpu = gpu or GpuModel.load(build, dtype, device, engine)
        return cls(text, Launcher("model", gpu, check=check, token_limit=token_limit),
                   ExpressionGrammar(text.tokenizer, text.vocab))

    def ask(self, history: list[dict], user: str, options: ChatOptions | None = None) \
            -> DoneEvent:
        """``turn`` without the stream: its DoneEvent."""
        *_, done = self.turn(history, user, options)
        return done

    def turn(self, history: list[dict], user: str, options: ChatOptions | None = None) \
            -> Iterator[Event]:
        """One user message through to the model's final answer (see the module docstring).
        `history`: the earlier messages (without a system message the mode's is used)."""
        opts = options or ChatOptions()
        if opts.mode not in MODES:
            raise UsageError(f"chat mode must be one of {', '.join(MODES)}, not {opts.mode!r}")
        base = list(history)
        if not base or base[0].get("role") != "system":
            base = [{"role": "system", "content": SYSTEM[opts.mode]}, *base]
        new: list[dict] = [{"role": "user", "content": user}]
        tools = TOOLS[opts.mode]
        sampling = opts.resolved_sampling()
        constrain = self.grammar if opts.grammar and opts.mode == "normal" else None
        results: list[ToolResult] = []
        for rnd in range(opts.max_rounds + 1):
            prompt = self.generator.render(base + new, tools, opts.thinking)
            text = ""
            for piece in self.generator.stream(prompt, sampling, stop_after_calls, constrain):
                thinking = 0 <= len(text) < thinking_end(text + piece, opts.thinking)
                text += piece
                yield TextEvent(piece, thinking, rnd)
            calls = parse_tool_calls(text, opts.thinking)
            if not calls or rnd == opts.max_rounds:
                reasoning, content = split_reasoning(text, opts.thinking)
                new.append(_assistant(content, reasoning))
                yield DoneEvent(new, content.strip(), results, rnd, bool(calls))
                return
            reasoning, content = split_reasoning(text[:calls[0].start], opts.thinking)
            unnamed = "".join(text[c.start:c.end] for c in calls if not c.name)
            message = _assistant(content + unnamed, reasoning)
            message["tool_calls"] = [c.message() for c in calls if c.name]
            new.append(message)
            for i, call in enumerate(calls):
                number = len(results)
                yield CallEvent(number, call.name, dict(call.arguments), title(call), rnd)
                if i >= MAX_CALLS_PER_ROUND:
                    result = _refused(call, f"at most {MAX_CALLS_PER_ROUND} tool calls at once")
                else:
                    result = yield from self._run(call, number)
                results.append(result)
                new.append({"role": "tool", "content": result.response})
                yield ResultEvent(number, result)

    def _run(self, call: ToolCall, number: int) -> Iterator[Event]:
        """Run one call in a worker thread, passing its launches and progress on as events;
        returns its ToolResult."""
        events: queue.Queue = queue.Queue()
        runner = ToolRunner(self.launcher.with_progress(
            lambda what, n, total: events.put(ProgressEvent(number, what, n, total))))

        def work() -> None:
            try:
                events.put(runner.run(call, lambda r: events.put(LaunchEvent(number, r))))
            except BaseException as e:  # noqa: BLE001 (handed to the loop, re-raised there)
                events.put(e)

        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        try:
            while True:
                item = events.get()
                if isinstance(item, ToolResult):
                    return item
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            worker.join()


def _assistant(content: str, reasoning: str) -> dict:
    message = {"role": "assistant", "content": content.strip()}
    if reasoning.strip():
        message["reasoning_content"] = reasoning.strip()
    return message


def _refused(call: ToolCall, why: str) -> ToolResult:
    import json

    error = {"kind": "tool_call", "message": why}
    return ToolResult(call.name or "", dict(call.arguments), title(call),
                      json.dumps({"error": error}), False, error=error)
