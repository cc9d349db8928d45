"""Reference interpreter of the machine (docs/ISA.md): the semantics every other layer must match.

Deterministic by construction: thread blocks run one after another; inside a block the
lowest-numbered ready warp runs one machine block at a time — the lowest block any of its lanes is
at, with every lane that is there (docs/ISA.md §5); lanes apply stores and atomics in lane
order. It records one trace entry per executed machine block per warp — the unit the model
executes per generated EXEC token.

Registers, predicates, shared memory and local memory are *undefined* when a thread block starts
(the model keeps them in state rows that the next thread block of a grid inherits uncleared, and
CUDA leaves them undefined too): the interpreter tracks what the current thread block has written
and stops the launch at any read of something it has not. ``r0`` always reads 0. Global memory and
parameters are defined by the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

from qgpu.errors import LaunchError, ResourceError, UsageError
from qgpu.machine import float32, limits
from qgpu.machine.isa import (
    ATOMIC_OPS,
    F2I_FTZ,
    F2I_SIGNED,
    FLOAT_OPS,
    FTZ,
    I2F_SIGNED,
    INDEX_UNSIGNED,
    INDEXED,
    SAT,
    Atom,
    Block,
    Cmp,
    Instr,
    Op,
    Program,
    Shfl,
    Space,
    SReg,
    Term,
    TermKind,
    accesses_memory,
    format_instr,
    format_term,
    guard_parts,
    mem_space,
)
from qgpu.machine.races import ATOMIC, CAS, READ, WRITE, Race, RaceDetector

MASK32 = 0xFFFFFFFF


def s32(v: int) -> int:
    """Interpret the low 32 bits of v as a signed integer."""
    v &= MASK32
    return v - (1 << 32) if v & 0x80000000 else v


@dataclass(frozen=True)
class TraceRecord:
    """One executed machine block of one warp: what the model will produce per EXEC step."""

    cta: int  # linear thread-block index
    block: int  # machine block (ROM index)
    warp: int
    mask: int  # active lanes when the block started (bit i = lane i)
    # (lane, register, final value, slot of its last write) written, int32, by slot then lane
    regs: tuple[tuple[int, int, int, int], ...]
    preds: tuple[tuple[int, int, bool], ...]  # (lane, predicate, final value) written
    # (space, byte address, final value) in the order of each word's last writing lane; a local
    # address is lane * LOCAL_WORDS * 4 + address
    mem: tuple[tuple[str, int, int], ...]
    pcs: tuple[int, ...]  # per lane, the block it runs next after this one (EXITED: none)
    waiting: bool  # the block ended at a barrier


@dataclass
class MachineRun:
    """Result of a launch: final global memory (int32 words), the trace and counters, and the
    data races between warps or thread blocks it ran into (warnings: qgpu.machine.races)."""

    memory: list[int]
    trace: list[TraceRecord]
    stats: dict[str, int] = field(default_factory=dict)
    races: list[Race] = field(default_factory=list)


EXITED = limits.ROM_BLOCKS
"""The pc of a lane whose thread has exited (or that holds no thread)."""


@dataclass
class _Warp:
    index: int
    pcs: list[int]  # per lane, the block it runs next (EXITED: none)
    regs: list[list[int]]
    preds: list[list[bool]]
    local: list[list[int]]
    # per lane, bit i set once register / predicate / local word i was written in this thread
    # block (r0 is always defined)
    reg_def: list[int] = field(default_factory=lambda: [1] * limits.WARP_LANES)
    pred_def: list[int] = field(default_factory=lambda: [0] * limits.WARP_LANES)
    local_def: list[int] = field(default_factory=lambda: [0] * limits.WARP_LANES)
    waiting: bool = False
    pc: int = 0  # the block being run

    @property
    def live(self) -> int:
        """Lanes holding a thread that has not exited."""
        return sum(1 << ln for ln, pc in enumerate(self.pcs) if pc != EXITED)

    @property
    def done(self) -> bool:
        return not self.live

    def next_block(self) -> tuple[int, int]:
        """The block the warp runs next — the lowest any lane is at — and the lanes there."""
        pc = min(self.pcs)
        return pc, sum(1 << ln for ln, p in enumerate(self.pcs) if p == pc)


def check_launch_shape(grid: tuple[int, int], block: tuple[int, int]) -> None:
    """Reject launch shapes the machine cannot hold (shared by every backend)."""
    for name, dims in (("grid", grid), ("block", block)):
        if len(dims) != 2 or any(not isinstance(v, int) or v < 1 for v in dims):
            raise UsageError(f"{name} must be one or two positive integers, got {dims}")
    if block[0] * block[1] > limits.MAX_THREADS:
        raise ResourceError(
            f"block {block[0]}x{block[1]} has {block[0] * block[1]} threads; the machine holds at "
            f"most {limits.MAX_THREADS} per block ({limits.MAX_WARPS} warps of {limits.WARP_LANES})"
        )
    if grid[0] * grid[1] > limits.MAX_GRID_BLOCKS:
        raise ResourceError(
            f"grid {grid[0]}x{grid[1]} has {grid[0] * grid[1]} blocks; at most "
            f"{limits.MAX_GRID_BLOCKS} thread blocks per launch"
        )


def check_launch(prog: Program, grid: tuple[int, int], block: tuple[int, int],
                 params: list[int], memory: list[int], dynamic_shared: int) -> int:
    """Raise a clear error for a launch the machine cannot run (shape, parameters, memory,
    shared memory); return the shared bytes per block. Every backend of the machine checks
    this first."""
    check_launch_shape(grid, block)
    if len(params) != prog.num_params:
        raise UsageError(f"{prog.name} takes {prog.num_params} parameters, got {len(params)}")
    if len(memory) != limits.GLOBAL_WORDS:
        raise UsageError(f"memory must hold {limits.GLOBAL_WORDS} words")
    if dynamic_shared < 0 or dynamic_shared % 4:
        raise UsageError(
            f"dynamic shared size must be a multiple of 4 bytes, got {dynamic_shared}")
    shared = prog.shared_bytes(dynamic_shared)
    if shared > limits.SHARED_WORDS * limits.WORD_BYTES:
        raise ResourceError(
            f"{prog.name} needs {shared} bytes of shared memory per block; the "
            f"machine has {limits.SHARED_WORDS * limits.WORD_BYTES}"
        )
    return shared


class _Launch:
    """State of one launch; methods execute machine blocks."""

    def __init__(
        self,
        prog: Program,
        grid: tuple[int, int],
        block: tuple[int, int],
        params: list[int],
        memory: list[int],
        dynamic_shared: int,
        allocations: list[tuple[int, int]] | None,
        step_limit: int,
        record: bool,
    ) -> None:
        self.shared_bytes = check_launch(prog, grid, block, params, memory, dynamic_shared)
        self.prog = prog
        self.grid, self.block = grid, block
        self.params = [p & MASK32 for p in params]
        self.mem = [w & MASK32 for w in memory]
        self.allocations = allocations
        self.step_limit = step_limit
        self.record = record
        self.trace: list[TraceRecord] = []
        self.stats = {"blocks_executed": 0, "warp_instructions": 0, "thread_instructions": 0}
        self.cta = 0
        self.shared: list[int] = []
        self.shared_def = 0  # bit i: shared word i was written in the current thread block
        self.races = RaceDetector(self._site, grid[0] * grid[1])
        # per site (block * BLOCK_SLOTS + slot): the race class of its memory access
        self.race_ops = [_race_op(blk.instrs[s]) if s < len(blk.instrs) else READ
                         for blk in prog.blocks for s in range(limits.BLOCK_SLOTS)]

    # --- helpers -------------------------------------------------------------------------
    def _where(self, w: _Warp, lane: int, ins: Instr | Term | None = None) -> str:
        t = w.index * limits.WARP_LANES + lane
        tid = (t % self.block[0], t // self.block[0])
        cta = (self.cta % self.grid[0], self.cta // self.grid[0])
        what = ""
        if ins is not None:
            what = f" in `{format_term(ins) if isinstance(ins, Term) else format_instr(ins)}`"
        return (f"{self.prog.name}, block B{w.pc}{what}, blockIdx=({cta[0]},{cta[1]}), "
                f"threadIdx=({tid[0]},{tid[1]})")

    def _site(self, site: int) -> str:
        """A memory instruction named for a race warning: block, slot, and its PTX."""
        pc, slot = divmod(site, limits.BLOCK_SLOTS)
        ins = self.prog.blocks[pc].instrs[slot]
        ptx = f" (PTX `{ins.comment}`)" if ins.comment else ""
        return f"B{pc} slot {slot} `{format_instr(replace(ins, comment=''))}`{ptx}"

    def _undefined(self, what: str, w: _Warp, lane: int, ins: Instr | Term,
                   computed: bool = True) -> LaunchError:
        """``computed``: ``what`` may hold a value computed from an undefined one."""
        how = " (or of a value computed from such a read)" if computed else ""
        return LaunchError(f"read of {what} before any write in this thread block{how} at "
                           f"{self._where(w, lane, ins)}")

    def _need_regs(self, w: _Warp, lanes: list[int], need: int, ins: Instr) -> None:
        """Stop at the first lane (then operand) reading a register not yet written."""
        for ln in lanes:
            missing = need & ~w.reg_def[ln]
            if missing:
                r = next(r for r in ins.reads() if missing >> r & 1)
                raise self._undefined(f"r{r}", w, ln, ins)

    def _need_pred(self, w: _Warp, lanes: list[int], p: int, ins: Instr | Term) -> None:
        for ln in lanes:
            if not w.pred_def[ln] >> p & 1:
                raise self._undefined(f"p{p}", w, ln, ins)

    def _global_word(self, addr: int, w: _Warp, lane: int, ins: Instr) -> int:
        if addr % 4:
            raise LaunchError(f"misaligned global address {addr} at {self._where(w, lane, ins)}",
                              "misaligned")
        word = addr // 4
        if 0 <= word < limits.GLOBAL_FIRST_WORD:
            raise LaunchError(
                f"null pointer access (address {addr}) at {self._where(w, lane, ins)}", "null")
        if not 0 <= word < limits.GLOBAL_WORDS:
            raise LaunchError(
                f"global address {addr} is outside memory ({limits.GLOBAL_WORDS * 4} bytes) at "
                f"{self._where(w, lane, ins)}", "global_bounds"
            )
        if self.allocations is not None and not any(
            lo <= addr < lo + n for lo, n in self.allocations
        ):
            raise LaunchError(
                f"global address {addr} is out of bounds of every argument array at "
                f"{self._where(w, lane, ins)}", "global_bounds"
            )
        return word

    def _window(self, space: str, addr: int, size: int, w: _Warp, lane: int, ins: Instr) -> int:
        if addr % 4 or not 0 <= addr < size:
            raise LaunchError(
                f"{space} address {addr} is {'misaligned' if addr % 4 else 'out of bounds'} "
                f"({space} size {size} bytes) at {self._where(w, lane, ins)}",
                "misaligned" if addr % 4 else f"{space}_bounds"
            )
        return addr // 4

    def _sreg(self, which: int, w: _Warp, lane: int) -> int:
        t = w.index * limits.WARP_LANES + lane
        bx, by = self.block
        gx, gy = self.grid
        return (
            t % bx, t // bx, bx, by, self.cta % gx, self.cta // gx, gx, gy,
        )[SReg(which)]

    # --- execution -----------------------------------------------------------------------
    def run(self) -> MachineRun:
        nthreads = self.block[0] * self.block[1]
        ncta = self.grid[0] * self.grid[1]
        for cta in range(ncta):
            self.cta = cta
            # contents are undefined at the start of a thread block: reads before writes fail
            self.shared = [0] * (self.shared_bytes // 4)
            self.shared_def = 0
            self.races.start_block(cta)
            warps = []
            for wi in range((nthreads + limits.WARP_LANES - 1) // limits.WARP_LANES):
                lanes = min(limits.WARP_LANES, nthreads - wi * limits.WARP_LANES)
                warps.append(_Warp(
                    wi, [0 if ln < lanes else EXITED for ln in range(limits.WARP_LANES)],
                    [[0] * limits.NUM_REGS for _ in range(limits.WARP_LANES)],
                    [[False] * limits.NUM_PREDS for _ in range(limits.WARP_LANES)],
                    [[0] * limits.LOCAL_WORDS for _ in range(limits.WARP_LANES)],
                ))
            while True:
                ready = [w for w in warps if not w.done and not w.waiting]
                if not ready:
                    waiting = [w for w in warps if not w.done]
                    if not waiting:
                        break
                    for w in waiting:
                        w.waiting = False
                    self.races.barrier()
                    continue
                self._step(ready[0])
        self.stats["thread_blocks"] = ncta
        return MachineRun([s32(v) for v in self.mem], self.trace, self.stats, self.races.races)

    def _step(self, w: _Warp) -> None:
        self.stats["blocks_executed"] += 1
        if self.stats["blocks_executed"] > self.step_limit:
            raise LaunchError(
                f"launch did not finish within {self.step_limit} block executions (a loop that "
                f"never ends? a longer launch needs --step-limit N, step_limit=N in the API); "
                f"last at {self._where(w, 0)}"
            )
        pc, mask = w.next_block()
        w.pc = pc
        blk: Block = self.prog.blocks[pc]
        regs_written: dict[tuple[int, int], tuple[int, int]] = {}
        preds_written: dict[tuple[int, int], bool] = {}
        mem_written: dict[tuple[str, int], int] = {}
        try:
            for slot, ins in enumerate(blk.instrs):
                self._exec(w, mask, ins, slot, regs_written, preds_written, mem_written)
            self._terminate(w, blk, mask)
        except LaunchError as e:
            e.block, e.trace = (self.cta, pc, w.index, mask), list(self.trace)
            raise
        if self.record:
            self.trace.append(TraceRecord(
                self.cta, pc, w.index, mask,
                tuple(sorted(((ln, r, s32(v), slot) for (ln, r), (slot, v) in regs_written.items()),
                             key=lambda e: (e[3], e[0]))),
                tuple((ln, p, v) for (ln, p), v in preds_written.items()),
                tuple((sp, a, s32(v)) for (sp, a), v in mem_written.items()),
                tuple(w.pcs), w.waiting,
            ))

    def _exec(
        self,
        w: _Warp,
        mask: int,
        ins: Instr,
        slot: int,
        regs_w: dict[tuple[int, int], tuple[int, int]],
        preds_w: dict[tuple[int, int], bool],
        mem_w: dict[tuple[str, int], int],
    ) -> None:
        g = guard_parts(ins.guard)
        lanes = [ln for ln in range(limits.WARP_LANES) if mask >> ln & 1]
        if g is not None:
            self._need_pred(w, lanes, g[0], ins)
            lanes = [ln for ln in lanes if w.preds[ln][g[0]] != g[1]]
        self.stats["warp_instructions"] += 1
        self.stats["thread_instructions"] += len(lanes)
        if not lanes:
            return
        op, R = ins.op, w.regs
        # Operands are read by every executing lane before any lane writes. What reaches
        # memory, an address, another lane, a guard or a branch must be defined; an undefined
        # value flows through arithmetic, comparisons, selects and spill slots into undefined
        # results (docs/ISA.md §1).
        reads = _own_reads(ins)
        if accesses_memory(ins):
            local = mem_space(ins) == Space.LOCAL
            self._need_regs(w, lanes, _address_reads(ins) if local else reads, ins)
            self._memory(w, lanes, ins, slot, regs_w, mem_w)
            return
        if op == Op.SHFL:
            self._need_regs(w, lanes, reads, ins)
            results = self._shuffle(w, lanes, ins, mask)
        elif op in (Op.SETP, Op.FSETP):
            for ln, v in [(ln, compare(ins, R[ln][ins.a], _operand_b(ins, R[ln])))
                          for ln in lanes]:
                w.preds[ln][ins.d] = v
                if ins.undefined or reads & ~w.reg_def[ln]:
                    w.pred_def[ln] &= ~(1 << ins.d)
                else:
                    w.pred_def[ln] |= 1 << ins.d
                preds_w[(ln, ins.d)] = v
            return
        elif op == Op.PLOP:
            both = 1 << ins.a | 1 << ins.b
            for ln, v in [(ln, _plop(ins, w.preds[ln])) for ln in lanes]:
                w.preds[ln][ins.d] = v
                if both & ~w.pred_def[ln]:
                    w.pred_def[ln] &= ~(1 << ins.d)
                else:
                    w.pred_def[ln] |= 1 << ins.d
                preds_w[(ln, ins.d)] = v
            return
        elif op == Op.S2R:
            results = [self._sreg(ins.mod, w, ln) for ln in lanes]
        elif op == Op.LD:  # param space
            self._need_regs(w, lanes, reads, ins)
            results = []
            for ln in lanes:
                addr = (R[ln][ins.a] + ins.imm) & MASK32
                idx = self._window("param", addr, len(self.params) * 4, w, ln, ins)
                results.append(self.params[idx])
        elif op == Op.SEL:
            results = [
                R[ln][ins.a] if w.preds[ln][ins.c] != bool(ins.mod & 1) else _operand_b(ins, R[ln])
                for ln in lanes
            ]
        else:
            results = [alu(op, R[ln][ins.a], _operand_b(ins, R[ln]), R[ln][ins.c], ins.mod)
                       for ln in lanes]
        if ins.d:
            bit = 1 << ins.d
            for ln, v in zip(lanes, results, strict=False):
                R[ln][ins.d] = v & MASK32
                if op == Op.SEL:  # the selector and the operand it selects are read
                    taken = w.preds[ln][ins.c] != bool(ins.mod & 1)
                    used = 1 << ins.a if taken else 0 if ins.bi else 1 << ins.b
                    if not w.pred_def[ln] >> ins.c & 1:
                        used = ~0
                else:
                    used = reads
                if ins.undefined or used & ~w.reg_def[ln]:
                    w.reg_def[ln] &= ~bit
                else:
                    w.reg_def[ln] |= bit
                regs_w.pop((ln, ins.d), None)
                regs_w[(ln, ins.d)] = (slot, v & MASK32)

    def _shuffle(self, w: _Warp, lanes: list[int], ins: Instr, mask: int) -> list[int]:
        out = []
        for ln in lanes:
            lane = w.index * limits.WARP_LANES + ln
            j = shuffle_lane(ins.mod, _operand_b(ins, w.regs[ln]) & 31, ins.c, lane)
            src = j - w.index * limits.WARP_LANES
            if not 0 <= src < limits.WARP_LANES:
                raise LaunchError(
                    f"shuffle source lane {j} is outside this thread's 4-lane warp at "
                    f"{self._where(w, ln, ins)}", "shuffle_lane"
                )
            if src not in lanes:
                raise LaunchError(
                    f"shuffle source lane {j} is inactive at {self._where(w, ln, ins)}",
                    "shuffle_lane"
                )
            if not w.reg_def[src] >> ins.a & 1:
                raise self._undefined(f"r{ins.a} of source lane {j}", w, ln, ins)
            out.append(w.regs[src][ins.a])
        return out

    def _memory(
        self,
        w: _Warp,
        lanes: list[int],
        ins: Instr,
        slot: int,
        regs_w: dict[tuple[int, int], tuple[int, int]],
        mem_w: dict[tuple[str, int], int],
    ) -> None:
        op, R = ins.op, w.regs
        space = mem_space(ins)
        if op in (Op.LD, Op.ST) and ins.mod & INDEXED:
            index = (lambda v: v) if ins.mod & INDEX_UNSIGNED else s32
            addrs = [R[ln][ins.a] + 4 * index(R[ln][ins.b]) + ins.imm for ln in lanes]
        else:
            addrs = [(R[ln][ins.a] + ins.imm) & MASK32 for ln in lanes]
        if space == Space.GLOBAL:
            store, name = self.mem, "global"
            idx = [self._global_word(a, w, ln, ins) for a, ln in zip(addrs, lanes, strict=False)]
        elif space == Space.SHARED:
            store, name = self.shared, "shared"
            idx = [self._window("shared", a, self.shared_bytes, w, ln, ins)
                   for a, ln in zip(addrs, lanes, strict=False)]
        else:
            store, name = None, "local"
            idx = [self._window("local", a, limits.LOCAL_WORDS * 4, w, ln, ins)
                   for a, ln in zip(addrs, lanes, strict=False)]
        value = ins.c if ins.mod & INDEXED else ins.b  # a store's value register
        if store is not None:
            site = w.pc * limits.BLOCK_SLOTS + slot
            race_op = self.race_ops[site]
            base = w.index * limits.WARP_LANES
            self.races.access(race_op, store is self.mem,
                              [(base + ln, i) for ln, i in zip(lanes, idx, strict=False)], site,
                              race_op == WRITE and all(store[i] == R[ln][value]
                                                       for ln, i in zip(lanes, idx, strict=False)))

        def cell_get(ln: int, i: int) -> int:
            if store is None:  # a spill slot: an undefined word reloads as an undefined value
                return w.local[ln][i]
            if name == "shared" and not self.shared_def >> i & 1:
                raise self._undefined(f"shared memory word {i} (address {4 * i})", w, ln, ins,
                                     computed=False)
            return store[i]

        def cell_set(ln: int, i: int, v: int) -> None:
            if store is None:
                w.local[ln][i] = v
                if w.reg_def[ln] >> value & 1:
                    w.local_def[ln] |= 1 << i
                else:
                    w.local_def[ln] &= ~(1 << i)
                key = (name, ln * limits.LOCAL_WORDS * 4 + i * 4)
            else:
                store[i] = v
                if name == "shared":
                    self.shared_def |= 1 << i
                key = (name, i * 4)
            mem_w.pop(key, None)  # records stay in the order of each word's last writing lane
            mem_w[key] = v

        if op == Op.LD:
            results = [cell_get(ln, i) for ln, i in zip(lanes, idx, strict=False)]
        elif op == Op.ST:
            values = [R[ln][ins.c if ins.mod & INDEXED else ins.b] for ln in lanes]
            for ln, i, v in zip(lanes, idx, values, strict=False):
                cell_set(ln, i, v)
            return
        else:
            results = []
            for ln, i in zip(lanes, idx, strict=False):
                old = cell_get(ln, i)
                cell_set(ln, i, atomic(ins.mod, old, R[ln][ins.b], R[ln][ins.c]))
                results.append(old)
        if ins.d:
            for ln, v, i in zip(lanes, results, idx, strict=False):
                R[ln][ins.d] = v
                if store is None and not w.local_def[ln] >> i & 1:
                    w.reg_def[ln] &= ~(1 << ins.d)
                else:
                    w.reg_def[ln] |= 1 << ins.d
                regs_w[(ln, ins.d)] = (slot, v)

    def _terminate(self, w: _Warp, blk: Block, mask: int) -> None:
        """Move the block's lanes on: each lane's pc becomes the block it runs next."""
        t = blk.term
        lanes = [ln for ln in range(limits.WARP_LANES) if mask >> ln & 1]
        if t.kind == TermKind.BAR:
            if mask != w.live:
                raise LaunchError(
                    f"__syncthreads() reached by a divergent warp (active lanes {mask:04b} of "
                    f"{w.live:04b}) at {self._where(w, 0)}", "divergent_barrier"
                )
            w.waiting = True
        if t.kind == TermKind.BRA:
            self._need_pred(w, lanes, t.pred, t)
        for ln in lanes:
            if t.kind == TermKind.EXIT:
                w.pcs[ln] = EXITED
            elif t.kind == TermKind.BRA and w.preds[ln][t.pred] == t.negated:
                w.pcs[ln] = t.other
            else:
                w.pcs[ln] = t.target


def shuffle_lane(mode: int, bval: int, shape: int, lane: int) -> int:
    """The thread (4 * warp + lane) whose register a SHFL hands to thread `lane`: `bval` is
    B & 31, `shape` the packed c operand (docs/ISA.md, "Shuffles"); an invalid source gives the
    thread's own value."""
    segmask = 0x1C | (shape >> 2 & 3)
    max_lane = (lane & segmask) | (shape & 3 & ~segmask & 31)
    min_lane = lane & segmask
    if mode == Shfl.UP:
        j = lane - bval
        ok = j >= max_lane
    elif mode == Shfl.DOWN:
        j = lane + bval
        ok = j <= max_lane
    elif mode == Shfl.BFLY:
        j = lane ^ bval
        ok = j <= max_lane
    else:
        j = min_lane | (bval & ~segmask & 31)
        ok = j <= max_lane
    return j if ok else lane


