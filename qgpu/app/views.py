"""The six plotly views of a launch at one generated token (``Recording``, token i): the trace
of machine events, the registers, the memories, the pipeline of the current EXEC, the warp
scheduler's timeline and the ROM. Every value drawn is the state the model's recurrent state
held after token i (``recording.py``); cells token i changed are highlighted (orange), hover
gives decimal and hex.

Figures are plain dicts serialised once (``PlotlyJSON``): building ``plotly.graph_objects``
figures validates every property, about 10 ms a figure — too slow for a slider step. The
layouts carry ``uirevision`` (one per launch) so a user's zoom survives scrubbing.
"""

from __future__ import annotations

from typing import Any

import orjson

from qgpu.app.recording import L, P, Recording, describe, lanes_of, memory_label
from qgpu.machine import float32, limits
from qgpu.machine.isa import NOP, SLOT_UNITS, TermKind, format_instr, format_term, unit_of

VIEWS = ("trace", "registers", "memory", "pipeline", "scheduler", "rom")

EMPTY = "#f1f3f5"
VALUE = "#d0ebff"
CHANGED = "#ff922b"
ABSENT = "#ced4da"
UNIT_COLORS = {"alu": "#d0ebff", "memory": "#c3fae8", "multiply": "#ffec99", "term": "#e5dbff",
               "nop": EMPTY}
ARG_COLORS = ("#a5d8ff", "#b2f2bb", "#d0bfff", "#eebefa", "#99e9f2", "#ffc9c9", "#d8f5a2",
              "#bac8ff", "#fcc2d7", "#c5f6fa", "#fff3bf", "#ffd8a8", "#96f2d7", "#ffe8cc",
              "#e9ecef", "#ffdeeb")
FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"


class PlotlyJSON:
    """A plotly figure for ``gr.Plot`` (which sends ``value.to_json()`` to Plotly.react)."""

    __slots__ = ("spec",)

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec

    def to_json(self) -> str:
        return orjson.dumps(self.spec, option=orjson.OPT_SERIALIZE_NUMPY).decode()

    @property
    def data(self) -> list[dict[str, Any]]:
        return self.spec["data"]

    @property
    def layout(self) -> dict[str, Any]:
        return self.spec["layout"]


def _s32(v: int) -> int:
    v = int(v) & 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


def _short(v: int) -> str:
    """A cell's text: the signed value, abbreviated past six characters (hover has it all)."""
    s = str(_s32(v))
    if len(s) <= 6:
        return s
    x = _s32(v)
    return f"{x / 1e9:.1f}G" if abs(x) >= 1e9 else f"{x / 1e6:.0f}M"


def _hover(v: int) -> str:
    """A word as an int, in hex and as a float32 (the machine's words are untyped)."""
    w = int(v) & 0xFFFFFFFF
    return f"{_s32(w)} (0x{w:08x}, float {float32.shortest(w)})"


def _scale(colors: list[str]) -> list[list[Any]]:
    """A discrete colorscale: category k (z = k) gets colors[k]; zmin -0.5, zmax n - 0.5."""
    n = len(colors)
    out: list[list[Any]] = []
    for k, c in enumerate(colors):
        out += [[k / n, c], [(k + 1) / n, c]]
    return out


def _heatmap(z, text, hover, colors, xaxis="x", yaxis="y", x=None, y=None,
             font_size=11) -> dict[str, Any]:
    return {"type": "heatmap", "z": z, "text": text, "texttemplate": "%{text}",
            "textfont": {"size": font_size, "family": FONT}, "hovertext": hover,
            "hovertemplate": "%{hovertext}<extra></extra>", "colorscale": _scale(colors),
            "zmin": -0.5, "zmax": len(colors) - 0.5, "showscale": False, "xgap": 2, "ygap": 2,
            "x": x, "y": y, "xaxis": xaxis, "yaxis": yaxis}


