"""The chat tab: a conversation whose numbers come from launches on the GPU inside the model
(``qgpu.chat``), on the one model the page already holds.

Normal mode gives the model ``gpu_calc(expression)``, advanced mode ``cuda_launch`` (it writes
the CUDA). Text streams into the ``gr.Chatbot`` as the model writes it; each tool call is a
collapsible message (Gradio's metadata title and status: pending while it runs, with the
launch's progress, then done with its launches, tokens, time and result or error). Every launch
a chat turn runs is recorded token by token like a CUDA-tab run — the machine state the model
holds after each generated token — so it can be opened in the CUDA tab's views: the turn's last
message offers a button per launch, and the picker under the chat lists every launch of the
session; opening one fills the CUDA tab (source, launch, arguments, result, tokens, views) and
switches to it. Nothing is replayed: the views show the launch the chat ran.

Turns run one at a time (concurrency id ``chat``); their launches take turns on the model with
the CUDA tab's (``runtime.Turns``); what a session said and ran is its own (``ChatSession`` in
a ``gr.State``). Errors are messages, never tracebacks. The language model is the build's text
path, loaded at the first message; tests pass a scripted one (``generate.ScriptedModel``).
"""

from __future__ import annotations

import json
import re
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gradio as gr

from qgpu.app import panels, space
from qgpu.app.launches import new_recording, params_of
from qgpu.app.recording import Recording, Snapshot
from qgpu.chat.calc import Launcher, LaunchRecord, suite_source
from qgpu.chat.session import Chat, ChatOptions
from qgpu.chat.toolcalls import OPEN, split_reasoning
from qgpu.driver import SUITE_DIR
from qgpu.errors import QgpuError, UsageError

if TYPE_CHECKING:
    from qgpu.app.cuda_tab import CudaTab
    from qgpu.app.host import ModelHost
    from qgpu.chat.generate import Generator
    from qgpu.chat.tools import ToolResult

CHAT = "chat"
"""The chat turns' concurrency id: one turn at a time writes with the shared language model; its
launches take turns on the GPU model with the CUDA tab's (runtime.Turns)."""
STREAM_EVERY_S = 0.1  # text and progress reach the page at most this often
MAX_OPTIONS = 6  # launch buttons under a turn's last message (the picker lists them all)
MAX_MESSAGE_CHARS = 8_000
"""Longest message a user may send (a CUDA kernel and a question fit; the prompt the language
model reads grows with each message, so a pasted book is refused, not tokenized)."""

MODES = [("Normal: the model calls gpu_calc(expression)", "normal"),
         ("Advanced: the model writes CUDA (cuda_launch)", "advanced")]

EXAMPLES = {
    "normal": ["What is the dot product of [1, 2, 3] and [4, 5, 6]?",
               "Multiply the matrices [[1, 2], [3, 4]] and [[5, 6], [7, 8]].",
               "What is the sum of [3, 1, 4, 1, 5, 9, 2, 6]?",
               "Sort [5, 3, 9, 1, 7]."],
    "advanced": ["Write a CUDA kernel that adds [1, 2, 3, 4] and [10, 20, 30, 40] and run it.",
                 "Write a CUDA kernel for the running sum of [1, 2, 3, 4, 5] and run it."],
}

CSS = """
#chatbot .message-wrap pre {font-size: 12px;}
#chat-launch-row {align-items: end;}
"""

_CUDA_FENCE = re.compile(r"```[ \t]*(?:cpp|c\+\+|cuda|cu|cxx|cc)(?=[ \t]*\n)", re.IGNORECASE)
_TAGS = (OPEN, "<function=")


def c_fences(text: str) -> str:
    """Code fences a model may write for CUDA (cpp, c++, cuda, ...) as ```c: Gradio 6 renders
    a ```cpp fence blank in a chat message."""
    return _CUDA_FENCE.sub("```c", text)


def code_block(source: str, language: str = "c") -> str:
    """`source` in a fence longer than any run of backticks inside it."""
    runs = [len(m) for m in re.findall(r"`+", source)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}{language}\n{source.strip(chr(10))}\n{fence}"


