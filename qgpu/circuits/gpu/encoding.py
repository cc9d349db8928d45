"""How every protocol token (qgpu/tokens.py) looks in the residual stream: its input features.

A token's embedding row is also its output row (Qwen3.5 ties them), so the features a generated
token carries double as its *selection fields*: each is a one-hot group or a dual-rail bit (a
``…1`` dim set for a one, the ``…0`` twin for a zero), so every token has exactly one hot dim per
field, and the circuit selects the next token by adding a gain to the fields of its choice — the
chosen token's logit is the only one that collects the gain on every one of its fields
(docs/ARCHITECTURE.md §9). Fields used only by prompt tokens, and the positional data bytes the
write frames tap through the conv1d, are plain features.
"""

from __future__ import annotations

from dataclasses import dataclass

from qgpu import protocol as T
from qgpu.machine import limits, rom

KINDS = ("go", "end", "fault", "d1", "d2", "d3", "rom", "param", "mem", "block", "grid",
         "shared", "exec", "park", "exit", "warp", "cta", "val", "prow")  # fmt: skip
"""Token kinds, the first selection field."""

LANE_SELECT = (*range(limits.WARP_LANES), T.LANE_ALL)
SPACES = ("g", "s", *(f"l{ln}" for ln in range(limits.WARP_LANES)))  # memory spaces of a MEM row
SHAPE_BITS = 5  # launch shape extents 1..16


@dataclass(frozen=True)
class Field:
    """A group of input dims: ``onehot`` (one of `size`), ``rails`` (dual-rail bits: features
    ``name1``/``name0`` of `size` dims each) or ``bits`` (plain binary, prompt-only)."""

    name: str
    size: int
    code: str
    selects: bool  # part of the output selection (a field of some generated token)

    def features(self) -> dict[str, int]:
        """Residual features of this field: name -> size."""
        if self.code == "rails":
            return {f"{self.name}1": self.size, f"{self.name}0": self.size}
        return {self.name: self.size}


FIELDS = (
    Field("kind", len(KINDS), "onehot", True),
    Field("byte", 8, "rails", True),  # byte 0 of a header, the byte of a data token
    Field("blk", 7, "rails", True),  # machine block (exec, park, rom)
    Field("wrp", 2, "rails", True),
    Field("msk", limits.WARP_LANES, "rails", True),
    Field("cta", 4, "rails", True),
    Field("reg", 4, "rails", True),
    Field("lanesel", len(LANE_SELECT), "onehot", True),
    Field("mrow", 7, "rails", True),
    Field("mspace", len(SPACES), "onehot", True),
    Field("fault", len(T.FAULTS), "onehot", True),
    Field("romsel", rom.SLOTS * rom.PARTS, "onehot", False),
    Field("pword", 4, "bits", False),
    Field("bx", SHAPE_BITS, "bits", False),
    Field("by", SHAPE_BITS, "bits", False),
    Field("gx", SHAPE_BITS, "bits", False),
    Field("gy", SHAPE_BITS, "bits", False),
    Field("shw", 7, "bits", False),
    Field("thr", limits.MAX_THREADS, "bits", False),  # block: bit t = thread t exists
    Field("ctas", limits.MAX_GRID_BLOCKS, "bits", False),  # grid: bit c = thread block c exists
    *(Field(f"d{k}", 8, "bits", False) for k in range(1, T.DATA_POSITIONS + 1)),
)
"""Every input field; ``d1..d3`` repeat a data token's byte where only that position sets it, so
a frame's conv1d taps cannot pick up a neighbour's byte."""

FIELD = {f.name: f for f in FIELDS}
SELECTION_FEATURES = tuple(n for f in FIELDS if f.selects for n in f.features())


def _set(out: dict[str, list[int]], field: str, value: int) -> None:
    f = FIELD[field]
    if f.code == "onehot":
        if not 0 <= value < f.size:
            raise ValueError(f"{field} = {value} outside 0..{f.size - 1}")
        out[field] = [int(i == value) for i in range(f.size)]
        return
    if not 0 <= value < 1 << f.size:
        raise ValueError(f"{field} = {value} does not fit {f.size} bits")
    ones = [value >> i & 1 for i in range(f.size)]
    if f.code == "rails":
        out[f"{field}1"] = ones
        out[f"{field}0"] = [1 - b for b in ones]
    else:
        out[field] = ones


def features(token: str) -> dict[str, list[int]]:
    """The input features of a protocol token (fields it does not use are all zero)."""
    kind, *args = T.body(token).split(":")
    out: dict[str, list[int]] = {}
    if kind[0] == "d" and kind[1:].isdigit():
        _set(out, "kind", KINDS.index(kind))
        _set(out, "byte", int(args[0]))
        _set(out, kind, int(args[0]))
        return out
    _set(out, "kind", KINDS.index(kind))
    if kind == "fault":
        _set(out, "fault", T.FAULTS.index(args[0]))
    elif kind == "rom":
        block, slot, part = map(int, args)
        _set(out, "blk", block)
        _set(out, "romsel", slot * rom.PARTS + part)
    elif kind == "param":
        _set(out, "pword", int(args[0]))
        _set(out, "byte", int(args[1]))
    elif kind == "mem":
        space, index = args[0][0], args[0][1:]
        if space == "l":
            lane, word = map(int, index.split("."))
            _set(out, "mspace", SPACES.index(f"l{lane}"))
            _set(out, "mrow", word)
        else:
            _set(out, "mspace", SPACES.index(space))
            _set(out, "mrow", int(index))
        _set(out, "byte", int(args[1]))
    elif kind in ("block", "grid"):
        x, y = map(int, args[0].split("x"))
        prefix = "b" if kind == "block" else "g"
        _set(out, f"{prefix}x", x - 1)
        _set(out, f"{prefix}y", y - 1)
        _set(out, "thr" if kind == "block" else "ctas", (1 << x * y) - 1)
    elif kind == "shared":
        _set(out, "shw", int(args[0]))
    elif kind in ("exec", "park"):
        _set(out, "blk", int(args[0]))
        _set(out, "wrp", int(args[1][1:]))
        _set(out, "msk", int(args[2][1:]))
    elif kind == "exit":
        _set(out, "wrp", int(args[0][1:]))
        _set(out, "msk", int(args[1][1:]))
    elif kind == "warp":
        _set(out, "wrp", int(args[0][1:]))
    elif kind == "cta":
        _set(out, "cta", int(args[0]))
    elif kind == "val":
        _set(out, "reg", int(args[0][1:]))
        lane = args[1]
        _set(out, "lanesel", LANE_SELECT.index(lane if lane == T.LANE_ALL else int(lane)))
        _set(out, "byte", int(args[2]))
    elif kind == "prow":
        _set(out, "byte", int(args[0]))
    return out