def _layout(rec: Recording | None, title: str, height: int, **more: Any) -> dict[str, Any]:
    layout = {"title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 13}},
              "height": height, "margin": {"l": 60, "r": 12, "t": 42, "b": 28},
              "paper_bgcolor": "white", "plot_bgcolor": "white", "showlegend": False,
              "font": {"family": FONT, "size": 11},
              "uirevision": f"run{rec.run_id}" if rec is not None else "none"}
    layout.update(more)
    return layout


def empty(view: str, message: str | None = None) -> PlotlyJSON:
    """A view before any launch."""
    text = message or "Run a kernel: this view shows the model's state after the token the " \
                      "slider picks."
    return PlotlyJSON({"data": [], "layout": _layout(
        None, view.capitalize(), 260,
        xaxis={"visible": False}, yaxis={"visible": False},
        annotations=[{"text": text, "showarrow": False, "x": 0.5, "y": 0.5, "xref": "paper",
                      "yref": "paper", "font": {"size": 12, "color": "#868e96"}}])})


def render(rec: Recording | None, i: int) -> dict[str, PlotlyJSON]:
    """Every view at token i (clamped to the tokens recorded so far). Only the trace and the
    scheduler name token i; the other views' figures are the same at every token that shows
    the same thing (so the page can leave them as they are)."""
    if rec is None or len(rec) == 0:
        return {v: empty(v) for v in VIEWS}
    i = max(0, min(int(i), len(rec) - 1))
    return {"trace": trace(rec, i), "registers": registers(rec, i), "memory": memory(rec, i),
            "pipeline": pipeline(rec, i), "scheduler": scheduler(rec, i), "rom": rom(rec, i)}


def caption(rec: Recording | None, i: int) -> str:
    """One line on token i: its place in the stream and what it means."""
    if rec is None or len(rec) == 0:
        return ""
    i = max(0, min(int(i), len(rec) - 1))
    events, owner = rec.events()
    e = owner[i]
    what = describe(events[e], rec.params) if e is not None else "a data byte of the next frame"
    tail = ""
    if i in rec.unread:
        tail = " (the model never reads its last token back: the views show the state before it)"
    return f"token {i} of {len(rec)}: `{rec.tokens[i]}` — {what}{tail}"


# --- 1. trace ----------------------------------------------------------------------------------


def trace(rec: Recording, i: int, window: int = 21, before: int = 8) -> PlotlyJSON:
    """The generated tokens as machine events: `window` of them around token i's event."""
    events, owner = rec.events()
    cur = owner[i]
    if cur is None:  # a data token: its event comes next
        cur = next((e for e in owner[i:] if e is not None), len(events) - 1)
    lo = max(0, min(cur - before, len(events) - window))
    hi = min(len(events), lo + window)
    rows = events[lo:hi]
    toks = [f"{e.first}" if e.first == e.last else f"{e.first}–{e.last}" for e in rows]
    names = [":".join((e.kind, *e.fields)) for e in rows]
    dec = ["" if e.value is None else str(_s32(e.value)) for e in rows]
    hexes = ["" if e.value is None else f"0x{e.value & 0xFFFFFFFF:x}" for e in rows]
    means = [describe(e, rec.params) for e in rows]
    fill = [CHANGED if lo + k == cur else ("#f8f9fa" if (lo + k) % 2 else "white")
            for k in range(len(rows))]
    spec = {"data": [{
        "type": "table", "columnwidth": [48, 120, 80, 80, 300],
        "header": {"values": ["token", "event", "value", "hex", "meaning"],
                   "fill": {"color": "#e9ecef"}, "align": "left",
                   "font": {"family": FONT, "size": 11}},
        "cells": {"values": [toks, names, dec, hexes, means], "align": "left",
                  "fill": {"color": [fill] * 5}, "font": {"family": FONT, "size": 11},
                  "height": 22},
    }], "layout": _layout(rec, f"Trace · {len(events)} events in {len(rec)} tokens "
                               f"(event {cur + 1} highlighted)", 64 + 23 * (window + 1),
                          margin={"l": 8, "r": 8, "t": 42, "b": 8})}
    return PlotlyJSON(spec)


