"""The expected stream: the tokens the model must generate for a launch, derived from the
reference interpreter's trace — the yardstick of ``--check`` and of the token counts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from qgpu.errors import LaunchError, UsageError
from qgpu.machine import limits, rom
from qgpu.machine.interp import EXITED, TraceRecord
from qgpu.machine.isa import ATOMIC_OPS, Block, Term, TermKind
from qgpu.machine.races import Race
from qgpu.protocol.prompt import Launch
from qgpu.protocol.vocabulary import FAULTS, LANE_ALL, frame, memory_row, name


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


@dataclass(frozen=True)
class Reference:
    """What the reference machine makes of a launch: the yardstick of ``--check``.

    ``tokens`` are what the model must generate (ending in END, or in the fault it reports);
    None when the launch fails in a way the model does not state (then ``error`` says how).
    ``memory`` is the final global memory, None unless the launch completed."""

    tokens: list[str] | None
    memory: list[int] | None = None
    error: LaunchError | None = None
    races: list[Race] = field(default_factory=list)


def reference(launch: Launch) -> Reference:
    """Replay the launch on the reference machine and derive the stream the model must give."""
    try:
        run = launch.replay()
    except LaunchError as e:
        if e.fault in FAULTS and e.block is not None:
            return Reference(fault_tokens(launch, e), error=e)
        return Reference(None, error=e)
    return Reference(expected_tokens(launch, run.trace), run.memory, races=run.races)
