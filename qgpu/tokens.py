"""The token protocol between the host and the GPU inside the model (docs/ARCHITECTURE.md §9).

The host feeds a *prompt* of tokens known before the launch (the ROM image, parameter words,
initial global memory, the launch shape); the model then *generates* the launch: one EXEC token
per machine block it runs (block, warp, active lanes), followed by the write-back frames that
carry that block's live results down to the early layers where later blocks read them, and END
(or FAULT) when the launch is over. Within one forward pass information only flows to later
layers, so a register written at layer 30 reaches layer 5 of a later token only through a
generated token's id: these frames are that channel, and the protocol is where tokens per launch
are won or lost.

**Frames.** A token carries at most one data byte; a GDN memory write takes its value from the
header token and, through the 4-tap causal conv1d, from up to three data tokens right before it:
``D3 D2 D1 HEADER``, where ``Dk`` (``<|gpu:dk:BYTE|>``) sits k tokens before the header. Headers
with a payload carry byte 0 and ``Dk`` byte k; headers without one (ROM parts) take byte k-1 from
``Dk``. Leading zero bytes are left out, so a value below 256 is one token. Data tokens are
positional so that a frame's bytes can never be confused with a neighbouring frame's.

Vocabulary (names ``<|gpu:...|>``, ids assigned by the merge after the base vocabulary):

=========================  ======================================================  ==========
token                      meaning                                                 where
=========================  ======================================================  ==========
``rom:B:s:p``              part p (24 bits) of ROM row (block B, slot s)           prompt
``param:w:X``              parameter word w, byte 0 = X                            prompt
``mem:ROW:X``              memory word ROW (g = global, s = shared, lL.w = local   both
                           word w of lane L), byte 0 = X
``block:XxY`` / ``grid:XxY``  launch shape                                         prompt
``shared:N``               shared memory words per thread block                    prompt
``go``                     end of the prompt: the model takes over                 prompt
``dK:X``                   data byte X, K tokens before its header                 both
``exec:B:wW:mM``           warp W runs machine block B with active lanes M         generated
``park:B:wW:mM``           lanes M of warp W wait at block B                       generated
``exit:wW:mM``             lanes M of warp W have exited                           generated
``warp:wW``                the scheduler looks at warp W                           generated
``cta:C``                  thread block C (C >= 1) starts                          generated
``val:rR:L:X``             register R of lane L (or every active lane: ``all``)    generated
                           gets the frame's value, byte 0 = X
``prow:X``                 the current warp's predicate row (bit 4L+P: predicate   generated
                           P of lane L; 16 bits), byte 0 = X
``end`` / ``fault:KIND``   the launch finished / stopped on a fault                generated
=========================  ======================================================  ==========

`expected_tokens` derives, from the reference interpreter's trace, exactly the tokens the model
must generate — the yardstick of ``--check`` and of the token counts in README.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from qgpu import limits, rom
from qgpu.errors import LaunchError, UsageError
from qgpu.interp import EXITED, MASK32, TraceRecord, check_launch
from qgpu.isa import ATOMIC_OPS, Block, Program, Term, TermKind

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


# --- the prompt -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Launch:
    """Everything the host knows before a launch, as the prompt states it."""

    program: Program
    grid: tuple[int, int]
    block: tuple[int, int]
    params: list[int]
    memory: list[int]  # initial global memory, GLOBAL_WORDS words
    allocations: list[tuple[int, int]]  # (byte address, bytes) of every argument array
    shared_words: int

    @classmethod
    def checked(cls, program: Program, grid: tuple[int, int], block: tuple[int, int],
                place: Placed, dynamic_shared: int = 0) -> Launch:
        """A launch of a lowered program with placed arguments (driver.place_arguments),
        checked as every backend checks it (interp.check_launch)."""
        shared = check_launch(program, grid, block, place.params, place.memory, dynamic_shared)
        return cls(program, grid, block, place.params, place.memory, place.allocations,
                   shared // 4)


class Placed(Protocol):
    """Arguments placed in memory (driver.Placement)."""

    params: list[int]
    memory: list[int]
    allocations: list[tuple[int, int]]


def allocated_words(allocations: Iterable[tuple[int, int]]) -> list[int]:
    return sorted({w for addr, n in allocations for w in range(addr // 4, (addr + n) // 4)})


def prompt_tokens(launch: Launch) -> list[str]:
    """ROM parts, parameter words, every allocated global word (its value and that it may be
    accessed: unloaded words fault), the launch shape, then GO."""
    out: list[str] = []
    for (b, s), row in sorted(rom.rows(launch.program).items()):
        for p, part in enumerate(rom.parts(row)):
            out += part_frame(f"rom:{b}:{s}:{p}", part)
    for w, v in enumerate(launch.params):
        out += frame(f"param:{w}:{{}}", v)
    for w in allocated_words(launch.allocations):
        out += frame(f"mem:g{w}:{{}}", launch.memory[w])
    bx, by = launch.block
    gx, gy = launch.grid
    out += [name(f"block:{bx}x{by}"), name(f"grid:{gx}x{gy}"),
            name(f"shared:{launch.shared_words}"), name("go")]  # fmt: skip
    return out


# --- the generated launch -------------------------------------------------------------------


def _lanes(mask: int) -> list[int]:
    return [ln for ln in range(limits.WARP_LANES) if mask >> ln & 1]


def _mask(lanes: Iterable[int]) -> int:
    return sum(1 << ln for ln in lanes)


def pred_row(preds: Iterable[tuple[int, int, bool]], row: int = 0) -> int:
    """A warp's predicate row (bit 4 * lane + predicate) after these writes."""
    for ln, p, v in preds:
        bit = 1 << (limits.NUM_PREDS * ln + p)
        row = row | bit if v else row & ~bit
    return row