# --- 2. registers ------------------------------------------------------------------------------


def registers(rec: Recording, i: int) -> PlotlyJSON:
    """Per warp: lanes x r1..r15, and lanes x p0..p3 + the lane's pc."""
    s, prev = rec.state(i), rec.before(i)
    warps = rec.warps
    regs = list(range(1, limits.NUM_REGS))
    data, axes, annotations = [], {}, []
    gap = 0.06 if warps > 1 else 0.0
    row_h = (1 - gap * (warps - 1)) / warps
    for w in range(warps):
        top = 1 - w * (row_h + gap)
        dom = [max(0.0, top - row_h), top]
        z, text, hover = [], [], []
        pz, ptext, phover = [], [], []
        for ln in range(L):
            present = w * L + ln < rec.threads
            zr, tr, hr = [], [], []
            for r in regs:
                v, was = int(s.regs[w, ln, r]), int(prev.regs[w, ln, r])
                zr.append(3 if not present else 2 if v != was else 1 if v else 0)
                tr.append(_short(v) if present else "")
                hr.append(f"warp {w} · lane {ln} · r{r} = {_hover(v)}"
                          + (f" (was {_s32(was)})" if v != was else ""))
            z.append(zr)
            text.append(tr)
            hover.append(hr)
            zp, tp, hp = [], [], []
            for p in range(P):
                v, was = bool(s.preds[w, ln, p]), bool(prev.preds[w, ln, p])
                zp.append(3 if not present else 2 if v != was else 1 if v else 0)
                tp.append(("1" if v else "0") if present else "")
                hp.append(f"warp {w} · lane {ln} · p{p} = {str(v).lower()}")
            pc, done, cta = int(s.pcs[w, ln]), bool(s.exited[w, ln]), int(s.ctas[w, ln])
            moved = (pc, done, cta) != (int(prev.pcs[w, ln]), bool(prev.exited[w, ln]),
                                        int(prev.ctas[w, ln]))
            zp.append(3 if not present else 2 if moved else 1)
            tp.append(("exit" if done else f"B{pc}") if present else "")
            hp.append(f"warp {w} · lane {ln} · " + ("exited" if done else f"next block B{pc}")
                      + f" · thread block {cta}")
            pz.append(zp)
            ptext.append(tp)
            phover.append(hp)
        xa, xb = f"x{2 * w + 1}", f"x{2 * w + 2}"
        ya, yb = f"y{2 * w + 1}", f"y{2 * w + 2}"
        lanes = [f"lane {ln}" for ln in range(L)]
        colors = [EMPTY, VALUE, CHANGED, ABSENT]
        data.append(_heatmap(z, text, hover, colors, xa, ya, [f"r{r}" for r in regs], lanes))
        data.append(_heatmap(pz, ptext, phover, colors, xb, yb,
                             ["p0", "p1", "p2", "p3", "pc"], lanes))
        name = lambda a: a.replace("x", "xaxis").replace("y", "yaxis")  # noqa: E731
        axes[name(xa)] = {"domain": [0, 0.76], "anchor": ya, "side": "top", "fixedrange": False,
                          "showticklabels": w == 0, "type": "category"}
        axes[name(xb)] = {"domain": [0.8, 1], "anchor": yb, "side": "top",
                          "showticklabels": w == 0, "type": "category"}
        axes[name(ya)] = {"domain": dom, "anchor": xa, "autorange": "reversed",
                          "title": {"text": f"warp {w}", "font": {"size": 11}},
                          "type": "category"}
        axes[name(yb)] = {"domain": dom, "anchor": xb, "autorange": "reversed",
                          "showticklabels": False, "type": "category"}
    changed = int((s.regs != prev.regs).sum() + (s.preds != prev.preds).sum())
    title = (f"Registers · {warps} warp{'s' * (warps > 1)} × {L} lanes"
             + (f" · {changed} changed at this token" if changed else ""))
    return PlotlyJSON({"data": data, "layout": _layout(
        rec, title, 70 + 132 * warps, margin={"l": 110, "r": 12, "t": 62, "b": 10},
        annotations=annotations, **axes)})


