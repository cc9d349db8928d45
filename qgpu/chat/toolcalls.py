"""Tool calls in an assistant's text, as Qwen3.5 writes them (the "qwen3_coder" format):

    <tool_call>
    <function=gpu_calc>
    <parameter=expression>
    [1, 2, 3] @ [4, 5, 6]
    </parameter>
    </function>
    </tool_call>

``parse_tool_calls`` finds every call, in order, and says what is wrong with a malformed or
unfinished one (the host answers those with an error response, so the model can repair the
call). A call opened inside ``<think>`` counts as a call. Parsing is lenient where the intent is
clear: a missing ``</parameter>`` ends at the next parameter or ``</function>``, a missing
``</tool_call>`` is fine once ``</function>`` closed the call, the older JSON form
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` is accepted, and so is a bare
``<function=...>...</function>`` when the text has no ``<tool_call>`` at all. Parameter values
are the raw text between ``<parameter=P>\\n`` and ``\\n</parameter>`` (tools.py converts them).

``stop_after_calls`` is the streaming rule: once a call is closed, generation goes on only
through whitespace and further calls; anything else (the model's own "result", a hallucinated
``<tool_response>``) is cut, and the host runs the calls.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

OPEN, CLOSE = "<tool_call>", "</tool_call>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"

_FUNCTION = re.compile(r"<function=([^>\n]*)>")
_PARAMETER = re.compile(r"<parameter=([^>\n]*)>")


@dataclass
class ToolCall:
    """One call found in the text: its function name and raw arguments, where it sits
    (`start`..`end` in the text), whether it was written inside thinking, and `error` (why
    it cannot be run) or None."""

    name: str | None
    arguments: dict[str, Any] = field(default_factory=dict)
    start: int = 0
    end: int = 0
    in_thinking: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def message(self) -> dict[str, Any]:
        """The call as a chat message's ``tool_calls`` entry (what the template renders)."""
        return {"type": "function",
                "function": {"name": self.name or "", "arguments": dict(self.arguments)}}


def thinking_end(text: str, thinking_open: bool) -> int:
    """Where thinking ends in an assistant's text: -1 if it has none (the prompt closed
    thinking and the text opens no ``<think>``), else at ``</think>``, or len(text) if
    thinking never closed."""
    if not (thinking_open or text.lstrip().startswith(THINK_OPEN)):
        return -1
    close = text.find(THINK_CLOSE)
    return close if close >= 0 else len(text)


def split_reasoning(text: str, thinking_open: bool = False) -> tuple[str, str]:
    """(reasoning, content) of an assistant's text; `thinking_open`: the prompt opened
    ``<think>`` and the text continues it."""
    end = thinking_end(text, thinking_open)
    if end < 0:
        return "", text
    reasoning = text[:end]
    if reasoning.lstrip().startswith(THINK_OPEN):
        reasoning = reasoning.lstrip()[len(THINK_OPEN):]
    return reasoning.strip("\n"), text[end + len(THINK_CLOSE):].lstrip("\n")


def _value(raw: str) -> str:
    """A parameter's raw value: the text between its tags, less one newline each side."""
    if raw.startswith("\n"):
        raw = raw[1:]
    if raw.endswith("\n"):
        raw = raw[:-1]
    return raw


def _parse_body(body: str, closed: bool) -> tuple[str | None, dict[str, Any], str | None]:
    """(name, arguments, error) of the text inside one <tool_call>."""
    stripped = body.strip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError as e:
            return None, {}, f"the JSON inside <tool_call> does not parse: {e}"
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return None, {}, 'a JSON tool call needs {"name": ..., "arguments": {...}}'
        args = obj.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                pass
        if not isinstance(args, dict):
            return obj["name"], {}, "the call's arguments must be an object"
        return obj["name"], args, None
    fn = _FUNCTION.search(body)
    if fn is None:
        return None, {}, "no <function=NAME> inside <tool_call>"
    name = fn.group(1).strip()
    rest = body[fn.end():]
    fn_close = rest.find("</function>")
    if fn_close < 0 and not closed:
        return name or None, {}, "the call is unfinished (no </function> and no </tool_call>)"
    if fn_close >= 0:
        rest = rest[:fn_close]
    args: dict[str, Any] = {}
    params = list(_PARAMETER.finditer(rest))
    for i, p in enumerate(params):
        end = params[i + 1].start() if i + 1 < len(params) else len(rest)
        chunk = rest[p.end():end]
        close = chunk.find("</parameter>")
        pname = p.group(1).strip()
        if pname in args:
            return name, args, f"parameter {pname!r} is given twice"
        args[pname] = _value(chunk[:close] if close >= 0 else chunk.rstrip() + "\n")
    if not name:
        return None, args, "<function=> names no function"
    return name, args, None


def parse_tool_calls(text: str, thinking_open: bool = False) -> list[ToolCall]:
    """Every tool call in an assistant's text, in order (malformed ones with their error)."""
    think = thinking_end(text, thinking_open)
    calls: list[ToolCall] = []
    pos = 0
    while True:
        start = text.find(OPEN, pos)
        if start < 0:
            break
        inner = start + len(OPEN)
        close = text.find(CLOSE, inner)
        reopen = text.find(OPEN, inner)
        closed = close >= 0 and (reopen < 0 or close < reopen)
        stop = close if closed else (reopen if reopen >= 0 else len(text))
        name, args, error = _parse_body(text[inner:stop], closed)
        end = close + len(CLOSE) if closed else stop
        calls.append(ToolCall(name, args, start, end, 0 <= start < think, error))
        pos = end
    if calls:
        return calls
    for m in _FUNCTION.finditer(text):  # a bare <function=...> block, no <tool_call> at all
        close = text.find("</function>", m.end())
        if close < 0:
            name, args, error = m.group(1).strip() or None, {}, \
                "the call is unfinished (no </function>)"
            end = len(text)
        else:
            end = close + len("</function>")
            name, args, error = _parse_body(text[m.start():end], True)
        calls.append(ToolCall(name, args, m.start(), end, 0 <= m.start() < think, error))
    return calls


def stop_after_calls(text: str) -> int | None:
    """Where to cut a streaming assistant text: after its last closed call, once something
    other than whitespace or another call follows; None to keep generating."""
    close = text.rfind(CLOSE)
    if close < 0:
        return None
    end = close + len(CLOSE)
    tail = text[end:].lstrip()
    if not tail or OPEN.startswith(tail) or tail.startswith(OPEN):
        return None
    return end
