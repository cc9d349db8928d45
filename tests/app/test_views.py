"""The six views on recordings of real launches: valid plotly figures (checked by plotly's own
validation), the values the model's state held, the cells a token changed highlighted, hover
with decimal and hex, zoom kept across scrubbing, and a slider step well under 200 ms."""

from __future__ import annotations

import json
import time

import plotly.graph_objects as go
import pytest

from qgpu.app import views
from qgpu.app.examples import EXAMPLES
from qgpu.app.recording import Recording

from .conftest import run_to_end

REC = 12  # index of the recording in the Run button's outputs


@pytest.fixture(scope="module")
def dot(dot_run) -> Recording:
    return dot_run[-1][REC]


@pytest.fixture(scope="module")
def scan(tab) -> Recording:
    """Two warps: shuffles, shared memory, a barrier."""
    ex = next(e for e in EXAMPLES if e.kernel == "scan_warp")
    return run_to_end(tab, ex.fields())[-1][REC]


def _nulls(x, path="") -> list[str]:
    """Paths of None values (plotly.js's react fails on some: 'container is not an object')."""
    if x is None:
        return [path]
    if isinstance(x, dict):
        return [p for k, v in x.items() for p in _nulls(v, f"{path}.{k}")]
    return []


@pytest.mark.parametrize("which", ["dot", "scan"])
def test_every_view_is_a_valid_figure_at_every_kind_of_token(which, request) -> None:
    rec = request.getfixturevalue(which)
    events, _ = rec.events()
    kinds = {}
    for e in events:
        kinds.setdefault(e.kind, e.last)
    assert {"exec", "val", "end"} <= set(kinds)
    for i in [0, *kinds.values(), len(rec) - 1]:
        figs = views.render(rec, i)
        assert list(figs) == list(views.VIEWS)
        for name, fig in figs.items():
            spec = json.loads(fig.to_json())
            go.Figure(spec)  # raises on any invalid property
            assert not _nulls(spec["layout"]), (name, _nulls(spec["layout"]))
            assert spec["layout"]["uirevision"] == f"run{rec.run_id}"


def test_registers_show_the_models_values_and_highlight_the_change(dot) -> None:
    # token 1 is val:r1:all = 4 (the pointer of b): every lane's r1 becomes 4
    assert dot.tokens[1] == "val:r1:all:4"
    fig = views.registers(dot, 1)
    z, text, hover = fig.data[0]["z"], fig.data[0]["text"], fig.data[0]["hovertext"]
    assert [row[0] for row in z] == [2, 2, 2, 2]  # r1 column: changed in all four lanes
    assert [row[0] for row in text] == ["4"] * 4
    assert hover[0][0] == "warp 0 · lane 0 · r1 = 4 (0x00000004, float 6e-45) (was 0)"
    assert all(v != 2 for row in z for v in row[1:])
    assert "1 changed" not in fig.layout["title"]["text"] and "4 changed" in \
        fig.layout["title"]["text"]
    later = views.registers(dot, 2)
    assert [row[0] for row in later.data[0]["z"]] == [1, 1, 1, 1]  # held, not changed


def test_memory_labels_arrays_and_highlights_the_result(dot) -> None:
    write = dot.tokens.index("mem:g9:32")
    fig = views.memory(dot, write)
    z, text, hover = fig.data[0]["z"], fig.data[0]["text"], fig.data[0]["hovertext"]
    assert z[0][9] == 2 and text[0][9] == "32"
    assert hover[0][9].startswith("out[0] (global word 9) · byte 36 = 32 (0x00000020, "
                                  "float 4.5e-44)")
    assert text[0][1:4] == ["1", "2", "3"] and text[0][5:8] == ["4", "5", "6"]
    assert "■</span> a (g1–g3)" in fig.layout["annotations"][0]["text"]
    assert "scalars: n = 3" in fig.layout["annotations"][0]["text"]
    before = views.memory(dot, write - 1)
    assert before.data[0]["text"][0][9] == "0"


def test_trace_pipeline_scheduler_and_rom_follow_the_token(dot) -> None:
    i = dot.tokens.index("exec:2:w0:m7")
    trace = views.trace(dot, i)
    cells = trace.data[0]["cells"]
    row = cells["values"][1].index("exec:2:w0:m7")
    assert cells["fill"]["color"][0][row] == views.CHANGED
    assert "warp 0 runs block B2 with lanes 0,1,2" in cells["values"][4]
    pipe = views.pipeline(dot, i + 1)  # a write-back token still belongs to B2's EXEC
    assert f"EXEC B2 at token {i} · warp 0, lanes 0,1,2" in pipe.layout["title"]["text"]
    ys = pipe.data[0]["y"]
    assert ys[0].startswith("S0 alu+mem") and ys[-1].startswith("T  term")
    assert [row[3] for row in pipe.data[0]["z"]] == [len(views.UNIT_COLORS)] * 5  # lane 3 off
    sched = views.scheduler(dot, i)
    assert sched.layout["shapes"][-1]["x0"] == i
    bars = [d for d in sched.data if d["type"] == "bar"]
    assert sorted(t for d in bars for t in d["text"]) == sorted(
        f"B{b}" for b in (0, 1, 2, 3, 4, 5))
    rom = views.rom(dot, i)
    assert rom.layout["shapes"][0]["y0"] == 1.5  # B2 outlined
    assert rom.data[0]["y"] == [f"B{b}" for b in range(6)]
    assert [row[-1] for row in rom.data[0]["text"]] == ["1", "1", "1", "0", "0", "0"]


def test_two_warps_get_a_heatmap_each(scan) -> None:
    fig = views.registers(scan, len(scan) - 1)
    assert len(fig.data) == 4 and "yaxis3" in fig.layout
    assert fig.layout["yaxis3"]["title"]["text"] == "warp 1"
    sched = views.scheduler(scan, 0)
    assert sched.layout["yaxis"]["categoryarray"] == ["w0", "w1"]
    assert any(d.get("name") == "warp" for d in sched.data)  # the barrier's sweep


def test_a_slider_step_renders_in_well_under_200_ms(scan) -> None:
    best = float("inf")
    for i in (0, len(scan) // 2, len(scan) - 1):
        t0 = time.perf_counter()
        for fig in views.render(scan, i).values():
            fig.to_json()
        views.caption(scan, i)
        best = min(best, time.perf_counter() - t0)
    assert best < 0.1


def test_views_before_any_launch_say_what_to_do() -> None:
    figs = views.render(None, 0)
    assert all("Run a kernel" in f.layout["annotations"][0]["text"] for f in figs.values())
    assert views.caption(None, 3) == ""