# --- 3. memory ---------------------------------------------------------------------------------


def memory(rec: Recording, i: int) -> PlotlyJSON:
    """Global words (8 x 16) coloured by the argument array that holds them, shared words
    (4 x 16) of the block's shared size; changed words orange."""
    s, prev = rec.state(i), rec.before(i)
    arrays = [p for p in rec.params if p.array]
    gcolors = [EMPTY, ABSENT, CHANGED] + [ARG_COLORS[k % len(ARG_COLORS)]
                                          for k in range(len(arrays))]
    cols = 16
    z, text, hover = [], [], []
    for row in range(limits.GLOBAL_WORDS // cols):
        zr, tr, hr = [], [], []
        for c in range(cols):
            w = row * cols + c
            v, was = int(s.gmem[w]), int(prev.gmem[w])
            owner = next((k for k, p in enumerate(arrays)
                          if p.array[0] <= w < p.array[0] + p.array[1]), None)
            cat = 1 if w == 0 else 0 if owner is None else 3 + owner
            if v != was:
                cat = 2
            zr.append(cat)
            tr.append("" if owner is None and v == 0 else _short(v))
            where = memory_label(f"g{w}", rec.params)
            hr.append(f"{where} · byte {4 * w} = {_hover(v)}"
                      + (f" (was {_s32(was)})" if v != was else "")
                      + (" · the null word" if w == 0 else ""))
        z.append(zr)
        text.append(tr)
        hover.append(hr)
    srows = limits.SHARED_WORDS // cols
    sz, stext, shover = [], [], []
    for row in range(srows):
        zr, tr, hr = [], [], []
        for c in range(cols):
            w = row * cols + c
            v, was = int(s.smem[w]), int(prev.smem[w])
            inside = w < rec.shared_words
            zr.append(2 if v != was else 1 if inside else 0)
            tr.append(_short(v) if inside or v else "")
            hr.append(f"shared word {w} · byte {4 * w} = {_hover(v)}"
                      + (f" (was {_s32(was)})" if v != was else "")
                      + ("" if inside else " · outside the block's shared memory"))
        sz.append(zr)
        stext.append(tr)
        shover.append(hr)
    xs = [f"+{c}" for c in range(cols)]
    gy = [f"g{r * cols}" for r in range(limits.GLOBAL_WORDS // cols)]
    sy = [f"s{r * cols}" for r in range(srows)]
    data = [_heatmap(z, text, hover, gcolors, "x", "y", xs, gy, 10),
            _heatmap(sz, stext, shover, [EMPTY, "#e6fcf5", CHANGED], "x2", "y2", xs, sy, 10)]
    legend = "  ".join(
        f"<span style='color:{ARG_COLORS[k % len(ARG_COLORS)]}'>■</span> {p.label} "
        f"(g{p.array[0]}–g{p.array[0] + p.array[1] - 1})" if p.array[1] else
        f"<span style='color:{ARG_COLORS[k % len(ARG_COLORS)]}'>■</span> {p.label} (empty)"
        for k, p in enumerate(arrays))
    scalars = ", ".join(f"{p.label} = {p.value}" for p in rec.params if not p.array)
    note = legend + (f"   scalars: {scalars}" if scalars else "")
    changed = int((s.gmem != prev.gmem).sum() + (s.smem != prev.smem).sum())
    title = "Memory" + (f" · {changed} word{'s' * (changed > 1)} changed at this token"
                        if changed else "")
    return PlotlyJSON({"data": data, "layout": _layout(
        rec, title, 450, margin={"l": 48, "r": 12, "t": 84, "b": 10},
        xaxis={"domain": [0, 1], "anchor": "y", "side": "top", "type": "category"},
        yaxis={"domain": [0.36, 1], "anchor": "x", "autorange": "reversed", "type": "category",
               "title": {"text": "global", "font": {"size": 11}}},
        xaxis2={"domain": [0, 1], "anchor": "y2", "showticklabels": False, "type": "category"},
        yaxis2={"domain": [0, 0.27], "anchor": "x2", "autorange": "reversed",
                "type": "category",
                "title": {"text": f"shared ({rec.shared_words} w)", "font": {"size": 11}}},
        annotations=[{"text": note, "showarrow": False, "x": 0, "y": 1.0, "xref": "paper",
                      "yref": "paper", "yanchor": "bottom", "xanchor": "left", "yshift": 22,
                      "font": {"size": 11}}])})


# --- 4. pipeline -------------------------------------------------------------------------------


_UNIT_SHORT = {"memory": "mem", "multiply": "mul", "alu": "alu"}


def pipeline(rec: Recording, i: int) -> PlotlyJSON:
    """The block of the EXEC token i belongs to: which slot unit ran which instruction, for
    which lanes, then its terminator; with the frames it wrote back."""
    ex = rec.exec_at(i)
    if ex is None:
        return empty("pipeline", "No EXEC yet at this token.")
    block, warp, mask = int(ex.fields[0]), int(ex.fields[1][1:]), int(ex.fields[2][1:])
    blk = rec.program.blocks[block]
    active = lanes_of(mask)
    rows, z, text, hover = [], [], [], []
    kinds = list(UNIT_COLORS)
    for slot in range(limits.BLOCK_SLOTS):
        ins = blk.instrs[slot] if slot < len(blk.instrs) else None
        nop = ins is None or ins == NOP
        unit = "nop" if nop else unit_of(ins)
        slot_units = "alu+" + _UNIT_SHORT[SLOT_UNITS[slot]]
        label = "—" if nop else format_instr(ins).split("  ;")[0]
        rows.append(f"S{slot} {slot_units:8s} {label}")
        z.append([kinds.index(unit) if ln in active and not nop else len(kinds)
                  for ln in range(L)])
        text.append(["●" if ln in active and not nop else "" for ln in range(L)])
        hover.append([f"slot {slot} ({slot_units}) · lane {ln}: "
                      + ("empty slot" if nop else
                         f"{label} on the {unit} unit" if ln in active else
                         f"{label} — lane {ln} is not in this EXEC") for ln in range(L)])
    term = format_term(blk.term)
    rows.append(f"T  {'term':8s} {term}")
    z.append([kinds.index("term") if ln in active else len(kinds) for ln in range(L)])
    text.append(["●" if ln in active else "" for ln in range(L)])
    hover.append([f"terminator · lane {ln}: {term}" for ln in range(L)])
    events, _ = rec.events()
    k = events.index(ex)
    after = []
    for e in events[k + 1:]:
        if e.kind == "exec":
            break
        after.append(describe(e, rec.params))
    note = "<br>".join(["then: " + a if n == 0 else "      " + a
                        for n, a in enumerate(after[:6])]
                       + ([f"      … {len(after) - 6} more"] if len(after) > 6 else []))
    colors = [UNIT_COLORS[u] for u in kinds] + [ABSENT]
    data = [_heatmap(z, text, hover, colors, "x", "y", [f"lane {ln}" for ln in range(L)],
                     rows, 12)]
    runs = rec.runs_before(ex.last).get(block, 0)
    title = (f"Pipeline · EXEC B{block} at token {ex.last} · warp {warp}, lanes "
             f"{','.join(map(str, active))} (run {runs} of this block)")
    return PlotlyJSON({"data": data, "layout": _layout(
        rec, title, 300 + 16 * min(len(after), 7),
        margin={"l": 330, "r": 12, "t": 62, "b": 12 + 16 * min(len(after), 7)},
        xaxis={"side": "top", "type": "category"},
        yaxis={"autorange": "reversed", "type": "category", "tickfont": {"size": 11}},
        annotations=[{"text": note, "showarrow": False, "x": 0, "y": 0, "xref": "paper",
                      "yref": "paper", "xanchor": "left", "yanchor": "top", "yshift": -6,
                      "align": "left", "font": {"size": 11}}] if note else [])})


# --- 5. warp scheduler -------------------------------------------------------------------------

_TERM_COLORS = {TermKind.JMP: "#74c0fc", TermKind.BRA: "#4dabf7", TermKind.BAR: "#b197fc",
                TermKind.EXIT: "#868e96"}


def scheduler(rec: Recording, i: int) -> PlotlyJSON:
    """One row per warp, one column per generated token: which block each EXEC ran (until the
    next EXEC), parks, exits, the scheduler's sweep, thread-block changes, the end."""
    events, _ = rec.events()
    n = len(rec)
    execs = [e for e in events if e.kind == "exec"]
    bars: dict[TermKind, dict[str, list]] = {}
    for k, e in enumerate(execs):
        start = e.last
        stop = execs[k + 1].last if k + 1 < len(execs) else n
        block, warp = int(e.fields[0]), int(e.fields[1][1:])
        kind = rec.program.blocks[block].term.kind
        b = bars.setdefault(kind, {"x": [], "base": [], "y": [], "text": [], "hover": []})
        b["x"].append(max(stop - start, 1))
        b["base"].append(start - 0.5)
        b["y"].append(f"w{warp}")
        b["text"].append(f"B{block}")
        b["hover"].append(f"tokens {start}–{stop - 1}: warp {warp} runs B{block} with lanes "
                          f"{','.join(map(str, lanes_of(int(e.fields[2][1:]))))} · "
                          f"{format_term(rec.program.blocks[block].term)}")
    data = []
    for kind, b in bars.items():
        data.append({"type": "bar", "orientation": "h", "x": b["x"], "base": b["base"],
                     "y": b["y"], "text": b["text"], "textposition": "inside",
                     "insidetextanchor": "start", "constraintext": "inside",
                     "hovertext": b["hover"], "hovertemplate": "%{hovertext}<extra></extra>",
                     "marker": {"color": _TERM_COLORS[kind], "line": {"width": 0.5,
                                                                       "color": "white"}},
                     "name": kind.name.lower(), "width": 0.6})
    marks = {"park": ("diamond", "#f08c00"), "exit": ("x", "#c92a2a"),
             "warp": ("triangle-right", "#868e96"), "end": ("star", "#2b8a3e"),
             "fault": ("x", "#e03131")}
    points: dict[str, dict[str, list]] = {}
    shapes, annotations = [], []
    for e in events:
        if e.kind == "cta":
            shapes.append({"type": "line", "x0": e.last, "x1": e.last, "y0": 0, "y1": 1,
                           "yref": "paper", "line": {"color": "#495057", "dash": "dot",
                                                     "width": 1}})
            annotations.append({"x": e.last, "y": 1, "yref": "paper", "text": f"cta {e.fields[0]}",
                                "showarrow": False, "yanchor": "bottom",
                                "font": {"size": 10}})
            continue
        if e.kind not in marks:
            continue
        if e.kind in ("park",):
            warp = int(e.fields[1][1:])
        elif e.kind in ("exit", "warp"):
            warp = int(e.fields[0][1:])
        else:
            last = execs[-1] if execs else None
            warp = int(last.fields[1][1:]) if last else 0
        p = points.setdefault(e.kind, {"x": [], "y": [], "hover": []})
        p["x"].append(e.last)
        p["y"].append(f"w{warp}")
        p["hover"].append(f"token {e.last}: {describe(e, rec.params)}")
    for kind, p in points.items():
        symbol, color = marks[kind]
        data.append({"type": "scatter", "mode": "markers", "x": p["x"], "y": p["y"],
                     "marker": {"symbol": symbol, "size": 10 if kind != "warp" else 7,
                                "color": color, "line": {"width": 1, "color": color}},
                     "hovertext": p["hover"], "hovertemplate": "%{hovertext}<extra></extra>",
                     "name": kind})
    shapes.append({"type": "line", "x0": i, "x1": i, "y0": 0, "y1": 1, "yref": "paper",
                   "line": {"color": "#e03131", "width": 2}})
    warps = [f"w{w}" for w in range(rec.warps)]
    return PlotlyJSON({"data": data, "layout": _layout(
        rec, f"Warp scheduler · token {i} of {n} · bars: the block each EXEC ran "
             f"(blue: jmp/bra, purple: bar.sync, gray: exit)", 120 + 46 * rec.warps,
        margin={"l": 40, "r": 12, "t": 56, "b": 36}, barmode="overlay",
        xaxis={"title": {"text": "generated token", "font": {"size": 11}},
               "range": [-0.5, max(n, 1) - 0.5], "zeroline": False,
               "showgrid": True, "gridcolor": "#f1f3f5"},
        yaxis={"type": "category", "categoryorder": "array", "categoryarray": warps,
               "autorange": "reversed"},
        shapes=shapes, annotations=annotations)})


# --- 6. ROM ------------------------------------------------------------------------------------


def rom(rec: Recording, i: int) -> PlotlyJSON:
    """The program's blocks: four slots and a terminator each, coloured by unit; the block of
    token i's EXEC outlined; how often each block ran up to that EXEC (so the view changes
    only from one EXEC to the next)."""
    prog = rec.program
    kinds = list(UNIT_COLORS)
    ex = rec.exec_at(i)
    current = int(ex.fields[0]) if ex is not None else None
    runs = rec.runs_before(ex.last if ex is not None else -1)
    z, text, hover, ys = [], [], [], []
    for b, blk in enumerate(prog.blocks):
        zr, tr, hr = [], [], []
        for slot in range(limits.BLOCK_SLOTS):
            ins = blk.instrs[slot] if slot < len(blk.instrs) else None
            nop = ins is None or ins == NOP
            label = "" if nop else format_instr(ins).split("  ;")[0]
            zr.append(kinds.index("nop" if nop else unit_of(ins)))
            tr.append(label if len(label) <= 24 else label[:23] + "…")
            hr.append(f"B{b} slot {slot}: " + ("empty" if nop else
                                               format_instr(ins).replace("  ;", "  //")))
        term = format_term(blk.term)
        zr.append(kinds.index("term"))
        tr.append(term)
        hr.append(f"B{b} terminator: {term}")
        zr.append(len(kinds))
        tr.append(str(runs.get(b, 0)))
        hr.append(f"B{b} ran {runs.get(b, 0)} times up to this EXEC")
        z.append(zr)
        text.append(tr)
        hover.append(hr)
        ys.append(f"B{b}")
    colors = [UNIT_COLORS[u] for u in kinds] + ["white"]
    xs = [f"slot {s} ({_UNIT_SHORT[SLOT_UNITS[s]]})" for s in range(limits.BLOCK_SLOTS)] \
        + ["terminator", "runs"]
    shapes = []
    if current is not None:
        shapes.append({"type": "rect", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
                       "y0": current - 0.5, "y1": current + 0.5,
                       "line": {"color": "#e03131", "width": 2.5}})
    nb = len(prog.blocks)
    height = max(220, min(1400, 80 + 26 * nb))
    title = (f"ROM · {prog.name}: {nb} blocks, {prog.instruction_count()} instructions"
             + (f" · EXEC B{current} at token {ex.last}" if current is not None else ""))
    return PlotlyJSON({"data": [_heatmap(z, text, hover, colors, "x", "y", xs, ys, 10)],
                       "layout": _layout(rec, title, height,
                                         margin={"l": 44, "r": 12, "t": 62, "b": 10},
                                         xaxis={"side": "top", "type": "category"},
                                         yaxis={"autorange": "reversed", "type": "category"},
                                         shapes=shapes)})