def _race_op(ins: Instr) -> int:
    """The race class of a memory instruction. The load and the compare-and-swap that merge a
    sub-word store into its word (their comment, the PTX they came from, is a store) are one
    atomic update, as the PTX interpreter sees one merged store."""
    if ins.op == Op.ST:
        return WRITE
    words = ins.comment.split()
    ptx_op = words[1] if words and words[0].startswith("@") and len(words) > 1 else \
        (words[0] if words else "")
    if ptx_op.split(".")[0] == "st":
        return ATOMIC
    if ins.op in ATOMIC_OPS:
        return CAS if ins.mod == Atom.CAS else ATOMIC
    return READ


def _address_reads(ins: Instr) -> int:
    """Bit mask of the registers a memory access's address is made of."""
    return 1 << ins.a | (1 << ins.b if ins.mod & INDEXED and ins.op in (Op.LD, Op.ST) else 0)


@lru_cache(maxsize=4096)
def _own_reads(ins: Instr) -> int:
    """Bit mask of the registers an executing lane reads itself (a SHFL reads register a of its
    source lane instead, checked there)."""
    if ins.op == Op.SHFL:
        return 0 if ins.bi else 1 << ins.b
    return sum({1 << r for r in ins.reads()})


def _operand_b(ins: Instr, regs: list[int]) -> int:
    return ins.imm & MASK32 if ins.bi else regs[ins.b]


