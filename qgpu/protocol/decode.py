"""Decoding a token trace into machine events (data tokens attach to the header after them)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from qgpu.errors import UsageError
from qgpu.protocol.vocabulary import body


@dataclass(frozen=True)
class Event:
    """One machine event of a token trace: a header with its frame's value, or a bare token."""

    kind: str  # the header's first field: exec, val, mem, pred, rom, param, ...
    fields: tuple[str, ...]
    value: int | None
    first: int  # index of the frame's first token
    last: int  # index of the header

    def __str__(self) -> str:
        what = ":".join((self.kind, *self.fields))
        return what if self.value is None else f"{what} = {self.value}"


_PAYLOAD = frozenset({"param", "mem", "val", "prow"})


def decode(tokens: Iterable[str]) -> list[Event]:
    """Group a token trace into events; data tokens attach to the header after them."""
    events: list[Event] = []
    pending: dict[int, int] = {}
    start: int | None = None
    for i, tok in enumerate(tokens):
        kind, *fields = body(tok).split(":")
        if kind[0] == "d" and kind[1:].isdigit():
            pending[int(kind[1:])] = int(fields[0])
            start = i if start is None else start
            continue
        value = None
        if kind in _PAYLOAD:
            *fields, low = fields
            value = int(low) | sum(x << (8 * k) for k, x in pending.items())
        elif kind == "rom":
            value = sum(x << (8 * (k - 1)) for k, x in pending.items())
        elif pending:
            raise UsageError(f"token {i} ({tok}) cannot follow data tokens")
        events.append(Event(kind, tuple(fields), value, i if start is None else start, i))
        pending, start = {}, None
    if pending:
        raise UsageError("the trace ends inside a frame")
    return events