def _before_calls(text: str) -> str:
    """What the page shows of an assistant's text: up to its first tool call (the call is its
    own message), without a tag still being written at the end."""
    cut = min([i for i in (text.find(t) for t in _TAGS) if i >= 0], default=len(text))
    head = text[:cut]
    for tag in _TAGS:
        for k in range(len(tag) - 1, 0, -1):
            if head.endswith(tag[:k]):
                head = head[:-k]
                break
    return head.strip()


def _json(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "))


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _dims(d: tuple[int, int]) -> str:
    return str(d[0]) if d[1] == 1 else f"{d[0]},{d[1]}"


# --- what a session keeps -------------------------------------------------------------------


@dataclass
class ChatLaunch:
    """One launch a chat turn ran, recorded for the CUDA tab's views. `record` is set when it
    succeeded; `error` ({"kind", "message"}) when the model faulted, ran out of tokens or
    differed from the machine."""

    id: int
    call: str  # the tool call's title
    what: str  # the operation (expression text, or kernel<<<grid, block>>>)
    kernel: str
    source: str  # the kernel's CUDA
    grid: tuple[int, int]
    block: tuple[int, int]
    args: list[Any]  # the inputs, in the driver's JSON form
    recording: Recording
    engine: str = "sparse"
    record: LaunchRecord | None = None
    seconds: dict[str, float] | float = 0.0
    error: dict[str, str] | None = None

    @property
    def done(self) -> bool:
        return self.record is not None or self.error is not None

    def label(self) -> str:
        n = len(self.recording)
        how = "exact" if self.record is not None and self.record.exact else "done" \
            if self.record is not None else f"{self.error['kind']} error" if self.error \
            else "running"
        what = "" if self.what.startswith(f"{self.kernel}<<<") else f": {self.what}"
        return f"{self.id} · {self.kernel}{what} ({n} tokens, {how})"


@dataclass
class ChatSession:
    """A session's chat: the messages the model reads (transformers' format), what the page
    shows (Gradio message dicts), and every launch by id."""

    history: list[dict] = field(default_factory=list)
    view: list[dict] = field(default_factory=list)
    launches: dict[int, ChatLaunch] = field(default_factory=dict)

    def picker(self, select: int | None = None) -> dict:
        """The launch picker's choices, newest first."""
        choices = [(x.label(), str(x.id)) for x in reversed(self.launches.values())]
        value = str(select) if select is not None else (choices[0][1] if choices else None)
        return gr.update(choices=choices, value=value, interactive=bool(choices))


class _Recorder:
    """A LaunchWatch: the state the model holds after every token of one chat launch."""

    def __init__(self, host: ModelHost, launch: ChatLaunch) -> None:
        self.host, self.launch = host, launch

    def token(self, i: int, token: str, session: Any) -> None:
        self.launch.recording.add(token, Snapshot.of(self.host.gm.machine_state(session)))

    def done(self, run: Any, error: BaseException | None) -> None:
        from qgpu import protocol as T

        rec = self.launch.recording
        if run is not None:
            for tok in run.generated[len(rec):]:
                rec.add(tok, None)  # END: the model never reads it back
            self.launch.seconds = dict(run.seconds)
        fault = getattr(error, "fault", None)
        if error is None:
            rec.outcome = "end"
        elif fault and run is None:
            rec.outcome = f"fault:{fault}"
            rec.add(T.name(f"fault:{fault}"), None)
        else:
            rec.outcome = "error"
        if error is not None:
            self.launch.error = {"kind": getattr(error, "kind", "internal"),
                                 "message": getattr(error, "message", str(error))}


# --- one turn as the page shows it ------------------------------------------------------------


@dataclass
class _Call:
    """A tool call's message: pending while it runs, then done."""

    number: int
    title: str
    name: str | None
    arguments: dict[str, Any]
    launches: list[ChatLaunch] = field(default_factory=list)
    progress: tuple[str, int, int | None] | None = None
    result: ToolResult | None = None
    interrupted: bool = False

    def message(self) -> dict:
        lines = []
        if self.name == "cuda_launch":
            source = str(self.arguments.get("source", ""))
            if source.strip():
                lines.append(code_block(source))
            shape = (f"`{self.arguments.get('kernel', '?')}` · grid "
                     f"`{str(self.arguments.get('grid', '?')).strip()}` · block "
                     f"`{str(self.arguments.get('block', '?')).strip()}`")
            lines.append(shape + f" · args `{str(self.arguments.get('args', '')).strip()}`")
        elif self.name == "gpu_calc":
            lines.append(f"`gpu_calc({str(self.arguments.get('expression', '')).strip()})`")
        for x in self.launches:
            lines.append(self._launch_line(x))
        if self.progress is not None and self.result is None and not self.interrupted:
            what, n, total = self.progress
            lines.append(f"⏳ the model is writing the launch of {what}: {n}"
                         + (f" / {total}" if total else "") + " tokens")
        r = self.result
        if r is not None and r.ok:
            lines.append(f"**Result:** `{_json(r.value)}`")
        elif r is not None:
            err = r.error or {}
            lines.append(f"**Error** ({err.get('kind', '?')}), sent back to the model:\n"
                         + code_block(err.get("message", ""), "text"))
        elif self.interrupted:
            lines.append("*(interrupted)*")
        metadata: dict[str, Any] = {"title": self.title}
        tokens = sum(len(x.recording) for x in self.launches)
        n = len(self.launches)
        count = f"{n} launch{'es' * (n != 1)}, {tokens} generated tokens"
        if r is None and not self.interrupted:  # the title line says how far it got
            metadata["status"] = "pending"
            if self.progress is not None:
                what, k, total = self.progress
                which = f"launch {self.launches[-1].id}" if self.launches else "launch"
                metadata["log"] = f"{which}: {k}" + (f" / {total}" if total else "") + " tokens"
            else:
                metadata["log"] = "running on the GPU inside the model"
        else:  # closed: the title line carries the answer
            metadata["status"] = "done"
            if r is not None and r.ok:
                metadata["log"] = f"= {_short(_json(r.value))} · {count}"
            elif r is not None:
                metadata["log"] = f"{(r.error or {}).get('kind', 'error')} error · {count}"
            else:
                metadata["log"] = f"interrupted · {count}"
            if r is not None:
                metadata["duration"] = round(r.seconds, 2)
        return {"role": "assistant", "content": "\n\n".join(lines), "metadata": metadata}

    @staticmethod
    def _launch_line(x: ChatLaunch) -> str:
        head = f"**launch {x.id}** `{x.kernel}<<<{_dims(x.grid)}, {_dims(x.block)}>>>`"
        if not x.what.startswith(f"{x.kernel}<<<"):  # cuda_launch's `what` is the same
            head += f" {x.what}"
        if x.record is not None:
            check = " · exact ✓" if x.record.exact else ""
            return (f"{head} · {x.record.generated_tokens} generated tokens in "
                    f"{x.record.seconds:.2f} s{check}")
        if x.error is not None:
            return f"{head} → {x.error['kind']} error after {len(x.recording)} tokens"
        return head


@dataclass
class _Round:
    raw: str = ""
    calls: list[_Call] = field(default_factory=list)


@dataclass
class _Turn:
    """What one turn shows: the user's message, then each round's thinking, text and calls."""

    user: str
    thinking: bool
    rounds: list[_Round] = field(default_factory=list)
    note: str | None = None  # loading, an error, stopped
    options: list[dict] = field(default_factory=list)
    over: bool = False

    def messages(self) -> list[dict]:
        out: list[dict] = [{"role": "user", "content": c_fences(self.user)}]
        for k, rnd in enumerate(self.rounds):
            reasoning, content = split_reasoning(rnd.raw, self.thinking)
            reasoning, content = _before_calls(reasoning), _before_calls(content)
            open_ = not self.over and k == len(self.rounds) - 1 and not content and \
                not rnd.calls
            if reasoning:
                out.append({"role": "assistant", "content": c_fences(reasoning),
                            "metadata": {"title": "Thinking",
                                         "status": "pending" if open_ else "done"}})
            if content:
                out.append({"role": "assistant", "content": c_fences(content)})
            out += [c.message() for c in rnd.calls]
        if self.note:
            out.append({"role": "assistant", "content": self.note})
        if self.over and len(out) == 1:
            out.append({"role": "assistant", "content": "*(no answer)*"})
        if self.options and out[-1]["role"] == "assistant":
            out[-1] = {**out[-1], "options": self.options}
        return out


class _TurnLaunches:
    """A turn's calls and launches as its events and the launch thread report them: each
    launch recorded (``watch``, in the call's thread), then numbered in the session and put in
    its call's message (``adopt``, in the page's thread)."""

    def __init__(self, host: ModelHost, cuda: CudaTab, session: ChatSession,
                 turn: _Turn) -> None:
        self.host, self.cuda, self.session, self.turn = host, cuda, session, turn
        self.started: list[ChatLaunch] = []  # appended by the call's thread
        self.new: list[ChatLaunch] = []  # this turn's launches, numbered
        self.calls: dict[int, _Call] = {}
        self.current: _Call | None = None

    def watch(self, launch: Any, kernel: Any, args: list[Any], what: str) -> _Recorder:
        """calc.Launcher's watch: a recording of this launch (its CUDA: the model's for
        cuda_launch, the suite kernel's for gpu_calc)."""
        call = self.current
        source = str(call.arguments.get("source") or "") \
            if call is not None and call.name == "cuda_launch" else ""
        if not source and (SUITE_DIR / f"{kernel.name}.cu").is_file():
            source = suite_source(kernel.name)
        place = kernel.place(args)
        rec = new_recording(launch, kernel.name, params_of(kernel, place, args, source),
                            self.cuda.new_run_id())
        x = ChatLaunch(0, call.title if call is not None else "", what, kernel.name, source,
                       tuple(launch.grid), tuple(launch.block), list(args), rec,
                       self.host.gm.engine)
        self.started.append(x)
        return _Recorder(self.host, x)

    def adopt(self) -> None:
        """Number the launches the call's thread started, in this session, in order."""
        while self.started:
            x = self.started.pop(0)
            x.id = max(self.session.launches, default=0) + 1
            self.session.launches[x.id] = x
            self.new.append(x)
            if self.current is not None:
                self.current.launches.append(x)

    def apply(self, event: Any) -> None:
        """One event of ``Chat.turn`` into the turn's messages."""
        kind = event.kind
        self.adopt()
        if kind in ("text", "call"):
            while len(self.turn.rounds) <= event.round:
                self.turn.rounds.append(_Round())
        if kind == "text":
            self.turn.rounds[event.round].raw += event.text
        elif kind == "call":
            call = _Call(event.call, event.title, event.name, event.arguments)
            self.turn.rounds[event.round].calls.append(call)
            self.calls[event.call] = self.current = call
        elif kind == "progress":
            self.calls[event.call].progress = (event.what, event.tokens, event.total)
        elif kind == "launch":
            call = self.calls[event.call]
            x = next((x for x in reversed(call.launches) if not x.done), None)
            if x is not None:
                x.record = event.record
            call.progress = None
        elif kind == "result":
            self.calls[event.call].result = event.result


# --- the tab ----------------------------------------------------------------------------------


class ChatTab:
    """The chat tab's components and event functions, over the page's ModelHost and its CUDA
    tab (whose views show a chat launch). `generator`: the language model (default: the
    build's text path, loaded at the first message); tests pass a scripted one."""

    def __init__(self, host: ModelHost, cuda: CudaTab, generator: Generator | None = None,
                 grammar: Any = None) -> None:
        self.host, self.cuda = host, cuda
        self._generator, self._grammar = generator, grammar
        self._load_lock = threading.Lock()
        self._stops: dict[str, threading.Event] = {}

    # --- the language model --------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._generator is not None

    def language_model(self) -> tuple[Generator, Any]:
        """The generator and the grammar of gpu_calc's expression, loaded once (the text path of
        the build the CUDA tab runs: the same checkpoint)."""
        with self._load_lock:
            if self._generator is None:
                from qgpu.chat.generate import TextModel
                from qgpu.chat.grammar import ExpressionGrammar

                gm = self.host.gm
                text = TextModel.load(gm.path, gm.dtype, str(gm.device))
                self._generator = text
                self._grammar = ExpressionGrammar(text.tokenizer, text.vocab)
        return self._generator, self._grammar

    # --- a turn --------------------------------------------------------------------------------

    def send(self, text: str, session: ChatSession | None, mode: str, thinking: bool,
             greedy: bool, max_tokens: float | None = None,
             request: gr.Request | None = None) -> Iterator[tuple]:
        """The user's message through to the model's answer, streamed: text as the model writes
        it, each tool call as a message (pending, then done), the launches recorded for the
        views; `max_tokens` bounds each reply the model writes (None: ChatOptions' default).
        Outputs: (chatbot, session, launch picker, input box)."""
        session = session or ChatSession()
        text = (text or "").strip()
        if not text:
            yield session.view, session, gr.skip(), gr.skip()
            return
        key = _key(request)
        stop = self._stops[key] = threading.Event()
        turn = _Turn(text, bool(thinking))
        try:
            if len(text) > MAX_MESSAGE_CHARS:
                raise UsageError(f"the message has {len(text):,} characters; at most "
                                 f"{MAX_MESSAGE_CHARS:,}")
            limit = int(max_tokens) if max_tokens else ChatOptions.max_new_tokens
            yield from self._send(turn, session, mode, bool(thinking), bool(greedy), limit, stop)
        except QgpuError as e:  # e.g. the build has no text path to load
            turn.note = f"⚠️ **{e.kind} error** — {e.message}"
            self._close(turn)
            yield self._outputs(session, turn)
        except Exception as e:  # a bug of ours: a message in the page, the traceback in the log
            traceback.print_exc()
            turn.note = f"⚠️ **Internal error** — `{type(e).__name__}: {e}`"
            self._close(turn)
            yield self._outputs(session, turn)
        finally:
            if self._stops.get(key) is stop:
                del self._stops[key]

    def _send(self, turn: _Turn, session: ChatSession, mode: str, thinking: bool, greedy: bool,
              max_tokens: int, stop: threading.Event) -> Iterator[tuple]:
        if not self.loaded:
            turn.note = "*Loading the language model (the first message only)…*"
            yield self._outputs(session, turn, clear_input=True)
            self.language_model()
            turn.note = None
        yield self._outputs(session, turn, clear_input=True)
        generator, grammar = self.language_model()
        run = _TurnLaunches(self.host, self.cuda, session, turn)
        launcher = Launcher("model", self.host.gm, check=True,
                            token_limit=self.host.token_limit, lock=self.host.slots,
                            watch=run.watch)
        chat = Chat(generator, launcher, grammar)
        options = ChatOptions(mode=mode if mode in ("normal", "advanced") else "normal",
                              thinking=thinking, greedy=greedy, max_new_tokens=max_tokens)
        events = _turn_on_gpu(chat, list(session.history), turn.user, options)
        last = 0.0
        done = None
        try:
            for event in events:
                kind = event.kind
                run.apply(event)
                done = event if kind == "done" else None
                if stop.is_set():
                    break
                now = time.perf_counter()
                if kind in ("text", "progress") and now - last < STREAM_EVERY_S:
                    continue
                last = now
                if kind != "done":
                    yield self._outputs(session, turn, picker=kind in ("launch", "result"))
        except QgpuError as e:
            turn.note = f"⚠️ **{e.kind} error** — {e.message}"
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()
        run.adopt()
        if done is not None:
            session.history += done.messages
            if done.limit_reached:
                turn.note = (f"*(the model still called a tool after {options.max_rounds} "
                             "rounds; those calls were not run)*")
        elif stop.is_set():
            turn.note = "*(stopped)*"
        turn.options = [{"value": f"launch-{x.id}",
                         "label": f"Open launch {x.id} ({x.kernel}) in the views"}
                        for x in run.new[-MAX_OPTIONS:]]
        self._close(turn)
        yield self._outputs(session, turn, select=run.new[-1].id if run.new else None)

    @staticmethod
    def _close(turn: _Turn) -> None:
        turn.over = True
        for rnd in turn.rounds:
            for call in rnd.calls:
                if call.result is None:
                    call.interrupted = True

    def _outputs(self, session: ChatSession, turn: _Turn, *, clear_input: bool = False,
                 select: int | None = None, picker: bool = False) -> tuple:
        """(chatbot, session, launch picker, input box). A finished turn's messages join the
        session's view; the picker changes when a launch finished (`picker`) and at the end."""
        messages = turn.messages()
        if turn.over:
            for m in session.view:  # only the last message offers launch buttons
                m.pop("options", None)
            session.view += messages
            view = session.view
        else:
            view = session.view + messages
        choices = session.picker(select) if turn.over or picker else gr.skip()
        return view, session, choices, "" if clear_input else gr.skip()

    def stop(self, request: gr.Request | None = None) -> None:
        """The Stop button: the session's turn ends at the model's next piece of text (a launch
        under way finishes first)."""
        ev = self._stops.get(_key(request))
        if ev is not None:
            ev.set()

    def clear(self) -> tuple:
        """A new conversation (the session's launches go too)."""
        session = ChatSession()
        return [], session, session.picker(), ""

    # --- a chat launch in the CUDA tab's views ---------------------------------------------------

    def open_launch(self, launch_id: str | int | None, session: ChatSession | None) -> tuple:
        """Load a chat launch into the CUDA tab — its source, launch, arguments, result, tokens
        and the state after every token in the views — and switch to that tab. Outputs: see
        ``outputs_for_open``."""
        x = None
        if session is not None and launch_id not in (None, ""):
            try:
                x = session.launches.get(int(str(launch_id).removeprefix("launch-")))
            except ValueError:
                x = None
        if x is None:
            gr.Warning("Pick a launch of this chat first: its calls list them.")
            return (gr.skip(),) * (8 + self.cuda.LAUNCH_OUTPUTS)
        rec = x.recording
        origin = (f"<div class='qg-dim'>From the chat: launch {x.id} of the call "
                  f"<b>{panels._esc(x.call)}</b> ({panels._esc(x.what)}). The views show the "
                  "state the model held after each token of that launch.</div>")
        if x.record is not None:
            verdict = ("<div class='qg-box qg-ok'><b>✓ exact</b>: the chat runs every launch "
                       "checked — the reference machine ran it first, and each generated token "
                       "and every global word of the model's run equalled the machine's</div>"
                       if x.record.exact else "")
            html = origin + panels.done_html(rec, x.record.result, x.seconds, x.engine,
                                             verdict)
            out = {"kernel": x.kernel, "backend": "model", "args": x.record.result,
                   "prompt_tokens": x.record.prompt_tokens,
                   "generated_tokens": x.record.generated_tokens, "engine": x.engine,
                   "seconds": x.seconds, "exact": x.record.exact,
                   "chat": {"launch": x.id, "call": x.call, "what": x.what}}
        else:
            err = x.error or {"kind": "launch", "message": "the launch did not finish"}
            html = origin + panels.error_html(err["kind"], err["message"])
            out = {"error": err, "chat": {"launch": x.id, "call": x.call, "what": x.what}}
        fields = (gr.update(value=None), x.source,
                  gr.update(choices=[x.kernel], value=x.kernel), _dims(x.grid), _dims(x.block),
                  _json(x.args), 0)
        return (gr.Tabs(selected="cuda"), *fields,
                *self.cuda.show_launch(rec, html, out))

    def pick_option(self, session: ChatSession | None, evt: gr.SelectData) -> tuple:
        """A launch button under the turn's last message."""
        return self.open_launch(evt.value, session)

    # --- layout --------------------------------------------------------------------------------

    def build(self, tabs: gr.Tabs) -> None:
        """The tab's components and events (inside a gr.Tab); `tabs` is switched to the CUDA tab
        to show a launch."""
        gr.Markdown("Ask for a calculation: the model calls the GPU compiled into its own "
                    "weights, and every number in a tool call's box was read from the model's "
                    "state after a launch it generated token by token. Open any launch in the "
                    "CUDA tab's views.")
        if self.host.tiny:
            gr.Markdown("*The tiny base writes random text: it will rarely call the GPU. The "
                        "tool loop, the launches and their views are the real thing.*",
                        elem_id="chat-tiny-note")
        with gr.Row():
            mode = gr.Radio(MODES, value="normal", label="Mode", elem_id="chat-mode", scale=3)
            with gr.Column(scale=1, min_width=200):
                thinking = gr.Checkbox(False, label="Thinking", elem_id="chat-thinking")
                greedy = gr.Checkbox(False, label="Greedy decoding (else the model card's "
                                                  "sampling)", elem_id="chat-greedy")
                max_tokens = gr.Slider(64, 4096, value=ChatOptions.max_new_tokens, step=64,
                                       label="Max new tokens per reply",
                                       elem_id="chat-max-tokens")
        chatbot = gr.Chatbot(elem_id="chatbot", height=560, label="Chat",
                             buttons=["copy", "copy_all"], feedback_options=None,
                             placeholder="The model's answers appear here; each GPU launch is "
                                         "a box you can open.")
        with gr.Row():
            text = gr.Textbox(placeholder="What is the dot product of [1, 2, 3] and "
                                          "[4, 5, 6]?", show_label=False, lines=1, max_lines=6,
                              elem_id="chat-input", scale=8, submit_btn=False)
            send = gr.Button("Send", variant="primary", elem_id="chat-send", scale=1,
                             min_width=90)
            stop = gr.Button("Stop", variant="stop", elem_id="chat-stop", scale=1, min_width=90)
            clear = gr.Button("New chat", elem_id="chat-clear", scale=1, min_width=90)
        gr.Examples([[q] for q in EXAMPLES["normal"] + EXAMPLES["advanced"]], [text],
                    label="Examples (advanced ones need the advanced mode)")
        with gr.Row(elem_id="chat-launch-row"):
            picker = gr.Dropdown([], value=None, label="Launches of this chat (newest first)",
                                 elem_id="chat-launch", scale=4, interactive=False)
            show = gr.Button("Open in the CUDA tab's views", elem_id="chat-open", scale=1)
        session = gr.State(None, time_to_live=3 * 3600)

        turn_in = [text, session, mode, thinking, greedy, max_tokens]
        turn_out = [chatbot, session, picker, text]
        for trigger in (text.submit, send.click):
            trigger(self.send, turn_in, turn_out, concurrency_id=CHAT, concurrency_limit=1,
                    api_visibility="private", show_progress="hidden")
        stop.click(self.stop, None, None, queue=False, api_visibility="private")
        clear.click(self.clear, None, [chatbot, session, picker, text],
                    api_visibility="private")
        chatbot.clear(self.clear, None, [chatbot, session, picker, text],
                      api_visibility="private")
        open_out = [tabs, *self.cuda.editor_outputs(), *self.cuda.launch_outputs()]
        show.click(self.open_launch, [picker, session], open_out, api_visibility="private",
                   concurrency_id="views", concurrency_limit=4)
        chatbot.option_select(self.pick_option, [session], open_out,
                              api_visibility="private", concurrency_id="views",
                              concurrency_limit=4)


def _key(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "local"


@space.on_gpu(duration=300)
def _turn_on_gpu(chat: Chat, history: list[dict], text: str, options: ChatOptions) \
        -> Iterator[Any]:
    """One chat turn's events (ZeroGPU lends a GPU for the whole turn on a Space)."""
    yield from chat.turn(history, text, options)