def alu(op: Op, a: int, b: int, c: int = 0, mod: int = 0) -> int:
    """Exact 32-bit semantics of the arithmetic/logic ops (inputs and output unsigned 32-bit);
    float ops compute through qgpu/machine/float32.py."""
    if op in FLOAT_OPS:
        return _float(op, a, b, c, mod)
    if op == Op.ADD:
        return (a + b) & MASK32
    if op == Op.SUB:
        return (a - b) & MASK32
    if op == Op.MUL:
        return (a * b) & MASK32
    if op == Op.MULHI:
        return ((s32(a) * s32(b)) >> 32) & MASK32
    if op == Op.MULHIU:
        return (a * b) >> 32
    if op == Op.MAD:
        return (a * b + c) & MASK32
    if op == Op.MIN:
        return min(s32(a), s32(b)) & MASK32
    if op == Op.MAX:
        return max(s32(a), s32(b)) & MASK32
    if op == Op.MINU:
        return min(a, b)
    if op == Op.MAXU:
        return max(a, b)
    if op == Op.AND:
        return a & b
    if op == Op.OR:
        return a | b
    if op == Op.XOR:
        return a ^ b
    if op == Op.SHL:
        return (a << b) & MASK32 if b < 32 else 0
    if op == Op.SHR:
        return a >> b if b < 32 else 0
    if op == Op.SRA:
        return (s32(a) >> min(b, 31)) & MASK32
    if op == Op.NEG:
        return -a & MASK32
    if op == Op.ABS:
        return abs(s32(a)) & MASK32
    if op == Op.NOT:
        return ~a & MASK32
    if op == Op.POPC:
        return a.bit_count()
    if op == Op.CLZ:
        return 32 - a.bit_length()
    if op == Op.BREV:
        return int(f"{a:032b}"[::-1], 2)
    raise ValueError(f"{op.name} is not an ALU op")


