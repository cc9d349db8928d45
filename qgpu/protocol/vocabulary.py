"""The circuit tokens: names, the memory rows a MEM frame addresses, the vocabulary in id order,
and value frames (docs/ARCHITECTURE.md §9; the protocol as a whole: qgpu/protocol/__init__.py)."""

from __future__ import annotations

from qgpu.errors import UsageError
from qgpu.machine import limits, rom
from qgpu.machine.interp import MASK32

PREFIX = "<|gpu:"
SUFFIX = "|>"
LANE_ALL = "all"
DATA_POSITIONS = 3  # conv1d taps reach three tokens back
FAULTS = (
    "null", "global_bounds", "shared_bounds", "local_bounds", "param_bounds", "misaligned",
    "divergent_barrier", "shuffle_lane",
)  # fmt: skip
"""Launch faults the model reports by name (the runtime adds the place from the trace)."""


def name(body: str) -> str:
    return f"{PREFIX}{body}{SUFFIX}"


def body(token: str) -> str:
    if not (token.startswith(PREFIX) and token.endswith(SUFFIX)):
        raise UsageError(f"{token!r} is not a qgpu token")
    return token[len(PREFIX):-len(SUFFIX)]


# --- memory rows ----------------------------------------------------------------------------

GLOBAL_ROWS = limits.GLOBAL_WORDS
SHARED_ROWS = limits.SHARED_WORDS
LOCAL_ROWS = limits.WARP_LANES * limits.LOCAL_WORDS


def memory_rows() -> list[str]:
    """Every memory word a MEM frame can address: global, shared, then local (per lane)."""
    return ([f"g{w}" for w in range(GLOBAL_ROWS)] + [f"s{w}" for w in range(SHARED_ROWS)]
            + [f"l{ln}.{w}" for ln in range(limits.WARP_LANES)
               for w in range(limits.LOCAL_WORDS)])  # fmt: skip


def memory_row(space: str, byte_address: int) -> str:
    """The MEM row of a trace memory record (local addresses are lane * LOCAL_WORDS * 4 + a)."""
    word = byte_address // limits.WORD_BYTES
    if space == "global":
        return f"g{word}"
    if space == "shared":
        return f"s{word}"
    lane, w = divmod(word, limits.LOCAL_WORDS)
    return f"l{lane}.{w}"


# --- vocabulary -----------------------------------------------------------------------------


def _shapes() -> list[tuple[int, int]]:
    return [(x, y) for y in range(1, 17) for x in range(1, 17) if x * y <= 16]


def vocabulary() -> list[str]:
    """Every circuit token, in id order (the merge gives them ids after the base vocabulary)."""
    bytes_ = range(256)
    out = [name("go"), name("end")] + [name(f"fault:{f}") for f in FAULTS]
    out += [name(f"d{k}:{x}") for k in range(1, DATA_POSITIONS + 1) for x in bytes_]
    out += [name(f"rom:{b}:{s}:{p}") for b in range(limits.ROM_BLOCKS) for s in range(rom.SLOTS)
            for p in range(rom.PARTS)]  # fmt: skip
    out += [name(f"param:{w}:{x}") for w in range(limits.PARAM_WORDS) for x in bytes_]
    out += [name(f"mem:{row}:{x}") for row in memory_rows() for x in bytes_]
    out += [name(f"block:{x}x{y}") for x, y in _shapes()]
    out += [name(f"grid:{x}x{y}") for x, y in _shapes()]
    out += [name(f"shared:{n}") for n in range(limits.SHARED_WORDS + 1)]
    out += [name(f"exec:{b}:w{w}:m{m}") for b in range(limits.ROM_BLOCKS)
            for w in range(limits.MAX_WARPS) for m in range(1, 1 << limits.WARP_LANES)]
    masks = range(1, 1 << limits.WARP_LANES)
    out += [name(f"park:{b}:w{w}:m{m}") for b in range(limits.ROM_BLOCKS)
            for w in range(limits.MAX_WARPS) for m in masks]
    out += [name(f"exit:w{w}:m{m}") for w in range(limits.MAX_WARPS) for m in masks]
    out += [name(f"warp:w{w}") for w in range(limits.MAX_WARPS)]
    out += [name(f"cta:{c}") for c in range(1, limits.MAX_GRID_BLOCKS)]
    lanes = [*map(str, range(limits.WARP_LANES)), LANE_ALL]
    out += [name(f"val:r{r}:{ln}:{x}") for r in range(1, limits.NUM_REGS) for ln in lanes
            for x in bytes_]  # fmt: skip
    out += [name(f"prow:{x}") for x in bytes_]
    return out


# --- frames ---------------------------------------------------------------------------------


def frame(header: str, value: int) -> list[str]:
    """A value frame for a header with a byte-0 payload: ``header`` has a ``{}`` for it."""
    data = (value & MASK32).to_bytes(4, "little")
    n = max(1, len(data.rstrip(b"\0")))
    return [name(f"d{k}:{data[k]}") for k in range(n - 1, 0, -1)] + [name(header.format(data[0]))]


def part_frame(header: str, value: int) -> list[str]:
    """A frame for a header without payload (ROM parts: 24 bits); empty for a zero part."""
    data = value.to_bytes(DATA_POSITIONS, "little")
    n = len(data.rstrip(b"\0"))
    return [name(f"d{k}:{data[k - 1]}") for k in range(n, 0, -1)] + ([name(header)] if n else [])
