"""The CUDA tab's text panels as HTML/plain text: the result (every parameter's final value,
arrays as tables; tokens, time, tokens/s; the verify verdict), errors (kind and message, never a
traceback), and the token lists."""

from __future__ import annotations

import html
from typing import Any

from qgpu import protocol as T
from qgpu.app.recording import Param, Recording

ERROR_TITLES = {
    "compile": "Compile error",
    "unsupported": "Unsupported construct",
    "resource": "Does not fit the machine",
    "launch": "Launch stopped",
    "usage": "Check the launch settings",
    "internal": "Internal error",
}

STYLE = """
#cuda-result .qg-box {border-radius: 8px; padding: 10px 14px; margin: 4px 0 10px 0;}
#cuda-result .qg-ok {background: #ebfbee; border: 1px solid #8ce99a;}
#cuda-result .qg-run {background: #e7f5ff; border: 1px solid #a5d8ff;}
#cuda-result .qg-err {background: #fff5f5; border: 1px solid #ffa8a8;}
#cuda-result .qg-warn {background: #fff9db; border: 1px solid #ffe066;}
#cuda-result pre {white-space: pre-wrap; margin: 6px 0 0 0; font-size: 13px;}
#cuda-result table.qg-arr {border-collapse: collapse; margin: 2px 0 8px 0; font-size: 13px;
  font-family: ui-monospace, SFMono-Regular, Menlo, monospace;}
#cuda-result table.qg-arr td, #cuda-result table.qg-arr th {border: 1px solid #dee2e6;
  padding: 2px 7px; text-align: right; min-width: 2.2em;}
#cuda-result table.qg-arr th {background: #f1f3f5; color: #868e96; font-weight: normal;}
#cuda-result .qg-name {font-weight: 600; margin-top: 6px;}
#cuda-result .qg-dim {color: #868e96;}
"""


def _esc(x: Any) -> str:
    return html.escape(str(x))


def array_table(values: list[int], per_row: int = 16) -> str:
    """An array as a table: index header rows over value rows, `per_row` words a row."""
    if not values:
        return "<div class='qg-dim'>(empty)</div>"
    rows = []
    for start in range(0, len(values), per_row):
        chunk = values[start:start + per_row]
        rows.append("<tr>" + "".join(f"<th>{start + k}</th>" for k in range(len(chunk)))
                    + "</tr>")
        rows.append("<tr>" + "".join(f"<td>{_esc(v)}</td>" for v in chunk) + "</tr>")
    return f"<table class='qg-arr'>{''.join(rows)}</table>"


def _param_kind(p: Param) -> str:
    if p.array is None:
        return "scalar"
    words = f"{p.array[1]} word{'s' * (p.array[1] != 1)}"
    return f"output array, {words}" if isinstance(p.value, dict) else f"array, {words}"


def params_html(params: list[Param], values: list[Any]) -> str:
    """Every parameter's final value (the model's global memory for arrays)."""
    out = []
    for p, v in zip(params, values, strict=True):
        out.append(f"<div class='qg-name'>{_esc(p.label)} <span class='qg-dim'>"
                   f"({_esc(_param_kind(p))})</span></div>")
        out.append(array_table(v) if isinstance(v, list) else f"<div>{_esc(v)}</div>")
    return "".join(out)


def error_html(kind: str, message: str, extra: str = "") -> str:
    title = ERROR_TITLES.get(kind, "Error")
    return (f"<div class='qg-box qg-err'><b>{_esc(title)}</b> <span class='qg-dim'>"
            f"({_esc(kind)})</span><pre>{_esc(message)}</pre>{extra}</div>")


def running_html(rec: Recording, seconds: float) -> str:
    n = len(rec)
    rate = f" · {n / seconds:.0f} tokens/s" if seconds > 0 and n else ""
    return (f"<div class='qg-box qg-run'><b>The model is generating the launch…</b> "
            f"{n} tokens after {len(rec.prompt)} prompt tokens · {seconds:.1f} s{rate}</div>")


def timing(rec: Recording, seconds: dict[str, float] | float) -> str:
    n = len(rec)
    if isinstance(seconds, dict):
        total = seconds.get("prefill", 0.0) + seconds.get("decode", 0.0)
        split = (f" (prefill {seconds.get('prefill', 0):.2f} s, decode "
                 f"{seconds.get('decode', 0):.2f} s)")
    else:
        total, split = seconds, ""
    rate = f" · {n / total:.1f} tokens/s" if total > 0 else ""
    return (f"{n} generated tokens after {len(rec.prompt)} prompt tokens in {total:.2f} s"
            f"{rate}{split}")


def verdict_html(exact: bool | None, message: str) -> str:
    cls = "qg-ok" if exact else "qg-warn" if exact is None else "qg-err"
    mark = "✓" if exact else "?" if exact is None else "✗"
    return (f"<div class='qg-box {cls}'><b>{mark} verify</b> (the reference interpreter replayed "
            f"the launch afterwards and only compares): {_esc(message)}</div>")


def races_html(messages: list[str]) -> str:
    """The verify replay's race warnings: the launch completed, but its result may depend on
    the order the warps or thread blocks ran in (docs/ISA.md §9)."""
    if not messages:
        return ""
    items = "".join(f"<li>{_esc(m)}</li>" for m in messages)
    return (f"<div class='qg-box qg-warn'><b>⚠ {len(messages)} data "
            f"race{'s' * (len(messages) != 1)}</b> (found by the verify replay)<ul>{items}</ul>"
            f"</div>")


def done_html(rec: Recording, values: list[Any], seconds, engine: str, verdict: str = "") \
        -> str:
    head = (f"<div class='qg-box qg-ok'><b>Done</b> — <code>{_esc(rec.kernel)}</code> on the "
            f"model ({_esc(engine)} engine): {_esc(timing(rec, seconds))}. Every value below was "
            f"read from the model's recurrent state.</div>")
    return head + verdict + params_html(rec.params, values)


def tokens_text(rec: Recording | None, limit: int = 4000, last: int | None = None) -> str:
    """The generated tokens, one machine event a line (its data tokens in front); with `last`,
    only the newest events."""
    if rec is None or not len(rec):
        return ""
    events, owner = rec.events()
    lines = [f"   …  {len(events) - last} events before"] if last and len(events) > last else []
    for e in events[-last:] if last else events:
        toks = " ".join(rec.tokens[e.first:e.last + 1])
        lines.append(f"{e.first:>5}  {toks}" + (f"   = {e.value}" if e.value is not None
                                                 and e.first != e.last else ""))
    pending = [t for t, o in enumerate(owner) if o is None]
    if pending:
        lines.append(f"{pending[0]:>5}  " + " ".join(rec.tokens[t] for t in pending))
    if len(lines) > limit:
        lines = lines[:limit // 2] + [f"   …  {len(lines) - limit} more events"] \
            + lines[-limit // 2:]
    return "\n".join(lines)


def prompt_text(rec: Recording | None) -> str:
    """The prompt tokens: ROM parts, parameters, memory, launch shape, GO."""
    if rec is None:
        return ""
    events = T.decode([T.name(t) for t in rec.prompt])
    return "\n".join(f"{e.first:>5}  " + " ".join(rec.prompt[e.first:e.last + 1])
                     for e in events)