def _float(op: Op, a: int, b: int, c: int, mod: int) -> int:
    rnd, ftz, sat = float32.Round(mod & 3), bool(mod & FTZ), bool(mod & SAT)
    if op == Op.FADD:
        return float32.add(a, b, rnd, ftz, sat)
    if op == Op.FSUB:
        return float32.sub(a, b, rnd, ftz, sat)
    if op == Op.FMUL:
        return float32.mul(a, b, rnd, ftz, sat)
    if op == Op.FFMA:
        return float32.fma(a, b, c, rnd, ftz, sat)
    if op == Op.FMIN:
        return float32.minimum(a, b, ftz)
    if op == Op.FMAX:
        return float32.maximum(a, b, ftz)
    if op == Op.I2F:
        return float32.from_int(a, bool(mod & I2F_SIGNED), rnd)
    if op == Op.F2I:
        return float32.to_int(a, bool(mod & F2I_SIGNED), rnd, bool(mod & F2I_FTZ))
    if op == Op.FRND:
        return float32.round_integral(a, rnd, ftz)
    raise ValueError(f"{op.name} is not a float ALU op")


def compare(ins: Instr, a: int, b: int) -> bool:
    """What SETP or FSETP writes for operands a and b."""
    if ins.op == Op.FSETP:
        return float32.compare(a, b, float32.FCmp(ins.mod), bool(ins.c))
    c = Cmp(ins.mod)
    if c in (Cmp.EQ, Cmp.NE):
        return (a == b) == (c == Cmp.EQ)
    if c in (Cmp.LT, Cmp.LE, Cmp.GT, Cmp.GE):
        a, b = s32(a), s32(b)
    return {
        Cmp.LT: a < b, Cmp.LE: a <= b, Cmp.GT: a > b, Cmp.GE: a >= b,
        Cmp.LO: a < b, Cmp.LS: a <= b, Cmp.HI: a > b, Cmp.HS: a >= b,
    }[c]


