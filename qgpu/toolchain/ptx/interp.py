"""PTX-level interpreter: the second oracle for the lowering, independent of it.

It runs parsed PTX on the machine's *model* (4-lane warps, word-addressed global memory), so a
launch here and the same launch on the lowered machine program must agree bit for bit. The
machine-model decisions it implements (docs/ISA.md is the user-facing copy):

* Global memory is ``GLOBAL_WORDS`` 32-bit words; byte address A is word A // 4. Only aligned
  32-bit accesses to words ``GLOBAL_FIRST_WORD .. GLOBAL_WORDS-1`` are valid; word 0 is the null
  word. With ``allocations`` an access must also fall inside one argument array. Pointers are
  plain byte addresses (``cvta.to.global``/``cvta.global`` are the identity).
* Shared memory is one window per thread block whose contents are undefined when the block
  starts (as in CUDA; the model's shared rows keep the previous block's values): reading a word
  the block has not written is a LaunchError. Layout: static
  arrays (module scope first, then kernel scope, in declaration order, each at its .align), then
  every ``extern .shared`` array at one offset aligned to max(4, their .align), then the
  ``dynamic_shared`` bytes. ``mov`` of a shared symbol gives its window offset.
* Threads: linear id t = tid.x + tid.y * ntid.x; warp w holds threads 4w .. 4w+3. Blocks run
  one after another in order ctaid.x + ctaid.y * nctaid.x. Inside a block the lowest-numbered
  ready warp runs until it exits or reaches ``bar.sync 0``; when every warp that has not exited
  waits, all are released. Threads that exited never block a barrier; a barrier reached by only
  part of a warp's live lanes is a LaunchError.
* SIMT: a per-warp reconvergence stack (GPGPU-Sim): a divergent branch runs the *taken* lanes
  first, then the fall-through lanes, and both meet at the branch's immediate post-dominator
  (a jump to a block that starts with ``ret`` counts as a return: see ``qgpu.toolchain.ptx.cfg``).
* One warp instruction: every lane reads its operands before any lane writes; stores and atomics
  apply in lane order 0..3, each atomic seeing the lanes before it.
* Division: unsigned x/0 = 0xFFFFFFFF and x%0 = x; signed division divides magnitudes as
  unsigned numbers and fixes the signs (x/0 = -1 for x >= 0 and 1 for x < 0, x%0 = x,
  INT_MIN/-1 = INT_MIN, INT_MIN%-1 = 0). The same rule at 16 and 64 bits.
* shfl.sync uses the PTX ISA pseudo-code with lane = t % 32; a valid source lane outside the
  thread's 4-lane warp, or one that is inactive or not in ``membermask``, is a LaunchError.
* ``membar``/``fence`` are no-ops: every access is visible to all threads as soon as it is made.
* float32: registers hold binary32 words; every float instruction computes through
  ``qgpu.machine.float32`` (``qgpu.toolchain.ptx.float_ops`` decodes the modifiers: how neg/abs,
  copysign, min/max.NaN and the 64-bit conversions are composed is documented there).
  ``atom/red.add.f32`` rounds to nearest even and flushes subnormals (``.ftz``), as PTX defines.
  The approximate functions (``ex2.approx``, ``div.full``...) have no exact result: each runs
  its fixed machine macro (``qgpu.machine.approx``), the instructions the lowering emits.
* Registers and predicates are undefined when a thread block starts: reading one that the thread
  has not written in this block (as an operand or as a guard) is a LaunchError.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from qgpu.errors import LaunchError, ResourceError, UnsupportedError, UsageError
from qgpu.machine import limits
from qgpu.machine.races import ATOMIC, CAS, READ, WRITE, Race, RaceDetector
from qgpu.toolchain.ptx import float_ops
from qgpu.toolchain.ptx.ast import (
    Addr,
    Imm,
    Instr,
    Kernel,
    Module,
    Operand,
    Pair,
    Reg,
    SpecialReg,
    Sym,
    Vec,
    is_signed,
    type_width,
)
from qgpu.toolchain.ptx.cfg import build_cfg, label_pcs
from qgpu.toolchain.ptx.globals import global_layout
from qgpu.toolchain.ptx.names import demangle, matches
from qgpu.toolchain.ptx.parser import warp_sync_group

_Run = Callable[[list[int]], None]  # executes one instruction for the given thread ids


def _mask(width: int) -> int:
    return (1 << width) - 1


def _sx(value: int, width: int) -> int:
    """Two's-complement value of a ``width``-bit pattern."""
    return value - (1 << width) if value >> (width - 1) & 1 else value


