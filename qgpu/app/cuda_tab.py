"""The CUDA tab: editor, examples, launch settings, Run/Stop, the result, the tokens, and the six
views with a token slider and play. Every event function is a method of ``CudaTab`` that tests
call directly; the run is also the ``run_cuda`` API endpoint (the CLI's JSON object). Events
that use the model share one concurrency id (``GPU``, one at a time); the views' events do not
touch the model."""

from __future__ import annotations

import itertools
import threading
import time
import traceback
from collections.abc import Iterator

import gradio as gr

from qgpu import protocol as T
from qgpu.app import panels, views
from qgpu.app.examples import DEFAULT, EXAMPLES, by_label
from qgpu.app.host import ModelHost
from qgpu.app.launches import (
    Finished,
    Request,
    Stopped,
    Tick,
    diagnose,
    error_json,
    kernel_names,
    prepare,
    result_json,
    run_json,
    verify,
)
from qgpu.app.plotpanel import plot_panel
from qgpu.app.recording import Recording
from qgpu.errors import QgpuError, UsageError

GPU = "gpu"  # the concurrency id of every event that runs the model
STREAM_EVERY_S = 0.5  # how often a running launch updates its status and tokens
VIEWS_EVERY_S = 2.0  # ... and its views and slider (redrawing six plots costs the browser)
LIVE_EVENTS = 300  # the last events the tokens box shows while the model generates
PLAY_EVERY_S = 0.35  # the play button's step

VIEW_LABELS = {"trace": "Trace: the generated tokens as machine events",
               "registers": "Registers, predicates and lane pcs",
               "memory": "Global and shared memory",
               "pipeline": "Pipeline: the current EXEC's slots",
               "scheduler": "Warp scheduler",
               "rom": "ROM: the program"}


def _shown(rec: Recording | None, i: int, jsons: list[str]) -> tuple | None:
    """What the page shows: (launch, token, a hash of each view's figure JSON)."""
    return None if rec is None else (rec.run_id, i, tuple(hash(j) for j in jsons))