def _plop(ins: Instr, preds: list[bool]) -> bool:
    a = preds[ins.a] != bool(ins.mod & 4)
    b = preds[ins.b] != bool(ins.mod & 8)
    op = ins.mod & 3
    return (a and b) if op == 0 else (a or b) if op == 1 else (a != b)


def atomic(kind: int, old: int, b: int, c: int) -> int:
    """New memory value of an atomic (all values unsigned 32-bit)."""
    k = Atom(kind)
    if k == Atom.ADD:
        return (old + b) & MASK32
    if k == Atom.MIN:
        return min(s32(old), s32(b)) & MASK32
    if k == Atom.MAX:
        return max(s32(old), s32(b)) & MASK32
    if k == Atom.MINU:
        return min(old, b)
    if k == Atom.MAXU:
        return max(old, b)
    if k == Atom.EXCH:
        return b
    if k == Atom.CAS:
        return c if old == b else old
    if k == Atom.AND:
        return old & b
    if k == Atom.OR:
        return old | b
    if k == Atom.XOR:
        return old ^ b
    if k == Atom.INC:
        return 0 if old >= b else old + 1
    return b if old == 0 or old > b else old - 1


def run_program(
    prog: Program,
    *,
    grid: tuple[int, int],
    block: tuple[int, int],
    params: list[int],
    memory: list[int],
    dynamic_shared: int = 0,
    allocations: list[tuple[int, int]] | None = None,
    step_limit: int = limits.DEFAULT_STEP_LIMIT,
    record: bool = True,
) -> MachineRun:
    """Run a lowered program on the reference machine and return memory, trace and stats."""
    return _Launch(prog, grid, block, params, memory, dynamic_shared, allocations, step_limit,
                   record).run()
