"""Data races between the warps of a thread block, and between thread blocks, as both
interpreters report them (docs/ISA.md §9).

This machine runs a thread block's warps one after another between barriers, so a kernel that
leans on a 32-lane warp's lockstep (the "unrolled last warp" of a reduction) gives another
result here, silently. A race is two accesses to one shared or global word, at least one a
write, with no ``bar.sync`` (``__syncthreads()``) between them, made by different warps of one
thread block — or by different thread blocks (which a real GPU runs in no fixed order).
Atomic against atomic is no race; atomic against a plain access is one (the plain access's
value depends on the order), but for a compare-and-swap loop's first guess (CAS below); and a
store that leaves its word as it was races only with atomics (``RaceDetector.access``). Races
are warnings: the launch still completes, deterministically.

Detection is one integer per word and epoch: bit masks of the warps that wrote, read and updated
it atomically since the last barrier; a barrier (or a new thread block) starts a new epoch
instead of clearing the table. Between thread blocks, one more integer per global word holds
the same three masks over blocks for the whole launch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from qgpu.machine import limits

WRITE, READ, ATOMIC, CAS = 0, 1, 2, 3
"""Access classes. A sub-word store's merge into its word is atomic: the machine does it with
a compare-and-swap loop, so two warps storing different bytes of one word do not race. CAS is an
atomic compare-and-swap, which also vouches for the warp's plain reads of its word: a CAS loop's
first guess (``old = *p; do ... while (atomicCAS(p, old, new) != old)``) is checked by the CAS,
so it races with no atomic."""

OPS = ("write", "read", "atomic", "atomic")
RAW, WAR, WAW = "read-after-write", "write-after-read", "write-after-write"

_W = limits.WARP_LANES  # bits per class in a word's warp masks (one per warp)
_B = limits.MAX_GRID_BLOCKS  # bits per class in a word's block masks (one per block)
_EPOCH = 1 << (3 * _W)  # a word's masks live below this; its epoch above
# the classes an access of each class conflicts with: write with all, read with writes and
# atomics, atomic with plain writes and reads
_CLASSES = {WRITE: (WRITE, READ, ATOMIC), READ: (WRITE, ATOMIC), ATOMIC: (WRITE, READ)}
_WARP_CONFLICT = {op: sum(((1 << _W) - 1) << (_W * c) for c in cs) for op, cs in _CLASSES.items()}
_BLOCK_CONFLICT = {op: sum(((1 << _B) - 1) << (_B * c) for c in cs)
                   for op, cs in _CLASSES.items()}
_WARP_SITES, _BLOCK_SITES = 3 * _W, 3 * _B  # site slots per word: one per class and warp/block
_WARP_OWN = sum(1 << (_W * c) for c in range(3))  # one warp's bit in each class
_BLOCK_OWN = sum(1 << (_B * c) for c in range(3))
# a store that leaves its word as it was conflicts with atomics only (see RaceDetector.access)
_WARP_UNCHANGED = ((1 << _W) - 1) << (_W * ATOMIC)
_BLOCK_UNCHANGED = ((1 << _B) - 1) << (_B * ATOMIC)

HINT_WARPS = ("on a 32-lane GPU these threads may share a warp: the kernel relies on "
              "warp-synchronous execution, which this machine's 4-lane warps do not give; "
              "__syncthreads() between the accesses fixes it (__syncwarp() does on a 32-lane "
              "GPU)")
HINT_BLOCKS = ("a real GPU runs thread blocks in no fixed order: use atomics for both accesses, "
               "or a second launch for the work that needs the first's results")


@dataclass(frozen=True)
class Access:
    """One side of a race: what a thread did to the word and where."""

    op: str  # "write", "read" or "atomic"
    block: int  # linear thread-block index (ctaid.x + ctaid.y * nctaid.x + ...)
    thread: int  # linear thread index in its block (tid.x + tid.y * ntid.x + ...)
    where: str  # the instruction (PTX line, or machine block and slot)

    @property
    def warp(self) -> int:
        return self.thread // limits.WARP_LANES


@dataclass(frozen=True)
class Race:
    """Two unordered accesses to one word, at least one a write, not both atomic: `first`
    happened earlier on this machine, `second` found it."""

    kind: str  # read-after-write, write-after-read or write-after-write
    space: str  # "shared" or "global"
    address: int  # byte address (shared: the offset in the block's window)
    first: Access
    second: Access
    name: str | None = None  # the word as the kernel names it ("sdata[5]", "arg 2[0]")

    @property
    def between_blocks(self) -> bool:
        return self.first.block != self.second.block

    @property
    def word(self) -> int:
        return self.address // limits.WORD_BYTES

    def key(self) -> tuple:
        """What both interpreters must agree on (the instructions are named differently)."""
        return (self.kind, self.space, self.address,
                *((a.op, a.block, a.thread) for a in (self.first, self.second)))

    def message(self) -> str:
        """The warning in words, with what fixes it."""
        what = f"{self.space} word {self.word}" + (f" ({self.name})" if self.name else "")
        past = {"write": "wrote", "read": "read", "atomic": "updated atomically"}
        one, two = self.first, self.second
        if self.between_blocks:
            return (f"data race ({self.kind}) on {what} between thread blocks: block "
                    f"{two.block} thread {two.thread} {past[two.op]} it at {two.where}; block "
                    f"{one.block} thread {one.thread} {past[one.op]} it at {one.where}; "
                    f"{HINT_BLOCKS}")
        return (f"data race ({self.kind}) on {what} in thread block {two.block}: thread "
                f"{two.thread} (warp {two.warp}) {past[two.op]} it at {two.where} after thread "
                f"{one.thread} (warp {one.warp}) {past[one.op]} it at {one.where}, with no "
                f"__syncthreads() between; {HINT_WARPS}")

    def to_json(self) -> dict:
        """The JSON form (``run --json``'s "races")."""
        sides = {side: dict(asdict(getattr(self, side)), warp=getattr(self, side).warp)
                 for side in ("first", "second")}
        return {"kind": self.kind, "space": self.space, "address": self.address,
                "word": self.word, "name": self.name,
                "between": "blocks" if self.between_blocks else "warps", **sides,
                "message": self.message()}


class RaceDetector:
    """Watches one launch's shared and global accesses (the interpreter calls ``access`` once
    per memory instruction of a warp, ``barrier`` at each release and ``start_block``);
    ``races`` lists the first race found per (scope, kind, space, word). `where` names a site,
    the int the interpreter passes with each access; a launch of one thread block (`blocks`)
    has no races between blocks to look for."""

    def __init__(self, where: Callable[[int], str], blocks: int) -> None:
        self._where = where
        self._grid = blocks > 1
        self._base = 0  # the current epoch, times _EPOCH
        self._block = 0
        # per space (True: global), per word: epoch and warp masks; per (word, class, warp):
        # the first such access in the word's epoch, as site << 4 | thread
        self._words = {False: [0] * limits.SHARED_WORDS, True: [0] * limits.GLOBAL_WORDS}
        self._sites = {space: [0] * (len(words) * _WARP_SITES)
                       for space, words in self._words.items()}
        self._blocks = [0] * limits.GLOBAL_WORDS  # per global word: block masks, whole launch
        self._block_sites = [0] * (limits.GLOBAL_WORDS * _BLOCK_SITES)
        self._found: dict[tuple, Race] = {}
        # plain reads that race only with atomics, until the warp (block) compare-and-swaps
        # the word (a CAS loop's first guess: no race) or its epoch (the block) ends
        self._pending: dict[tuple, tuple[tuple, Race]] = {}
        self._pending_blocks: dict[tuple, tuple[tuple, Race]] = {}

    @property
    def races(self) -> list[Race]:
        self._settle(self._pending)
        self._settle(self._pending_blocks)
        return list(self._found.values())

    def start_block(self, block: int) -> None:
        self._settle(self._pending)
        self._settle(self._pending_blocks)
        self._block = block
        self._base += _EPOCH

    def barrier(self) -> None:
        self._settle(self._pending)
        self._base += _EPOCH

    def _settle(self, pending: dict[tuple, tuple[tuple, Race]]) -> None:
        """Reads no CAS vouched for are races after all."""
        for key, race in pending.values():
            self._found.setdefault(key, race)
        pending.clear()

    def access(self, op: int, is_global: bool, pairs: list[tuple[int, int]], site: int,
               unchanged: bool = False) -> None:
        """One warp instruction's accesses of class `op`: (thread, word index) pairs.
        `unchanged` (plain stores only): every lane wrote the value its word already held — the
        flag idiom (each thread that finds something stores flag = 1), whose result no order
        of the plain accesses can change, so it is checked against atomics only; it is still
        recorded, so a later store of another value, or a read, races with it."""
        if not pairs:
            return
        unchanged = unchanged and op == WRITE
        cas = op == CAS
        if cas:
            op = ATOMIC
        words, sites, base = self._words[is_global], self._sites[is_global], self._base
        warp = pairs[0][0] // _W
        own = _W * op + warp
        bit = 1 << own
        conflict = (_WARP_UNCHANGED if unchanged else _WARP_CONFLICT[op]) & ~(_WARP_OWN << warp)
        for t, i in pairs:
            v = words[i]
            if v < base:  # last touched in an earlier epoch
                v = base
            if v & conflict:
                self._found_race(False, is_global, op, t, i, site, v & conflict)
            if not v & bit:
                words[i] = v | bit
                sites[i * _WARP_SITES + own] = site << 4 | t
        if cas:
            self._vouch(words, self._pending, (False, is_global, warp), _W * READ + warp, pairs)
        if not (is_global and self._grid):
            return
        blocks, block_sites = self._blocks, self._block_sites
        own = _B * op + self._block
        bit = 1 << own
        conflict = (_BLOCK_UNCHANGED if unchanged else _BLOCK_CONFLICT[op]) & \
            ~(_BLOCK_OWN << self._block)
        for t, i in pairs:
            u = blocks[i]
            if u & conflict:
                self._found_race(True, True, op, t, i, site, u & conflict)
            if not u & bit:
                blocks[i] = u | bit
                block_sites[i * _BLOCK_SITES + own] = site << 4 | t
        if cas:
            self._vouch(blocks, self._pending_blocks, (True, True, self._block),
                        _B * READ + self._block, pairs)

    @staticmethod
    def _vouch(masks: list[int], pending: dict, who: tuple, read_bit: int,
               pairs: list[tuple[int, int]]) -> None:
        """A CAS by `who` (a warp, or a block) on these words: its plain reads of them were a
        CAS loop's guesses — no longer plain reads, and no race with the atomics before."""
        for _, i in pairs:
            masks[i] &= ~(1 << read_bit)
            pending.pop((*who, i), None)

    def _found_race(self, between_blocks: bool, is_global: bool, op: int, t: int, i: int,
                    site: int, conflict: int) -> None:
        """Record the race of this access with the earlier one in `conflict` (a write before
        an atomic before a read; the lowest warp or block), unless its word has one already."""
        width = _B if between_blocks else _W
        other_op, others = next((c, conflict >> (width * c) & ((1 << width) - 1))
                                for c in (WRITE, ATOMIC, READ)
                                if conflict >> (width * c) & ((1 << width) - 1))
        kind = WAR if other_op == READ else RAW if op == READ else WAW
        space = "global" if is_global else "shared"
        key = (between_blocks, kind, space, i)
        pending = self._pending_blocks if between_blocks else self._pending
        who = (between_blocks, is_global, self._block if between_blocks else t // _W, i)
        if key in self._found or (other_op == ATOMIC and op == READ and who in pending):
            return
        other = (others & -others).bit_length() - 1
        if between_blocks:
            s, block = self._block_sites[i * _BLOCK_SITES + _B * other_op + other], other
        else:
            s = self._sites[is_global][i * _WARP_SITES + _W * other_op + other]
            block = self._block
        race = Race(kind, space, i * limits.WORD_BYTES,
                    Access(OPS[other_op], block, s & 15, self._where(s >> 4)),
                    Access(OPS[op], self._block, t, self._where(site)))
        if other_op == ATOMIC and op == READ:  # a CAS by this warp (block) may vouch for it
            pending[who] = (key, race)
        else:
            self._found[key] = race