def _session(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "local"


class CudaTab:
    """The CUDA tab's components and event functions, over one shared ModelHost."""

    LAUNCH_OUTPUTS = 6 + len(views.VIEWS) + 2  # how many ``launch_outputs()`` there are

    def __init__(self, host: ModelHost) -> None:
        self.host = host
        self._stops: dict[str, threading.Event] = {}
        self._run_ids = itertools.count(1)

    # --- fields --------------------------------------------------------------------------------

    def pick_example(self, label: str) -> tuple:
        """The example's source, kernel (choices from its module), grid, block, args, dynamic
        shared bytes."""
        f = by_label(label).fields()
        names = kernel_names(f["source"]) or [f["kernel"]]
        return (f["source"], gr.update(choices=names, value=f["kernel"]), f["grid"], f["block"],
                f["args"], f["dynamic_shared"])

    def refresh_kernels(self, source: str, kernel: str | None):
        """The kernel picker's choices from the compiled source (unchanged if it does not
        compile: the run says why)."""
        names = kernel_names(source or "")
        if not names:
            return gr.update()
        return gr.update(choices=names, value=kernel if kernel in names else names[0])

    # --- a launch ------------------------------------------------------------------------------

    def run(self, source: str, kernel: str | None, grid: str, block: str, args: str,
            dynamic_shared: float | None, check: bool = False, token_limit: float | None = None,
            request: gr.Request | None = None) -> Iterator[tuple]:
        """Compile and launch on the model; stream the tokens and the views while it generates;
        then the result (or the error), the tokens, the CLI's JSON, the slider over every
        token. Outputs: see ``_outputs``."""
        key = _session(request)
        stop = self._stops[key] = threading.Event()
        try:
            with self.host.session_launch(key):
                yield from self._run(source, kernel, grid, block, args, dynamic_shared, check,
                                     token_limit, stop)
        except QgpuError as e:  # the session's launch cap
            yield self._outputs(panels.error_html(e.kind, e.message), None, error_json(e),
                                kernel=gr.update())
        except Exception as e:  # a bug of ours: a panel in the page, the traceback in the log
            traceback.print_exc()
            message = f"{type(e).__name__}: {e}"
            yield self._outputs(panels.error_html("internal", message), None,
                                {"error": {"kind": "internal", "message": message}},
                                kernel=gr.update())
        finally:
            if self._stops.get(key) is stop:
                del self._stops[key]

    def _run(self, source, kernel, grid, block, args, dynamic_shared, check, token_limit,
             stop: threading.Event) -> Iterator[tuple]:
        try:
            limit = self._token_limit(token_limit)
            prep = prepare(Request.parse(source, kernel, grid, block, args, dynamic_shared))
        except QgpuError as e:
            yield self._outputs(panels.error_html(e.kind, e.message), None, error_json(e),
                                kernel=gr.update())
            return
        kernel_update = gr.update(choices=kernel_names(source),
                                  value=prep.name)
        rec = prep.recording(self.new_run_id())
        t0 = time.perf_counter()
        yield self._outputs(panels.running_html(rec, 0.0), rec, None, kernel=kernel_update,
                            live=True)
        last = last_views = time.perf_counter()
        stream = self.host.stream(prep.launch, limit)
        finished: Finished | None = None
        try:
            for item in stream:
                if isinstance(item, Tick):
                    rec.add(item.token, item.state)
                elif isinstance(item, Finished):
                    finished = item
                    break
                if stop.is_set():
                    break
                if time.perf_counter() - last >= STREAM_EVERY_S:
                    last = time.perf_counter()
                    with_views = last - last_views >= VIEWS_EVERY_S
                    last_views = last if with_views else last_views
                    yield self._outputs(panels.running_html(rec, last - t0), rec, None,
                                        kernel=kernel_update, live=True,
                                        with_views=with_views)
        finally:
            stream.close()
        if finished is None:  # stopped: the stream ended at the next token
            finished = Finished(None, Stopped(f"stopped after {len(rec)} generated tokens"),
                                time.perf_counter() - t0, len(rec))
        yield self._finish(prep, rec, finished, bool(check), kernel_update)

    def _finish(self, prep, rec: Recording, fin: Finished, check: bool, kernel_update) -> tuple:
        gm = self.host.gm
        if fin.run is not None:
            for tok in fin.run.generated[len(rec):]:
                rec.add(tok, None)  # END: the model never reads it back
            rec.outcome = "end"
            verdict = verify(prep, fin.run.generated, fin.run.memory) if check else None
            out = result_json(gm, prep, fin.run, verdict)
            html = panels.done_html(rec, out["args"], fin.run.seconds, gm.engine,
                                    panels.verdict_html(verdict.exact, verdict.message)
                                    + panels.races_html(out.get("warnings", []))
                                    if verdict else "")
            return self._outputs(html, rec, out, kernel=kernel_update)
        e = fin.error
        extra = ""
        if isinstance(e, Stopped):
            rec.outcome = "stopped"
            message = (f"Stopped by you after {len(rec)} generated tokens "
                       f"({fin.seconds:.1f} s). The views show every token the model ran.")
            complete = False
        elif getattr(e, "fault", None):
            rec.outcome = f"fault:{e.fault}"
            rec.add(T.name(f"fault:{e.fault}"), None)
            where = diagnose(prep)
            message = e.message
            if where:
                extra = ("<div><b>Where</b> <span class='qg-dim'>(the reference interpreter "
                         f"locates the fault the model reported)</span><pre>{panels._esc(where)}"
                         "</pre></div>")
            complete = True
        elif "did not end within" in e.message:
            rec.outcome = "token limit"
            message = (f"{e.message}. The views show the {len(rec)} tokens the model read back; "
                       "raise the token limit (Launch settings) if the kernel needs more.")
            complete = False
        else:
            rec.outcome = "error"
            message = e.message
            complete = False
        if check and len(rec):
            v = verify(prep, rec.tokens, None, complete=complete)
            extra += panels.verdict_html(v.exact, v.message)
        return self._outputs(panels.error_html(e.kind, message, extra), rec, error_json(e),
                             kernel=kernel_update)

    def _token_limit(self, value: float | None) -> int:
        if value in (None, ""):
            return self.host.token_limit
        limit = int(value)
        if not 1 <= limit <= self.host.max_token_limit:
            raise UsageError(f"the token limit must be 1..{self.host.max_token_limit:,}, got "
                             f"{limit}")
        return limit

    def _outputs(self, result: str, rec: Recording | None, out: dict | None, *, kernel,
                 live: bool = False, with_views: bool = True) -> tuple:
        """(result, tokens, prompt, json, slider, caption, six views, recording, kernel,
        shown). While the model generates (`live`): the newest tokens only, the prompt once,
        and the views and the slider only `with_views`."""
        n = len(rec) if rec is not None else 0
        i = max(n - 1, 0)
        tokens = panels.tokens_text(rec, last=LIVE_EVENTS if live else None)
        prompt = panels.prompt_text(rec) if not live or n == 0 else gr.skip()
        if live and not with_views:
            return (result, tokens, prompt, gr.skip(), gr.skip(), gr.skip(),
                    *(gr.skip() for _ in views.VIEWS), rec, kernel, gr.skip())
        figs = views.render(rec, i)
        jsons = [figs[v].to_json() for v in views.VIEWS]
        slider = gr.update(minimum=0, maximum=max(n - 1, 1), value=i, interactive=n > 1,
                           label=f"Token (0 … {max(n - 1, 0)})" if n else "Token")
        return (result, tokens, prompt, out if out is not None else gr.update(), slider,
                views.caption(rec, i), *jsons, rec, kernel, _shown(rec, i, jsons))

    def new_run_id(self) -> int:
        """A launch's number on this page (the views' zoom is kept per launch)."""
        return next(self._run_ids)

    def show_launch(self, rec: Recording, result: str, out: dict) -> tuple:
        """A launch recorded elsewhere (the chat's) as the tab shows a finished run, at its
        last token: the outputs for ``launch_outputs()``."""
        *head, _kernel, shown = self._outputs(result, rec, out, kernel=gr.skip())
        return (*head, shown)

    def editor_outputs(self) -> list[gr.components.Component]:
        """The launch's fields: example picker, source, kernel, grid, block, arguments,
        dynamic shared bytes."""
        return list(self._editor)

    def launch_outputs(self) -> list[gr.components.Component]:
        """What shows a launch: result, tokens, prompt, JSON, slider, caption, the six views,
        the recording and what the views show (``show_launch``'s order)."""
        return list(self._launch)

    def stop(self, request: gr.Request | None = None) -> None:
        """The Stop button: the session's running launch ends at its next token."""
        ev = self._stops.get(_session(request))
        if ev is not None:
            ev.set()

    # --- the views -----------------------------------------------------------------------------

    def show(self, rec: Recording | None, i: float | None, shown: tuple | None = None) -> tuple:
        """The caption and the six views at token i (the slider), and what the page shows then.
        `shown` is (launch, token, a hash of each view's figure) as the page shows them now: a
        view whose figure is the same at token i is left as it is (``gr.skip()``: no redraw;
        the pipeline and the ROM change only from one EXEC to the next, the registers and the
        memory only where a token writes them)."""
        i = int(i or 0)
        figs = views.render(rec, i)
        jsons = [figs[v].to_json() for v in views.VIEWS]
        before = shown[2] if rec is not None and shown and shown[0] == rec.run_id else ()
        return (views.caption(rec, i),
                *(gr.skip() if k < len(before) and hash(j) == before[k] else j
                  for k, j in enumerate(jsons)),
                _shown(rec, i, jsons))

    def toggle_play(self, playing: bool, rec: Recording | None, i: float | None) -> tuple:
        """Play from the slider's token (from the start if it is at the end), or pause."""
        n = len(rec) if rec is not None else 0
        if playing or n < 2:
            return gr.Timer(active=False), gr.update(value="▶ Play"), False, gr.update()
        start = 0 if int(i or 0) >= n - 1 else int(i or 0)
        return gr.Timer(active=True), gr.update(value="⏸ Pause"), True, start

    def tick(self, rec: Recording | None, i: float | None, shown: tuple | None = None) -> tuple:
        """One play step: the next token, or stop at the last."""
        n = len(rec) if rec is not None else 0
        nxt = min(int(i or 0) + 1, max(n - 1, 0))
        more = nxt < n - 1
        return (nxt, *self.show(rec, nxt, shown), gr.Timer(active=more),
                gr.update(value="⏸ Pause" if more else "▶ Play"), more)

    # --- the API -------------------------------------------------------------------------------

    def api_run_cuda(self, source: str, kernel: str, grid: str, block: str, args: str,
                     dynamic_shared: int = 0, verify: bool = False,
                     request: gr.Request | None = None) -> dict:
        """Launch a CUDA kernel on the GPU inside the model. grid and block: "X" or "X,Y";
        args: the CLI's JSON list (a list of ints is an input array, {"zeros": n} an output
        array, an int a scalar). Returns the CLI's JSON object ({"kernel", "backend", "args",
        "stats", "prompt_tokens", "generated_tokens", "engine", "decode_step", "seconds"}, with
        verify also "exact", and "races" and "warnings" if the replay saw data races) or {"error":
        {"kind", "message"}}."""
        try:
            with self.host.session_launch(_session(request)):
                return run_json(self.host.gm, self.host.slots, source, kernel, grid, block,
                                args, dynamic_shared, verify, self.host.token_limit)
        except QgpuError as e:
            return error_json(e)

    # --- layout --------------------------------------------------------------------------------

    def build(self) -> None:
        """The tab's components and events (inside a gr.Blocks context)."""
        f = DEFAULT.fields()
        with gr.Row(equal_height=False):
            with gr.Column(scale=3, min_width=420):
                example = gr.Dropdown([e.label for e in EXAMPLES], value=DEFAULT.label,
                                      label="Examples (kernel, launch and arguments)",
                                      elem_id="cuda-example")
                source = gr.Code(f["source"], language="cpp", label="CUDA source", lines=22,
                                 max_lines=40, elem_id="cuda-source")
            with gr.Column(scale=2, min_width=320):
                kernel = gr.Dropdown(kernel_names(f["source"]) or [f["kernel"]],
                                     value=f["kernel"], label="Kernel", allow_custom_value=True,
                                     elem_id="cuda-kernel")
                with gr.Row():
                    grid = gr.Textbox(f["grid"], label="Grid (X or X,Y blocks)",
                                      elem_id="cuda-grid", max_lines=1)
                    block = gr.Textbox(f["block"], label="Block (X or X,Y threads)",
                                       elem_id="cuda-block", max_lines=1)
                args = gr.Textbox(f["args"], label='Arguments (JSON: [1,2] an input array, '
                                                   '{"zeros": n} an output array, 3 a scalar)',
                                  lines=3, max_lines=8, elem_id="cuda-args")
                with gr.Row():
                    shared = gr.Number(f["dynamic_shared"], label="Dynamic shared bytes",
                                       precision=0, minimum=0, maximum=256,
                                       elem_id="cuda-dynamic-shared")
                    limit = gr.Number(self.host.token_limit, label="Token limit", precision=0,
                                      minimum=1, maximum=self.host.max_token_limit,
                                      elem_id="cuda-token-limit")
                check = gr.Checkbox(False, label="Verify: replay the launch on the reference "
                                                 "interpreter afterwards and compare every "
                                                 "token and word", elem_id="cuda-verify")
                with gr.Row():
                    run = gr.Button("Run on the model", variant="primary", elem_id="cuda-run")
                    stop = gr.Button("Stop", variant="stop", elem_id="cuda-stop")
                result = gr.HTML("<div class='qg-dim'>Pick an example or write a kernel, then "
                                 "Run: the model generates the launch token by token.</div>",
                                 elem_id="cuda-result")
        with gr.Accordion("Tokens", open=False, elem_id="cuda-tokens-box"):
            with gr.Row():
                tokens = gr.Textbox(label="Generated tokens (one machine event a line)",
                                    lines=12, max_lines=24, elem_id="cuda-tokens",
                                    buttons=["copy"])
                prompt = gr.Textbox(label="Prompt tokens (ROM, parameters, memory, launch "
                                          "shape)", lines=12, max_lines=24,
                                    elem_id="cuda-prompt", buttons=["copy"])
        with gr.Accordion("Result as JSON (python -m qgpu run --json)", open=False):
            as_json = gr.JSON(elem_id="cuda-json")
        gr.Markdown("### The machine, token by token\nEach view shows the state the model holds "
                    "after the token the slider picks; orange cells changed at that token.")
        with gr.Row(equal_height=True):
            slider = gr.Slider(0, 1, value=0, step=1, label="Token", interactive=False,
                               elem_id="token-slider", scale=8)
            play = gr.Button("▶ Play", elem_id="token-play", scale=1, min_width=90)
        caption = gr.Markdown("", elem_id="token-caption")
        plot = lambda v: plot_panel(views.empty(v).to_json(), f"view-{v}",  # noqa: E731
                                    VIEW_LABELS[v])
        plots = {}
        with gr.Row():
            plots["registers"], plots["memory"] = plot("registers"), plot("memory")
        with gr.Row():
            plots["trace"], plots["pipeline"] = plot("trace"), plot("pipeline")
        plots["scheduler"] = plot("scheduler")
        plots["rom"] = plot("rom")
        recording = gr.State(None, time_to_live=3 * 3600)
        shown = gr.State(None)  # (launch, token, figure hashes) the views show
        playing = gr.State(False)
        timer = gr.Timer(PLAY_EVERY_S, active=False)
        figs = [plots[v] for v in views.VIEWS]
        self._editor = [example, source, kernel, grid, block, args, shared]
        self._launch = [result, tokens, prompt, as_json, slider, caption, *figs, recording, shown]

        example.input(self.pick_example, example, [source, kernel, grid, block, args, shared],
                      api_visibility="private")
        source.blur(self.refresh_kernels, [source, kernel], kernel, api_visibility="private",
                    show_progress="hidden")
        run.click(self.run, [source, kernel, grid, block, args, shared, check, limit],
                  [result, tokens, prompt, as_json, slider, caption, *figs, recording, kernel,
                   shown],
                  concurrency_id=GPU, concurrency_limit=self.host.max_concurrent,
                  api_visibility="undocumented",
                  show_progress_on=[result])
        stop.click(self.stop, None, None, queue=False, api_visibility="private")
        slider.input(self.show, [recording, slider, shown], [caption, *figs, shown],
                     trigger_mode="always_last", show_progress="hidden",
                     concurrency_id="views", concurrency_limit=4, api_visibility="private")
        play.click(self.toggle_play, [playing, recording, slider],
                   [timer, play, playing, slider], api_visibility="private",
                   show_progress="hidden")
        timer.tick(self.tick, [recording, slider, shown],
                   [slider, caption, *figs, shown, timer, play, playing], show_progress="hidden",
                   concurrency_id="views", concurrency_limit=4, api_visibility="private")
        gr.api(self.api_run_cuda, api_name="run_cuda", concurrency_id=GPU,
               concurrency_limit=self.host.max_concurrent)