def exec_token(block: int, warp: int, mask: int) -> str:
    return name(f"exec:{block}:w{warp}:m{mask}")


def sends_pred_row(rec: TraceRecord, live: rom.Live) -> bool:
    """Whether a block sends its warp's predicate row: it wrote a live predicate."""
    return any(live.preds >> p & 1 for _, p, _ in rec.preds)


def writeback_tokens(rec: TraceRecord, block: Block, live: rom.Live, row: int) -> list[str]:
    """The write-back frames of one executed block, in the protocol's order: slot by slot, the
    live register the slot wrote last in some lanes (one ``all`` frame when that is every
    active lane with one value and the slot is no atomic — the model computes an atomic's old
    values too late to compare them — else one frame per lane, ascending); the warp's predicate row
    `row` (the row the model holds — as the last row sent left it — with the block's predicate
    writes) if the block wrote a live predicate; then the
    words the block's store or atomic wrote, in lane order (a word several lanes wrote goes once,
    with the last lane's value, at that lane: the model skips a lane whose word a later lane also
    writes, so it never sorts)."""
    out: list[str] = []
    for slot in range(limits.BLOCK_SLOTS):
        writes = {ln: (r, v) for ln, r, v, s in rec.regs if s == slot and live.regs >> r & 1}
        if not writes:
            continue
        r = next(iter(writes.values()))[0]
        values = {v for _, v in writes.values()}
        uniform = set(writes) == set(_lanes(rec.mask)) and len(values) == 1
        if uniform and block.instrs[slot].op not in ATOMIC_OPS:
            out += frame(f"val:r{r}:{LANE_ALL}:{{}}", values.pop())
        else:
            for ln in sorted(writes):
                out += frame(f"val:r{r}:{ln}:{{}}", writes[ln][1])
    if sends_pred_row(rec, live):
        out += frame("prow:{}", row)
    for sp, a, v in rec.mem:
        out += frame(f"mem:{memory_row(sp, a)}:{{}}", v)
    return out