def _align(value: int, align: int) -> int:
    return -(-value // align) * align


def divide(a: int, b: int, width: int, signed: bool) -> tuple[int, int]:
    """(quotient, remainder) bit patterns under the machine's total division rule."""
    m = _mask(width)
    if not signed:
        return (a // b, a % b) if b else (m, a)
    sa, sb = _sx(a, width), _sx(b, width)
    mag_a, mag_b = abs(sa), abs(sb)
    q, r = (mag_a // mag_b, mag_a % mag_b) if mag_b else (m, mag_a)
    if (sa < 0) != (sb < 0):
        q = -q
    if sa < 0:
        r = -r
    return q & m, r & m


@dataclass
class PtxRun:
    """Final global memory (signed int32 words) and execution counters.

    ``stats``: warp_instructions (issued, one per warp), thread_instructions (lanes that executed
    them with a true guard), blocks_run, barriers (releases), divergent_branches. ``races``:
    the data races between warps or thread blocks (warnings: qgpu.machine.races).
    """

    memory: list[int]
    stats: dict[str, int]
    races: list[Race] = field(default_factory=list)


@dataclass(frozen=True)
class SharedLayout:
    """Byte offset of every shared symbol and the size of the per-block window."""

    offsets: dict[str, int]
    static_bytes: int
    dynamic_offset: int
    total_bytes: int


def shared_layout(kernel: Kernel, module: Module, dynamic_shared: int = 0) -> SharedLayout:
    """Place the shared arrays a kernel can see; ResourceError if the window is too large."""
    offsets: dict[str, int] = {}
    offset = 0
    externs = []
    for decl in (*module.module_shared, *kernel.shared):
        if decl.extern:
            externs.append(decl)
            continue
        offset = _align(offset, decl.align)
        offsets[decl.name] = offset
        offset += decl.size_bytes
    dynamic_offset = _align(offset, max([4, *(d.align for d in externs)]))
    offsets.update({d.name: dynamic_offset for d in externs})
    total = dynamic_offset + dynamic_shared
    if total > limits.SHARED_WORDS * limits.WORD_BYTES:
        raise ResourceError(
            f"kernel {kernel.name} needs {total} bytes of shared memory ({offset} static, "
            f"{dynamic_shared} dynamic); the machine has {limits.SHARED_WORDS * 4} per block"
        )
    return SharedLayout(offsets, offset, dynamic_offset, total)


def find_kernel(module: Module, name: str | None) -> Kernel:
    """A kernel by name: its PTX symbol, or for a C++ kernel (no ``extern "C"``) its demangled
    name or any part of it a user would type (``kernel``, ``ns::kernel``, ``reduce<8>``,
    ``reduce``); None if the module has one. A kernel outside the subset raises its error here,
    when it is asked for, so its neighbours still run."""
    entries: list[Kernel | Any] = sorted([*module.kernels, *module.rejected],
                                         key=lambda k: k.line)
    names = ", ".join(demangle(k.name) for k in entries) or "(none)"
    if name is None:
        if len(entries) != 1:
            raise UsageError(f"the module has {len(entries)} kernels, name one of: {names}")
        found = entries
    else:
        found = [k for k in entries if k.name == name] or \
            [k for k in entries if matches(k.name, name)]
        if len(found) > 1:
            raise UsageError(f"kernel name {name!r} is ambiguous: "
                             f"{', '.join(demangle(k.name) for k in found)}")
        if not found:
            raise UsageError(f"no kernel named {name!r}; the module has: {names}")
    if not isinstance(found[0], Kernel):
        raise found[0].error
    return found[0]


def run_kernel(
    kernel: Kernel,
    module: Module,
    *,
    grid: tuple[int, ...],
    block: tuple[int, ...],
    params: list[int],
    memory: list[int],
    dynamic_shared: int = 0,
    allocations: list[tuple[int, int]] | None = None,
    step_limit: int = 2_000_000,
) -> PtxRun:
    """Run one launch of ``kernel`` on a copy of ``memory`` and return the final memory."""
    launch = _Launch(kernel, module, grid, block, params, memory, dynamic_shared, allocations,
                     step_limit)
    return launch.run()


def _dims(name: str, dims: tuple[int, ...], most: int) -> tuple[int, int, int]:
    if len(dims) not in (2, 3) or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise UsageError(f"{name} must be two or three positive integers (x, y[, z]), got "
                         f"{dims!r}")
    x, y, z = (*dims, 1)[:3]
    if x * y * z > most:
        raise ResourceError(f"{name} {'x'.join(map(str, dims))} has {x * y * z} "
                            f"{'threads' if name == 'block' else 'blocks'}; the machine "
                            f"allows at most {most}")
    return x, y, z


def _word(name: str, value: int) -> int:
    if not isinstance(value, int) or not -(1 << 31) <= value < 1 << 32:
        raise UsageError(f"{name} must be a 32-bit integer, got {value!r}")
    return value & 0xFFFFFFFF


class _Warp:
    __slots__ = ("index", "live", "exited", "stack", "waiting", "done")

    def __init__(self, index: int, live: int, n_instructions: int) -> None:
        self.index = index
        self.live = live  # lanes that exist (a partial last warp has fewer)
        self.exited = 0
        self.stack = [[0, n_instructions, live]]  # [pc, reconvergence pc, mask]
        self.waiting = False
        self.done = False


class _Launch:
    """One launch: decoded instructions (closures over the block state) and the scheduler."""

    def __init__(self, kernel: Kernel, module: Module, grid: tuple[int, ...],
                 block: tuple[int, ...], params: list[int], memory: list[int],
                 dynamic_shared: int, allocations: list[tuple[int, int]] | None,
                 step_limit: int) -> None:
        self.kernel = kernel
        self.gx, self.gy, self.gz = _dims("grid", grid, limits.MAX_GRID_BLOCKS)
        self.bx, self.by, self.bz = _dims("block", block, limits.MAX_THREADS)
        if len(kernel.params) > limits.PARAM_WORDS:
            raise ResourceError(f"kernel {kernel.name} has {len(kernel.params)} parameters; the "
                                f"machine takes at most {limits.PARAM_WORDS}")
        if len(params) != len(kernel.params):
            raise UsageError(f"kernel {kernel.name} takes {len(kernel.params)} parameters, "
                             f"{len(params)} were given")
        self.params = {}
        for i, (p, v) in enumerate(zip(kernel.params, params, strict=True)):
            word = _word(f"parameter {i} ({p.name})", v)
            self.params[p.name] = word & _mask(min(type_width(p.type), 32))
        if len(memory) != limits.GLOBAL_WORDS:
            raise UsageError(f"memory must have {limits.GLOBAL_WORDS} words, got {len(memory)}")
        self.mem = [_word(f"memory word {i}", v) for i, v in enumerate(memory)]
        if not isinstance(dynamic_shared, int) or dynamic_shared < 0:
            raise UsageError(f"dynamic_shared must be a byte count >= 0, got {dynamic_shared!r}")
        self.layout = shared_layout(kernel, module, dynamic_shared)
        self.globals = global_layout(kernel, module).addresses
        self.allocations = allocations
        self.step_limit = step_limit
        self.stats = {"warp_instructions": 0, "thread_instructions": 0, "blocks_run": 0,
                      "barriers": 0, "divergent_branches": 0}
        self.ctaid = (0, 0, 0)
        self.nthreads = self.bx * self.by * self.bz
        self.tids = [(t % self.bx, t // self.bx % self.by, t // (self.bx * self.by))
                     for t in range(self.nthreads)]
        # A register absent from a thread's dict is undefined: never written in this thread
        # block, or computed from such a value. Arithmetic, comparisons, selects and moves
        # pass undefined values on (the threads whose operand was undefined in the instruction
        # running are in undefined_now); memory, addresses, shuffles, guards and branches
        # need defined ones (docs/ISA.md §1).
        self.regs: list[dict[str, int]] = []
        self.undefined_now: set[int] = set()
        self.shared: list[int] = []
        self.shared_written: list[bool] = []
        self.cfg = build_cfg(kernel)
        self.labels = label_pcs(kernel)
        self.instrs = kernel.instructions
        self.sites: list[str] = []  # memory instructions as race warnings name them
        self.races = RaceDetector(self.sites.__getitem__, self.gx * self.gy * self.gz)
        self.ops = [self.decode(ins) for ins in self.instrs]

    # -- running ------------------------------------------------------------------------
    def run(self) -> PtxRun:
        for cz in range(self.gz):
            for cy in range(self.gy):
                for cx in range(self.gx):
                    self.run_block(cx, cy, cz)
        return PtxRun([_sx(v, 32) for v in self.mem], dict(self.stats), self.races.races)

    def run_block(self, cx: int, cy: int, cz: int) -> None:
        self.ctaid = (cx, cy, cz)
        self.races.start_block(cx + self.gx * (cy + self.gy * cz))
        self.regs = [{} for _ in range(self.nthreads)]
        self.shared = [0] * -(-self.layout.total_bytes // 4)
        self.shared_written = [False] * len(self.shared)
        if self.kernel.zeroes_shared:  # the lowering's prologue zeroes the static words
            static = -(-self.layout.static_bytes // 4)
            self.shared_written[:static] = [True] * static
        n = len(self.instrs)
        warps = []
        for w in range(-(-self.nthreads // limits.WARP_LANES)):
            lanes = min(limits.WARP_LANES, self.nthreads - w * limits.WARP_LANES)
            warps.append(_Warp(w, _mask(lanes), n))
        while True:
            ready = next((w for w in warps if not w.done and not w.waiting), None)
            if ready is not None:
                self.run_warp(ready)
                continue
            waiting = [w for w in warps if w.waiting]
            if not waiting:
                break
            for w in waiting:
                w.waiting = False
            self.stats["barriers"] += 1
            self.races.barrier()
        self.stats["blocks_run"] += 1

    def run_warp(self, warp: _Warp) -> None:
        """Run ``warp`` until it exits or waits at a barrier."""
        n = len(self.instrs)
        stack = warp.stack
        base = warp.index * limits.WARP_LANES
        stats = self.stats
        while True:
            while stack:
                top = stack[-1]
                live = top[2] & ~warp.exited
                if top[0] == n:  # fell off the end of the body: those lanes are done
                    warp.exited |= live
                elif top[0] != top[1] and live:
                    break
                stack.pop()
            if not stack:
                warp.done = True
                return
            pc = top[0]
            ins = self.instrs[pc]
            stats["warp_instructions"] += 1
            if stats["warp_instructions"] > self.step_limit:
                raise LaunchError(
                    f"launch did not finish within {self.step_limit} warp instructions (an "
                    f"endless loop? a longer launch needs --step-limit N, step_limit=N in the "
                    f"API) — stopped at line {ins.line} `{ins.text}` in block "
                    f"ctaid={_xyz(self.ctaid)}, warp {warp.index}"
                )
            lanes = [base + lane for lane in range(limits.WARP_LANES) if live >> lane & 1]
            if ins.guard is not None:
                name, neg = ins.guard
                unset = next((t for t in lanes if name not in self.regs[t]), None)
                if unset is not None:
                    raise self.undefined(ins, unset, name)
                lanes = [t for t in lanes if bool(self.regs[t][name]) != neg]
            mask = sum(1 << (t - base) for t in lanes)
            stats["thread_instructions"] += len(lanes)
            kind, run = self.ops[pc]
            top[0] = pc + 1
            if kind == "bra":
                target = self.labels[ins.operands[0].name]  # type: ignore[union-attr]
                rest = live & ~mask
                if not rest:
                    top[0] = target
                elif mask:
                    join = self.cfg.reconvergence_pc(pc)
                    top[0] = join
                    stack.append([pc + 1, join, rest])
                    stack.append([target, join, mask])
                    stats["divergent_branches"] += 1
            elif kind == "exit":
                warp.exited |= mask
            elif kind == "bar":
                alive = warp.live & ~warp.exited
                if mask != alive:
                    raise self.fault(ins, lanes[0] if lanes else base,
                                     "divergent barrier: __syncthreads() reached by threads "
                                     f"{lanes} while threads "
                                     f"{[base + i for i in range(4) if (alive & ~mask) >> i & 1]}"
                                     " of the same warp are elsewhere")
                warp.waiting = True
                return
            elif run is not None:
                run(lanes)
                self.undefined_now.clear()

    def fault(self, ins: Instr, t: int, why: str) -> LaunchError:
        return LaunchError(f"line {ins.line}: `{ins.text}`: {why} (block ctaid="
                           f"{_xyz(self.ctaid)}, thread tid={_xyz(self.tids[t])})")

    def undefined(self, ins: Instr, t: int, what: str, computed: bool = True) -> LaunchError:
        """``computed``: ``what`` may hold a value computed from an undefined one."""
        how = " (or of a value computed from such a read)" if computed else ""
        return self.fault(ins, t, f"read of {what} before any write in this thread block{how}")

    # -- operands -----------------------------------------------------------------------
    def reg_width(self, name: str) -> int:
        return type_width(self.kernel.reg_types[name])

    def reader(self, ins: Instr, op: Operand, width: int,
               flows: bool = False) -> Callable[[int], int]:
        """Closure reading ``op`` of ``ins`` for thread t as an unsigned ``width``-bit pattern.
        An undefined register stops the launch, unless ``flows``: then the value is undefined
        and so is what the instruction writes for t (``self.undefined_now``)."""
        m = _mask(width)
        if isinstance(op, Reg):
            name = op.name
            flip = 1 if op.negated else 0

            def read(t: int) -> int:
                try:
                    value = self.regs[t][name]
                except KeyError:
                    if not flows:
                        raise self.undefined(ins, t, name) from None
                    self.undefined_now.add(t)
                    return 0
                return (value ^ flip) & m

            return read
        if isinstance(op, Imm):
            value = op.value & m
            return lambda t: value
        if isinstance(op, Sym):
            value = self.symbol(op.name) & m
            return lambda t: value
        if isinstance(op, SpecialReg):
            return self.special(op, m)
        raise UnsupportedError(f"operand {op} cannot be read as a value")

    def special(self, op: SpecialReg, m: int) -> Callable[[int], int]:
        if op.name == "%laneid":  # the thread's rank % 32 on a real GPU
            return lambda t: t % 32 & m
        i = "xyz".index(op.comp or "")
        if op.name == "%tid":
            return lambda t: self.tids[t][i] & m
        if op.name == "%ctaid":
            return lambda t: self.ctaid[i] & m
        value = {"%ntid": (self.bx, self.by, self.bz),
                 "%nctaid": (self.gx, self.gy, self.gz)}[op.name][i]
        return lambda t: value & m

    def writer(self, op: Operand, ptx_type: str) -> Callable[[int, int], None]:
        """Closure writing a ``ptx_type`` result to register ``op``, extended to its width."""
        assert isinstance(op, Reg)
        name = op.name
        rw = self.reg_width(name)
        tw = type_width(ptx_type)
        tm, rm = _mask(tw), _mask(rw)
        fill = rm & ~tm if is_signed(ptx_type) and rw > tw else 0

        def write(t: int, value: int) -> None:
            if t in self.undefined_now:  # computed from an undefined value: undefined too
                self.regs[t].pop(name, None)
                return
            value &= tm
            if fill and value >> (tw - 1):
                value |= fill
            self.regs[t][name] = value & rm

        return write

    # -- decoding -----------------------------------------------------------------------
    def decode(self, ins: Instr) -> tuple[str, _Run | None]:
        """(kind, run): kind is bra/exit/bar/nop/op; run executes a data instruction."""
        op = ins.opcode
        if op == "bra":
            return "bra", None
        if op in ("ret", "exit"):
            return "exit", None
        if ins.mods == ("warp", "sync"):
            return "op", self.decode_warp_sync(ins)
        if op in ("bar", "barrier"):
            return "bar", None
        if op in ("membar", "fence"):
            return "nop", None
        if op in ("ld", "st", "atom", "red"):
            return "op", self.decode_memory(ins)
        if op == "shfl":
            return "op", self.decode_shfl(ins)
        if op == "setp":
            return "op", self.decode_setp(ins)
        if op == "mov" and any(isinstance(o, Vec) for o in ins.operands):
            return "op", self.decode_pack(ins)
        return "op", self.decode_alu(ins)

    def decode_pack(self, ins: Instr) -> _Run:
        """``mov.b32 d, {a, b}`` (element 0 lowest) and its inverse ``mov.b32 {a, b}, s``."""
        dst, src = ins.operands
        width = type_width(ins.type)
        if isinstance(src, Vec):
            part = width // len(src.items)
            readers = [self.reader(ins, x, part, flows=True)
                       for x in src.items]  # type: ignore[union-attr]
            write = self.writer(dst, ins.type)

            def pack(lanes: list[int]) -> None:
                for t in lanes:
                    write(t, sum(r(t) << (k * part) for k, r in enumerate(readers)))

            return pack
        assert isinstance(dst, Vec)
        part = width // len(dst.items)
        read = self.reader(ins, src, width, flows=True)
        writes = [self.writer(x, f"b{part}") for x in dst.items]

        def split(lanes: list[int]) -> None:
            for t in lanes:
                value = read(t)
                for k, write in enumerate(writes):
                    write(t, value >> (k * part) & _mask(part))

        return split

    def decode_alu(self, ins: Instr) -> _Run:
        ops = ins.operands
        fn, out_type, widths = _semantics(ins.opcode, ins.mods, len(ops) - 1)
        readers = [self.reader(ins, o, width, flows=True)
                   for o, width in zip(ops[1:], widths, strict=True)]
        write = self.writer(ops[0], out_type)
        if ins.opcode in _SELECTS:  # the selector, then only the operand it selects
            ra, rb, rc = readers

            def select(lanes: list[int]) -> None:
                for t in lanes:
                    write(t, ra(t) if fn(rc(t)) else rb(t))

            return select

        def run(lanes: list[int]) -> None:
            for t in lanes:
                write(t, fn(*[r(t) for r in readers]))

        return run

    def decode_setp(self, ins: Instr) -> _Run:
        cmp, ty = ins.mods[0], ins.mods[-1]
        combine = next((_BOOL[m] for m in ins.mods if m in _BOOL), None)
        w = type_width(ty)
        signed = is_signed(ty) and cmp in ("lt", "le", "gt", "ge")
        compare = float_ops.compare(ins.mods) if ty == "f32" else _COMPARE[cmp]
        ra, rb = (self.reader(ins, ins.operands[k], w, flows=True) for k in (1, 2))
        rc = self.reader(ins, ins.operands[3], 1, flows=True) if combine else None
        dst = ins.operands[0]
        write_p = self.writer(dst.first if isinstance(dst, Pair) else dst, "pred")
        write_q = self.writer(dst.second, "pred") if isinstance(dst, Pair) else None

        def run(lanes: list[int]) -> None:
            for t in lanes:
                a, b = ra(t), rb(t)
                if signed:
                    a, b = _sx(a, w), _sx(b, w)
                p = int(compare(a, b))
                q = 1 - p
                if combine is not None and rc is not None:
                    c = rc(t)
                    p, q = combine(p, c), combine(q, c)
                write_p(t, p)
                if write_q is not None:
                    write_q(t, q)

        return run

    def decode_memory(self, ins: Instr) -> _Run:
        op, space, ty, ops = ins.opcode, ins.space, ins.type, ins.operands
        addr = ops[0] if op in ("st", "red") else ops[1]
        assert isinstance(addr, Addr)
        if space == "param":
            assert isinstance(addr.base, Sym)
            value = self.params[addr.base.name] >> 8 * addr.offset & _mask(type_width(ty))
            write = self.writer(ops[0], ty)

            def load_param(lanes: list[int]) -> None:
                for t in lanes:
                    write(t, value)

            return load_param
        where = self.address(ins, addr)
        is_global = space != "shared"  # generic and .const addresses are global ones
        size = type_width(ty) // 8
        data_op = ops[1] if op in ("st", "red") else ops[0]
        items = data_op.items if isinstance(data_op, Vec) else (data_op,)
        span = size * len(items)  # a vector access must be aligned to its whole size

        def locate(t: int, a: int, align: int = size) -> tuple[int, int]:
            """(word index, bit shift) of the element at byte address a."""
            if is_global:
                return self.global_word(ins, t, a, align), a % 4 * 8
            return self.shared_word(ins, t, a, align), a % 4 * 8

        def fetch(t: int, i: int) -> int:
            if is_global:
                return self.mem[i]
            if not self.shared_written[i]:
                raise self.undefined(ins, t, f"shared memory word {i} (address {4 * i})",
                                     computed=False)
            return self.shared[i]

        def put(i: int, value: int) -> None:
            if is_global:
                self.mem[i] = value
            else:
                self.shared[i] = value
                self.shared_written[i] = True

        element = _mask(8 * size)
        site = len(self.sites)
        self.sites.append(f"line {ins.line} `{ins.text}`")
        # a store under a word is merged into it: the machine's compare-and-swap loop
        race_op = READ if op == "ld" else WRITE if op == "st" and span >= 4 else \
            CAS if "cas" in ins.mods else ATOMIC
        access = self.races.access
        if op == "ld":
            writes = [self.writer(x, ty) if x is not None else None for x in items]

            def load(lanes: list[int]) -> None:
                values = []
                touched = []
                for t in lanes:
                    base = where(t)
                    for k, write in enumerate(writes):
                        i, shift = locate(t, base + k * size, span if k == 0 else size)
                        values.append((t, write, fetch(t, i) >> shift & element))
                        touched.append((t, i))
                access(race_op, is_global, touched, site)
                for t, write, v in values:
                    if write is not None:
                        write(t, v)

            return load
        if op == "st":
            readers = [self.reader(ins, x, 32) for x in items]

            def store(lanes: list[int]) -> None:
                touched = []
                unchanged = True  # every word stored holds the value it held
                for t in lanes:
                    base = where(t)
                    for k, value in enumerate(readers):
                        i, shift = locate(t, base + k * size, span if k == 0 else size)
                        touched.append((t, i))
                        if size < 4:  # the machine merges it into the word it reads first
                            old = fetch(t, i) & ~(element << shift)
                            put(i, old | (value(t) & element) << shift)
                        else:
                            v = value(t)
                            unchanged &= (self.mem if is_global else self.shared)[i] == v
                            put(i, v)
                access(race_op, is_global, touched, site, unchanged)

            return store
        name = next(m for m in ins.mods if m in _ATOMIC)
        update = float_ops.atomic_add if ty == "f32" else _ATOMIC[name]
        signed = is_signed(ty)
        data = [self.reader(ins, o, 32) for o in ops[1 if op == "red" else 2 :]]
        write_old = self.writer(ops[0], ty) if op == "atom" else None

        def atomic(lanes: list[int]) -> None:
            touched = []
            for t in lanes:
                i, _ = locate(t, where(t))
                touched.append((t, i))
                old = fetch(t, i)
                put(i, update(old, *[r(t) for r in data], signed=signed) & 0xFFFFFFFF)
                if write_old is not None:
                    write_old(t, old)
            access(race_op, is_global, touched, site)

        return atomic

    def symbol(self, name: str) -> int:
        """Address of a shared variable (its window offset) or of a module variable."""
        if name in self.layout.offsets:
            return self.layout.offsets[name]
        return self.globals[name]

    def address(self, ins: Instr, addr: Addr) -> Callable[[int], int]:
        """Byte address of ``[base+offset]`` for thread t, as a signed number of the base width."""
        offset = addr.offset
        if addr.base is None:
            return lambda t: offset
        if isinstance(addr.base, Sym):
            value = self.symbol(addr.base.name) + offset
            return lambda t: value
        width = self.reg_width(addr.base.name)
        base = self.reader(ins, addr.base, width)
        m = _mask(width)
        return lambda t: _sx((base(t) + offset) & m, width)

    def global_word(self, ins: Instr, t: int, a: int, align: int = 4) -> int:
        """Index of the global word holding byte address a, which must be a multiple of
        ``align`` (the access size); bounds are checked for the whole word."""
        first, end = limits.GLOBAL_FIRST_WORD * 4, limits.GLOBAL_WORDS * 4
        w = a - a % 4
        if 0 <= a < first:
            why = "null pointer dereference"
        elif not 0 <= a < end:
            why = f"address outside global memory (bytes {first}..{end - 1})"
        elif a % align:
            why = f"misaligned {8 * align}-bit access"
        elif self.allocations is not None and not any(
            lo <= w and w + 4 <= lo + size for lo, size in self.allocations
        ):
            why = "out of bounds of every argument array"
        else:
            return a // 4
        raise self.fault(ins, t, f"{why} at global address {a}")

    def shared_word(self, ins: Instr, t: int, a: int, align: int = 4) -> int:
        total = self.layout.total_bytes
        w = a - a % 4
        if not (0 <= w and w + 4 <= total):
            why = f"outside the block's {total} bytes of shared memory"
        elif a % align:
            why = f"misaligned {8 * align}-bit access"
        else:
            return a // 4
        raise self.fault(ins, t, f"{why} at shared address {a}")

    def decode_warp_sync(self, ins: Instr) -> _Run:
        """``bar.warp.sync``: every thread of the tile (the aligned group of 1, 2 or 4 threads
        the mask names, checked by the parser) must be here; on the 4-lane warp that is all the
        synchronising there is."""
        group = warp_sync_group(ins, self.instrs)

        def run(lanes: list[int]) -> None:
            here = set(lanes)
            for t in lanes:
                first = t - t % group
                missing = [u for u in range(first, first + group) if u not in here]
                if missing:
                    raise self.fault(ins, t, f"divergent __syncwarp: threads {missing} of the "
                                     f"same {group}-thread tile are elsewhere or have exited")

        return run

    def decode_shfl(self, ins: Instr) -> _Run:
        mode = ins.mods[1]
        dst = ins.operands[0]
        write_d = self.writer(dst.first if isinstance(dst, Pair) else dst, "b32")
        write_p = self.writer(dst.second, "pred") if isinstance(dst, Pair) else None
        ra, rb, rc, rmask = (self.reader(ins, o, 32) for o in ins.operands[1:])
        group = limits.WARP_LANES

        source = ins.operands[1]

        def value_of(t: int, src: int, j: int) -> int:
            """Operand a of thread src, read for thread t (a is read only where it is used)."""
            if isinstance(source, Reg) and source.name not in self.regs[src]:
                raise self.undefined(ins, t, f"{source.name} of source lane {j}")
            return ra(src)

        def run(lanes: list[int]) -> None:
            active = set(lanes)
            results = []
            for t in lanes:
                lane = t % 32
                b, c, members = rb(t), rc(t), rmask(t)
                if not members >> lane & 1:
                    raise self.fault(ins, t, f"thread (lane {lane}) is not in membermask "
                                     f"{members:#x}")
                bval, cval, seg = b & 31, c & 31, (c >> 8) & 31
                max_lane = (lane & seg) | (cval & ~seg)
                if mode == "up":
                    j = lane - bval
                    valid = j >= max_lane
                else:
                    j = {"down": lane + bval, "bfly": lane ^ bval,
                         "idx": (lane & seg) | (bval & ~seg)}[mode]
                    valid = j <= max_lane
                if not valid:
                    results.append((t, value_of(t, t, lane), 0))
                    continue
                src = t - lane + j
                if src // group != t // group:
                    why = f"source lane {j} lies outside this thread's {group}-lane warp"
                elif src not in active:
                    why = f"source lane {j} is inactive or has exited"
                elif not members >> j & 1:
                    why = f"source lane {j} is not in membermask {members:#x}"
                else:
                    results.append((t, value_of(t, src, j), 1))
                    continue
                raise self.fault(ins, t, why)
            for t, value, valid in results:
                write_d(t, value)
                if write_p is not None:
                    write_p(t, valid)

        return run


def _semantics(op: str, mods: tuple[str, ...],
               n_src: int) -> tuple[Callable[..., int], str, list[int]]:
    """An ALU instruction as (function of its source values, result type, source widths);
    for selp and slct the function is of the selector alone: whether the first operand is
    taken (the other is not read)."""
    if float_ops.is_f32(mods):
        return float_ops.semantics(op, mods, n_src)
    ty = mods[-1]
    w = type_width(ty)
    signed = is_signed(ty)
    same = [w] * n_src
    if op in ("mov", "cvta"):
        return _identity, ty, same
    if op in ("add", "sub", "neg", "abs", "and", "or", "xor", "not", "cnot"):
        return _SIMPLE[op](w), ty, same
    if op in ("mul", "mad"):
        fn, out = _multiply(op, mods[0], ty, w)
        return fn, out, [w, w, 2 * w] if op == "mad" and mods[0] == "wide" else same
    if op == "sad":
        return _sad(w, signed), ty, same
    if op in ("div", "rem"):
        return _divide(op, w, signed), ty, same
    if op in ("min", "max"):
        return _min_max(op, w, signed), ty, same
    if op in ("shl", "shr"):
        return _shift(op, w, signed), ty, [w, 32]
    if op == "shf":
        return _funnel(mods[0], mods[1]), ty, [32, 32, 32]
    if op in ("popc", "clz", "brev", "bfind"):
        return _bits(op, w, signed, "shiftamt" in mods), ty if op == "brev" else "u32", same
    if op == "bfe":
        return _bfe(w, signed), ty, [w, 32, 32]
    if op == "bfi":
        return _bfi(w), ty, [w, w, 32, 32]
    if op == "prmt":
        return _prmt, ty, same
    if op == "dp4a":
        return _dp4a(is_signed(mods[0]), is_signed(mods[1])), "u32", [32, 32, 32]
    if op == "selp":
        return bool, ty, [w, w, 1]
    if op == "slct":
        dw = type_width(mods[0])
        return _slct_takes_first, mods[0], [dw, dw, 32]
    if op == "cvt":
        return _convert(mods)
    raise UnsupportedError(f"`{op}.{'.'.join(mods)}` has no interpreter semantics")


def _identity(a: int) -> int:
    return a


_SELECTS = ("selp", "slct")


def _slct_takes_first(c: int) -> bool:
    return _sx(c, 32) >= 0


_SIMPLE: dict[str, Callable[[int], Callable[..., int]]] = {
    "add": lambda w: lambda a, b: a + b,
    "sub": lambda w: lambda a, b: a - b,
    "neg": lambda w: lambda a: -a,
    "abs": lambda w: lambda a: abs(_sx(a, w)),
    "and": lambda w: lambda a, b: a & b,
    "or": lambda w: lambda a, b: a | b,
    "xor": lambda w: lambda a, b: a ^ b,
    "not": lambda w: lambda a: ~a,
    "cnot": lambda w: lambda a: int(a == 0),
}


def _divide(op: str, w: int, signed: bool) -> Callable[..., int]:
    pick = 0 if op == "div" else 1

    def div_rem(a: int, b: int) -> int:
        return divide(a, b, w, signed)[pick]

    return div_rem


def _multiply(op: str, mode: str, ty: str, w: int) -> tuple[Callable[..., int], str]:
    """mul/mad .lo/.hi/.wide: the function and the result type (2w bits for .wide)."""
    signed = is_signed(ty)

    def val(x: int) -> int:
        return _sx(x, w) if signed else x

    def product(a: int, b: int) -> int:
        if mode == "lo":
            return a * b
        full = val(a) * val(b)
        return full >> w if mode == "hi" else full

    out = f"{ty[0]}{2 * w}" if mode == "wide" else ty
    if op == "mul":
        return product, out

    def multiply_add(a: int, b: int, c: int) -> int:
        return product(a, b) + c

    return multiply_add, out


def _sad(w: int, signed: bool) -> Callable[..., int]:
    def sad(a: int, b: int, c: int) -> int:
        if signed:
            a, b = _sx(a, w), _sx(b, w)
        return c + abs(a - b)

    return sad


def _min_max(op: str, w: int, signed: bool) -> Callable[..., int]:
    pick = min if op == "min" else max

    def min_max(a: int, b: int) -> int:
        return pick(_sx(a, w), _sx(b, w)) if signed else pick(a, b)

    return min_max


def _shift(op: str, w: int, signed: bool) -> Callable[..., int]:
    """PTX shifts clamp: amounts >= width give 0 (shl, shr.u/.b) or the sign fill (shr.s)."""
    if op == "shl":
        return lambda a, b: a << b if b < w else 0
    if signed:
        return lambda a, b: _sx(a, w) >> min(b, w - 1)
    return lambda a, b: a >> b if b < w else 0


def _funnel(direction: str, mode: str) -> Callable[..., int]:
    def shf(a: int, b: int, c: int) -> int:
        n = c & 31 if mode == "wrap" else min(c, 32)
        joined = (b << 32) | a
        return (joined << n) >> 32 if direction == "l" else joined >> n

    return shf


def _bits(op: str, w: int, signed: bool, shiftamt: bool) -> Callable[..., int]:
    if op == "popc":
        return lambda a: a.bit_count()
    if op == "clz":
        return lambda a: w - a.bit_length()
    if op == "brev":
        return lambda a: int(format(a, f"0{w}b")[::-1], 2)

    def bfind(a: int) -> int:
        if signed and a >> (w - 1):
            a = ~a & _mask(w)
        if a == 0:
            return 0xFFFFFFFF
        pos = a.bit_length() - 1
        return w - 1 - pos if shiftamt else pos

    return bfind


def _bfe(w: int, signed: bool) -> Callable[..., int]:
    def bfe(a: int, b: int, c: int) -> int:
        pos, length = b & 0xFF, c & 0xFF
        sbit = (a >> min(pos + length - 1, w - 1)) & 1 if signed and length else 0
        d = 0
        for i in range(w):
            bit = (a >> (pos + i)) & 1 if i < length and pos + i < w else sbit
            d |= bit << i
        return d

    return bfe


def _bfi(w: int) -> Callable[..., int]:
    def bfi(a: int, b: int, c: int, d: int) -> int:
        pos, length = c & 0xFF, d & 0xFF
        n = max(0, min(length, w - pos))
        field = _mask(n) << pos
        return (b & ~field) | ((a << pos) & field)

    return bfi


def _dp4a(a_signed: bool, b_signed: bool) -> Callable[..., int]:
    """c + the dot product of a's and b's four bytes (each signed or not per its type)."""
    def dp4a(a: int, b: int, c: int) -> int:
        total = c
        for k in range(4):
            x, y = a >> 8 * k & 0xFF, b >> 8 * k & 0xFF
            total += (_sx(x, 8) if a_signed else x) * (_sx(y, 8) if b_signed else y)
        return total

    return dp4a


def _prmt(a: int, b: int, c: int) -> int:
    """Default-mode byte permute: selector nibble i picks byte (sel & 7) of {b, a}."""
    data = (b << 32) | a
    out = 0
    for i in range(4):
        sel = (c >> (4 * i)) & 0xF
        byte = (data >> (8 * (sel & 7))) & 0xFF
        if sel & 8:
            byte = 0xFF if byte & 0x80 else 0
        out |= byte << (8 * i)
    return out


def _convert(mods: tuple[str, ...]) -> tuple[Callable[..., int], str, list[int]]:
    """cvt between integer types: extend per the source type, truncate or saturate (.sat)."""
    dtype, atype = mods[-2], mods[-1]
    aw, dw = type_width(atype), type_width(dtype)
    if is_signed(dtype):
        lo, hi = -(1 << (dw - 1)), (1 << (dw - 1)) - 1
    else:
        lo, hi = 0, _mask(dw)
    sat = "sat" in mods

    def cvt(a: int) -> int:
        v = _sx(a, aw) if is_signed(atype) else a
        return min(max(v, lo), hi) if sat else v

    return cvt, dtype, [aw]


_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "lo": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "ls": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "hi": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "hs": lambda a, b: a >= b,
}

_BOOL: dict[str, Callable[[int, int], int]] = {
    "and": lambda p, c: p & c,
    "or": lambda p, c: p | c,
    "xor": lambda p, c: p ^ c,
}


def _atomic_min(old: int, b: int, *, signed: bool) -> int:
    return min(_sx(old, 32), _sx(b, 32)) if signed else min(old, b)


def _atomic_max(old: int, b: int, *, signed: bool) -> int:
    return max(_sx(old, 32), _sx(b, 32)) if signed else max(old, b)


_ATOMIC: dict[str, Callable[..., int]] = {
    "add": lambda old, b, signed: old + b,
    "min": _atomic_min,
    "max": _atomic_max,
    "exch": lambda old, b, signed: b,
    "cas": lambda old, b, c, signed: c if old == b else old,
    "and": lambda old, b, signed: old & b,
    "or": lambda old, b, signed: old | b,
    "xor": lambda old, b, signed: old ^ b,
    "inc": lambda old, b, signed: 0 if old >= b else old + 1,
    "dec": lambda old, b, signed: b if old == 0 or old > b else old - 1,
}


def _xyz(v: tuple[int, ...]) -> str:
    """(x,y) for 2-D coordinates, (x,y,z) when z is used."""
    return f"({','.join(map(str, v if v[2:] not in ((), (0,)) else v[:2]))})"
