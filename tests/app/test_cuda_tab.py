"""The CUDA tab's event functions called directly: picking an example, a run from the page
(streamed updates, the result read from the model, the JSON, the slider over every token,
verify), errors as panels (never a traceback), a stopped launch, a fault located, the token
limit, scrubbing and play."""

from __future__ import annotations

import json
import threading
import time

from qgpu.app import views
from qgpu.app.cuda_tab import CudaTab
from qgpu.app.examples import EXAMPLES
from qgpu.app.recording import Recording

from .conftest import run_to_end

RESULT, TOKENS, PROMPT, JSON, SLIDER, CAPTION = range(6)
FIGS = slice(6, 12)
REC, KERNEL = 12, 13


def example(kernel: str) -> dict:
    return next(e for e in EXAMPLES if e.kernel == kernel).fields()


def test_picking_an_example_fills_every_field(tab) -> None:
    ex = next(e for e in EXAMPLES if e.kernel == "reverse_dyn")
    source, kernel, grid, block, args, shared = tab.pick_example(ex.label)
    assert "extern __shared__" in source and kernel["value"] == "reverse_dyn"
    assert kernel["choices"] == ["reverse_dyn"]
    assert (grid, block, args, shared) == ("1", "8", "[[1, 2, 3, 4, 5, 6, 7, 8], 8]", 32)
    assert tab.refresh_kernels(source, "x")["value"] == "reverse_dyn"
    assert tab.refresh_kernels("not cuda", "x") == {"__type__": "update"}


def test_a_run_streams_then_shows_the_models_result(dot_run) -> None:
    first, last = dot_run[0], dot_run[-1]
    assert "generating" in first[RESULT]
    result = last[RESULT]
    assert "Done" in result and "<td>32</td>" in result and "Traceback" not in result
    assert "✓ verify" in result and "exact: all 30 generated tokens" in result
    assert last[JSON]["args"][2] == [32] and last[JSON]["exact"] is True
    rec = last[REC]
    assert isinstance(rec, Recording) and len(rec) == 30 and rec.outcome == "end"
    assert rec.unread == {29}
    assert last[SLIDER]["maximum"] == 29 and last[SLIDER]["value"] == 29
    assert "exec:0:w0:m15" in last[TOKENS] and last[PROMPT].count("\n") > 10
    assert last[CAPTION].startswith("token 29 of 30: `end`")
    figs = [json.loads(f) for f in last[FIGS]]  # the panels' values: figure JSON
    assert all(f["layout"]["uirevision"] == f"run{rec.run_id}" for f in figs)
    assert last[KERNEL]["value"] == "dot"


def test_errors_are_panels_not_tracebacks(tab) -> None:
    f = example("dot")
    out = run_to_end(tab, {**f, "source": f["source"].replace("atomicAdd", "atomicAdd(")})
    assert len(out) == 1
    assert "Compile error" in out[0][RESULT] and "kernel.cu(" in out[0][RESULT]
    assert out[0][JSON]["error"]["kind"] == "compile"
    out = run_to_end(tab, {**f, "args": "[[1, 2, 3]]"})
    assert "Check the launch settings" in out[0][RESULT] and "takes 4 parameters" in \
        out[0][RESULT]
    out = run_to_end(tab, f, limit=10**6)
    assert "token limit must be 1..20,000" in out[0][RESULT]


def test_a_fault_is_reported_and_located(tab) -> None:
    out = run_to_end(tab, example("shift_left"), check=True)
    result, rec = out[-1][RESULT], out[-1][REC]
    assert "Launch stopped" in result and "global_bounds fault" in result
    assert "the reference interpreter" in result and "threadIdx=(3,0)" in result
    assert rec.outcome == "fault:global_bounds" and rec.tokens[-1] == "fault:global_bounds"
    assert "✓ verify" in result  # the model faulted exactly where the machine does


def test_the_token_limit_stops_a_runaway(tab) -> None:
    out = run_to_end(tab, example("spin"), limit=40)
    assert "did not end within 40 generated tokens" in out[-1][RESULT]
    assert out[-1][REC].outcome == "token limit" and len(out[-1][REC]) == 39


def test_stop_ends_a_running_launch(host) -> None:
    tab = CudaTab(host)
    f = example("spin")
    gen = tab.run(f["source"], f["kernel"], f["grid"], f["block"], f["args"], 0, True, 20000)
    next(gen)  # the launch has started
    threading.Timer(2.0, tab.stop).start()
    t0 = time.perf_counter()
    outs = list(gen)
    assert time.perf_counter() - t0 < 30
    result, rec = outs[-1][RESULT], outs[-1][REC]
    assert "Stopped by you after" in result and rec.outcome == "stopped" and len(rec) > 0
    # verify: the reference interpreter cannot finish it either
    assert "? verify" in result and "never ends" in result
    assert host.slots._value == host.max_concurrent and not host._running  # all given back


def test_scrubbing_and_play(tab, dot_run) -> None:
    rec = dot_run[-1][REC]
    caption, *figs, shown = tab.show(rec, 12)
    assert caption.startswith("token 12 of 30: `exec:2:w0:m7`")
    scheduler = json.loads(figs[views.VIEWS.index("scheduler")])
    assert "token 12 of 30" in scheduler["layout"]["title"]["text"]
    assert shown[:2] == (rec.run_id, 12) and len(shown[2]) == 6
    # a view whose figure is unchanged is left as it is (no redraw): at the same token all
    # six; two tokens on inside one EXEC's frames at least the pipeline and the ROM
    again = tab.show(rec, 12, shown)
    assert all(f == {"__type__": "update"} for f in again[1:7])
    out = tab.show(rec, 14, shown)
    skipped = {v for v, f in zip(views.VIEWS, out[1:7], strict=True)
               if f == {"__type__": "update"}}
    assert {"pipeline", "rom"} <= skipped and "trace" not in skipped
    assert "scheduler" not in skipped and out[-1][:2] == (rec.run_id, 14)
    assert "rom" not in {v for v, f in zip(views.VIEWS, tab.show(rec, 11, out[-1])[1:7],
                                             strict=True) if f == {"__type__": "update"}}
    timer, button, playing, start = tab.toggle_play(False, rec, 29)
    assert playing is True and start == 0 and button["value"] == "⏸ Pause"
    nxt, caption, *rest = tab.tick(rec, 3)
    assert nxt == 4 and caption.startswith("token 4 of 30")
    *_, timer, button, playing = tab.tick(rec, 28)
    assert playing is False and button["value"] == "▶ Play"
    assert tab.toggle_play(True, rec, 5)[2] is False
    assert tab.show(None, 3)[0] == ""


def test_a_bug_of_ours_is_a_panel_too(tab, monkeypatch) -> None:
    from qgpu.app import cuda_tab

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(cuda_tab, "prepare", broken)
    out = run_to_end(tab, example("dot"))
    assert "Internal error" in out[-1][RESULT] and "RuntimeError: boom" in out[-1][RESULT]
    assert out[-1][JSON] == {"error": {"kind": "internal", "message": "RuntimeError: boom"}}