class _Schedule:
    """The scheduler's side of the stream, replayed from the trace: after each block, the tokens
    that park lanes, mark exits and hand over to the next warp, thread block or END.

    A lane's pc lives in the model's state; a block's lanes move on to the terminator's targets.
    The lanes that go where the warp runs next are written by that EXEC; the others are written
    by ``park`` (lanes waiting at another block) and ``exit`` tokens — except where nothing will
    read them again (a lone warp's exit). A warp that waits at a barrier or is done hands over by
    a *sweep*: ``warp:wV`` for V = W+1, W+2, ... (cyclically), each looking at one warp, until a
    warp with live lanes (released from a barrier, if it waits) — that warp's EXEC follows — or,
    back at W, none: the next thread block (``cta``) or ``end``. A lone warp passes a barrier at
    once."""

    def __init__(self, launch: Launch) -> None:
        self.threads = launch.block[0] * launch.block[1]
        self.warps = -(-self.threads // limits.WARP_LANES)
        self.ctas = launch.grid[0] * launch.grid[1]
        self.cta = 0
        self.pcs = self._start()

    def _start(self) -> list[list[int]]:
        return [[0 if w * limits.WARP_LANES + ln < self.threads else EXITED
                 for ln in range(limits.WARP_LANES)] for w in range(self.warps)]

    def next_block(self, warp: int) -> tuple[int, int] | None:
        """(block, lanes) a warp runs next: its lowest pc; None when it is done."""
        pc = min(self.pcs[warp])
        return None if pc == EXITED else (pc, _mask(ln for ln, p in enumerate(self.pcs[warp])
                                                    if p == pc))

    def first(self) -> tuple[int, int, int, int]:
        block, mask = self.next_block(0)  # type: ignore[misc]
        return self.cta, block, 0, mask

    def after(self, rec: TraceRecord, term: Term) -> tuple[list[str], tuple | None]:
        """The tail after a block's write-back and the next EXEC (cta, block, warp, lanes) or
        None (the stream ends with END)."""
        w = rec.warp
        self.pcs[w] = list(rec.pcs)
        lone = self.warps == 1
        nxt = self.next_block(w)
        cont = nxt is not None and not (rec.waiting and not lone)
        if term.kind == TermKind.EXIT:
            groups = [EXITED]
        elif term.kind == TermKind.BRA:
            groups = [term.target, term.other]
        else:
            groups = [term.target]
        out: list[str] = []
        for pc in groups:
            lanes = _mask(ln for ln in _lanes(rec.mask) if rec.pcs[ln] == pc)
            if not lanes or cont and nxt is not None and pc == nxt[0]:
                continue
            if pc == EXITED:
                if cont or not lone:
                    out.append(name(f"exit:w{w}:m{lanes}"))
            else:
                out.append(name(f"park:{pc}:w{w}:m{lanes}"))
        if cont:
            assert nxt is not None
            return out, (self.cta, nxt[0], w, nxt[1])
        v = w
        while not lone:
            v = (v + 1) % self.warps
            out.append(name(f"warp:w{v}"))
            if (found := self.next_block(v)) is not None:
                return out, (self.cta, found[0], v, found[1])
            if v == w:
                break
        if self.cta + 1 == self.ctas:
            return out, None
        self.cta += 1
        self.pcs = self._start()
        out.append(name(f"cta:{self.cta}"))
        return out, self.first()


def _stream(launch: Launch, trace: list[TraceRecord]) -> tuple[list[str], tuple | None]:
    """Every token of the completed blocks (each EXEC with its write-back and tail) and the EXEC
    that comes next (None: the launch is over)."""
    program = launch.program
    live = rom.live_out(program)
    sched = _Schedule(launch)
    nxt: tuple | None = sched.first()
    out: list[str] = []
    rows = [0] * limits.MAX_WARPS  # the rows last sent: kept across thread blocks
    for rec in trace:
        if nxt != (rec.cta, rec.block, rec.warp, rec.mask):
            raise UsageError(f"the trace runs {(rec.cta, rec.block, rec.warp, rec.mask)} where "
                             f"the schedule runs {nxt}")
        out.append(exec_token(rec.block, rec.warp, rec.mask))
        row = pred_row(rec.preds, rows[rec.warp])
        out += writeback_tokens(rec, program.blocks[rec.block], live[rec.block], row)
        if sends_pred_row(rec, live[rec.block]):
            rows[rec.warp] = row
        tail, nxt = sched.after(rec, program.blocks[rec.block].term)
        out += tail
    return out, nxt


def expected_tokens(launch: Launch, trace: list[TraceRecord]) -> list[str]:
    """The tokens the model must generate for a launch the reference interpreter completed."""
    out, nxt = _stream(launch, trace)
    if nxt is not None:
        raise UsageError(f"the trace ends before the launch does (next: {nxt})")
    return out + [name("end")]


def fault_tokens(launch: Launch, error: LaunchError) -> list[str]:
    """The tokens the model must generate for a launch that stopped on a fault it reports:
    the blocks before it, the faulting block's EXEC, then ``fault:KIND`` (no write-back)."""
    if error.fault not in FAULTS or error.block is None:
        raise UsageError(f"not a fault the model reports: {error.message}")
    out, nxt = _stream(launch, error.trace)
    if nxt != error.block:
        raise UsageError(f"the fault is at {error.block}, the schedule runs {nxt}")
    _, block, warp, mask = error.block
    return out + [exec_token(block, warp, mask), name(f"fault:{error.fault}")]


# --- decoding -------------------------------------------------------------------------------


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
