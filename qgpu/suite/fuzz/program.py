"""The fuzzer's program form: a small kernel AST that renders to CUDA, and its launch.

Every program is race-free and deterministic by construction, whatever the generator or the
minimiser does to it, so that any difference between backends is a bug:

* all arithmetic is on ``unsigned`` (no signed overflow); signed operations cast; shift amounts
  are masked; division and remainder by a value go through helpers that never divide by zero or
  ``INT_MIN / -1``; loop bounds are capped at 4 when rendered;
* each thread writes only its own output slots (``out[gid * SLOTS + k]``, ``bytes[gid]``,
  ``halves[gid]``: neighbouring threads' bytes share a word, as CUDA allows); shared memory is used
  only in self-contained units that start and end with a barrier (an exchange through ``sh``, a
  shared atomic on ``sa``), which the generator places only where control flow is uniform across
  the thread block; shuffles only where it is uniform across the warp and every warp is full;
* every global atomic word has one operation: a commutative one (any operand: the final word
  does not depend on the order), or a fixed operand (the sequence of old values does not
  either, so when *every* atomic on the word feeds its old value into ``acc[w2] op= f(old)``,
  one `f` and a commutative ``op`` for the word, that is deterministic too: the word's `use`),
  or a compare-and-swap loop applying a commutative update.

The minimiser only removes statements, unwraps branches and loops into their (at least as
uniform) context and replaces expressions by their children or constants, so these properties
survive it (uniformity only grows when an expression loses atoms).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

THREAD, WARP, BLOCK = 0, 1, 2
"""Uniformity levels: a value or control-flow context the same for a thread, a warp, a block."""

SH_WORDS = 16
MASK = 0xFFFFFFFF

# Expression operators: name -> (arity, CUDA template over the rendered operands).
OPS: dict[str, tuple[int, str]] = {
    "add": (2, "({0} + {1})"), "sub": (2, "({0} - {1})"), "mul": (2, "({0} * {1})"),
    "and": (2, "({0} & {1})"), "or": (2, "({0} | {1})"), "xor": (2, "({0} ^ {1})"),
    "shl": (2, "({0} << ({1} & 31u))"), "shr": (2, "({0} >> ({1} & 31u))"),
    "sra": (2, "(unsigned)((int){0} >> ({1} & 31u))"),
    "udiv": (2, "udiv_({0}, {1})"), "urem": (2, "urem_({0}, {1})"),
    "sdiv": (2, "sdiv_({0}, {1})"), "srem": (2, "srem_({0}, {1})"),
    "umulhi": (2, "__umulhi({0}, {1})"), "mulhi": (2, "(unsigned)__mulhi((int){0}, (int){1})"),
    "umul64": (2, "(unsigned)(((unsigned long long){0} * {1}) >> 33)"),
    "smul64": (2, "(unsigned)(((long long)(int){0} * (int){1}) >> 35)"),
    "mul24": (2, "(unsigned)__mul24((int){0}, (int){1})"), "umul24": (2, "__umul24({0}, {1})"),
    "min": (2, "(unsigned)min((int){0}, (int){1})"),
    "max": (2, "(unsigned)max((int){0}, (int){1})"),
    "umin": (2, "min({0}, {1})"), "umax": (2, "max({0}, {1})"),
    "hadd": (2, "(unsigned)__hadd((int){0}, (int){1})"), "uhadd": (2, "__uhadd({0}, {1})"),
    "rhadd": (2, "(unsigned)__rhadd((int){0}, (int){1})"),
    "eq": (2, "(unsigned)({0} == {1})"), "ne": (2, "(unsigned)({0} != {1})"),
    "lt": (2, "(unsigned)((int){0} < (int){1})"), "le": (2, "(unsigned)((int){0} <= (int){1})"),
    "gt": (2, "(unsigned)((int){0} > (int){1})"), "ge": (2, "(unsigned)((int){0} >= (int){1})"),
    "lo": (2, "(unsigned)({0} < {1})"), "hs": (2, "(unsigned)({0} >= {1})"),
    "land": (2, "(unsigned)({0} && {1})"), "lor": (2, "(unsigned)({0} || {1})"),
    "lnot": (1, "(unsigned)!{0}"), "not": (1, "(~{0})"), "neg": (1, "(0u - {0})"),
    "popc": (1, "(unsigned)__popc({0})"), "clz": (1, "(unsigned)__clz({0})"),
    "brev": (1, "__brev({0})"), "ffs": (1, "(unsigned)__ffs((int){0})"),
    "abs": (1, "(unsigned)abs((int)({0} | 1u))"),
    "sel": (3, "({0} ? {1} : {2})"),
    "fshl": (3, "__funnelshift_l({0}, {1}, {2})"), "fshr": (3, "__funnelshift_r({0}, {1}, {2})"),
    "fshlc": (3, "__funnelshift_lc({0}, {1}, {2})"),
    "fshrc": (3, "__funnelshift_rc({0}, {1}, {2})"),
    "load": (1, "in[({0}) & {imask}u]"),
    "load8": (1, "(unsigned)((const unsigned char*)in)[({0}) & {bmask}u]"),
    "load16": (1, "(unsigned)((const short*)in)[({0}) & {hmask}u]"),
}  # fmt: skip
LOADS = ("load", "load8", "load16")
# Leaves: const (value), var (v<i>), ctr (i<d>: a loop counter), own (out[base + k]), own8 and
# own16 (the thread's byte and halfword, bytes[gid] and halves[gid]), old (an atomic's old
# value), and the atoms below with their uniformity.
ATOMS: dict[str, tuple[str, int]] = {
    "tid": ("tid", THREAD), "tx": ("threadIdx.x", THREAD), "ty": ("threadIdx.y", THREAD),
    "gid": ("gid", THREAD), "lane": ("(tid & 3u)", THREAD), "warp": ("(tid >> 2)", WARP),
    "bx": ("blockIdx.x", BLOCK), "by": ("blockIdx.y", BLOCK), "ntx": ("blockDim.x", BLOCK),
    "nbx": ("gridDim.x", BLOCK), "n": ("n", BLOCK),
}  # fmt: skip
HELPERS = {
    "udiv": "__device__ __forceinline__ unsigned udiv_(unsigned a, unsigned b) "
            "{ return b ? a / b : a; }",
    "urem": "__device__ __forceinline__ unsigned urem_(unsigned a, unsigned b) "
            "{ return b ? a % b : a; }",
    "sdiv": "__device__ __forceinline__ unsigned sdiv_(unsigned a, unsigned b) { int x = (int)a, "
            "y = (int)b; return y == 0 || (y == -1 && a == 0x80000000u) ? a : (unsigned)(x / y); }",
    "srem": "__device__ __forceinline__ unsigned srem_(unsigned a, unsigned b) { int x = (int)a, "
            "y = (int)b; return y == 0 || (y == -1 && a == 0x80000000u) ? a : (unsigned)(x % y); }",
}  # fmt: skip
DIRECT_DIV = {"udiv": "/", "urem": "%", "sdiv": "/", "srem": "%"}

COMMUTATIVE = ("add", "sub", "xor", "or", "and", "min", "max", "umin", "umax")
"""Atomic updates whose final word does not depend on the order they apply in."""
ATOMIC_CALL = {
    "add": "atomicAdd(&{w}, {v})", "sub": "atomicSub(&{w}, {v})", "xor": "atomicXor(&{w}, {v})",
    "or": "atomicOr(&{w}, {v})", "and": "atomicAnd(&{w}, {v})",
    "min": "atomicMin((int*)&{w}, (int){v})", "max": "atomicMax((int*)&{w}, (int){v})",
    "umin": "atomicMin(&{w}, {v})", "umax": "atomicMax(&{w}, {v})",
    "inc": "atomicInc(&{w}, {v})", "dec": "atomicDec(&{w}, {v})", "exch": "atomicExch(&{w}, {v})",
    "cas": "atomicCAS(&{w}, {v}, {v2})",
}  # fmt: skip
UPDATE = {
    "add": "({a} + {v})", "xor": "({a} ^ {v})", "or": "({a} | {v})", "and": "({a} & {v})",
    "min": "(unsigned)min((int){a}, (int){v})", "max": "(unsigned)max((int){a}, (int){v})",
    "umin": "min({a}, {v})", "umax": "max({a}, {v})",
}  # fmt: skip
SHUFFLES = {
    "idx": "__shfl_sync(0xffffffffu, {v}, {l}, 4)",
    "up": "__shfl_up_sync(0xffffffffu, {v}, {l}, 4)",
    "down": "__shfl_down_sync(0xffffffffu, {v}, {l}, 4)",
    "xor": "__shfl_xor_sync(0xffffffffu, {v}, ({l}) & 3u, 4)",
}  # fmt: skip


@dataclass(frozen=True)
class E:
    """An expression node: an operator of OPS over `kids`, or a leaf (const, var, ctr, own,
    old, atom) whose `imm` is its value, index or atom name. Every value is unsigned 32-bit."""

    op: str
    kids: tuple[E, ...] = ()
    imm: int | str = 0


def const(v: int) -> E:
    return E("const", imm=v & MASK)


def uniformity(e: E, counters: dict[int, int]) -> int:
    """The most a value is shared: BLOCK for constants and block-wide atoms, down to THREAD."""
    if e.op == "const":
        return BLOCK
    if e.op == "atom":
        return ATOMS[str(e.imm)][1]
    if e.op == "ctr":
        return counters[int(e.imm)]
    if e.op in ("var", "own", "own8", "own16", "old"):
        return THREAD
    return min((uniformity(k, counters) for k in e.kids), default=BLOCK)


# --- statements -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assign:
    var: int
    value: E


@dataclass(frozen=True)
class Store:
    """``out[base + slot] = value``: the thread's own output word."""

    slot: int
    value: E


@dataclass(frozen=True)
class StoreSub:
    """``bytes[gid] = (unsigned char)value`` (`bits` 8) or ``halves[gid] = (unsigned short)
    value`` (16): a sub-word store whose word other threads' stores share."""

    bits: int
    value: E


@dataclass(frozen=True)
class If:
    cond: E
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()


@dataclass(frozen=True)
class Loop:
    """``for (unsigned i<depth> = 0; i < min(bound, 4u); ++i)``, kept a loop (``#pragma unroll
    1``) unless `unroll` lets the compiler unroll it."""

    depth: int
    bound: E
    body: tuple[Stmt, ...]
    unroll: bool = False


@dataclass(frozen=True)
class BreakIf:
    """``if (cond) break;`` (or continue), only directly in a loop's body."""

    cond: E
    cont: bool = False


@dataclass(frozen=True)
class Shuffle:
    """``v = __shfl*_sync(full, value, lane, 4)`` where the warp is converged and full."""

    var: int
    mode: str
    value: E
    lane: E


@dataclass(frozen=True)
class Exchange:
    """Through shared memory: every thread writes ``sh[tid]``, then reads another thread's."""

    var: int
    value: E
    index: E


@dataclass(frozen=True)
class SharedAtomic:
    """Thread 0 sets ``sa``, every thread applies ``op`` (a fixed operand for inc/dec), and
    every thread reads the result; barriers between the three."""

    var: int
    op: str
    init: int
    value: E


@dataclass(frozen=True)
class GlobalAtomic:
    """An atomic on ``acc[word]`` with the word's operation and use of the old value
    (Program.words)."""

    word: int
    value: E


@dataclass(frozen=True)
class Barrier:
    pass


Stmt = Assign | Store | StoreSub | If | Loop | BreakIf | Shuffle | Exchange | SharedAtomic | \
    GlobalAtomic | Barrier


@dataclass(frozen=True)
class Word:
    """A global atomic word's one operation: `kind` commutative (any operand), fixed (the
    constant operands `a`, `b`: cas compares with a and stores b) or casloop (a CAS loop
    applying the commutative `op`). A fixed word's `use` (word w2, f) makes every atomic on it
    apply ``f(old)`` to commutative word w2: all of them, or which old value meets which `f`
    (and whether it counts) would depend on the order the atomics ran in."""

    kind: str
    op: str
    a: int = 0
    b: int = 0
    use: tuple[int, E] | None = None


@dataclass(frozen=True)
class Program:
    """A fuzz kernel and its launch: ``fuzz(in, out, acc, n)``."""

    body: tuple[Stmt, ...]
    inits: tuple[int, ...]  # v0.. start values
    slots: int  # output words per thread
    words: tuple[Word, ...]
    grid: tuple[int, int]
    block: tuple[int, int]
    inputs: tuple[int, ...]  # in[], a power of two long
    acc_init: tuple[int, ...]
    n: int

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1]

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def subword(self) -> tuple[bool, bool]:
        """Whether the kernel has the ``bytes`` and the ``halves`` array."""
        found = {type(s).__name__ + str(getattr(s, "bits", "")) for s in walk(self.body)}
        for s in walk(self.body):
            found |= {x.op for e in exprs(s) for x in nodes(e)}
        return ("StoreSub8" in found or "own8" in found,
                "StoreSub16" in found or "own16" in found)

    def args(self) -> list:
        """The launch's arguments in the driver's JSON form (int32 words)."""
        s32 = [v - (1 << 32) if v >> 31 else v for v in self.inputs]
        acc = [v - (1 << 32) if v >> 31 else v for v in self.acc_init]
        n = self.n - (1 << 32) if self.n >> 31 else self.n
        total = self.threads * self.blocks
        bytes_, halves = self.subword
        return [s32, {"zeros": total * self.slots}, acc, n,
                *([{"zeros": -(-total // 4)}] if bytes_ else []),
                *([{"zeros": -(-total // 2)}] if halves else [])]

    def source(self) -> str:
        """The CUDA source of the kernel."""
        return render(self)

    def launch_text(self) -> str:
        """The launch as ``python -m qgpu run`` options."""
        return (f"--grid {self.grid[0]},{self.grid[1]} --block {self.block[0]},{self.block[1]} "
                f"--args '{json.dumps(self.args())}'")


def walk(body: tuple[Stmt, ...]):
    """Every statement of a body, depth first."""
    for s in body:
        yield s
        for sub in children(s):
            yield from walk(sub)


def children(s: Stmt) -> tuple[tuple[Stmt, ...], ...]:
    if isinstance(s, If):
        return (s.then, s.orelse)
    if isinstance(s, Loop):
        return (s.body,)
    return ()


def exprs(s: Stmt) -> list[E]:
    """The expressions a statement holds directly."""
    if isinstance(s, (Assign, Store, StoreSub)):
        return [s.value]
    if isinstance(s, (If, BreakIf)):
        return [s.cond]
    if isinstance(s, Loop):
        return [s.bound]
    if isinstance(s, Shuffle):
        return [s.value, s.lane]
    if isinstance(s, Exchange):
        return [s.value, s.index]
    if isinstance(s, SharedAtomic):
        return [s.value]
    if isinstance(s, GlobalAtomic):
        return [s.value]
    return []


def with_exprs(s: Stmt, new: list[E]) -> Stmt:
    """`s` with its direct expressions replaced (the order of ``exprs``)."""
    if isinstance(s, (Assign, Store, StoreSub, SharedAtomic)):
        return replace(s, value=new[0])
    if isinstance(s, (If, BreakIf)):
        return replace(s, cond=new[0])
    if isinstance(s, Loop):
        return replace(s, bound=new[0])
    if isinstance(s, Shuffle):
        return replace(s, value=new[0], lane=new[1])
    if isinstance(s, Exchange):
        return replace(s, value=new[0], index=new[1])
    if isinstance(s, GlobalAtomic):
        return replace(s, value=new[0])
    return s


def nodes(e: E):
    yield e
    for k in e.kids:
        yield from nodes(k)


def features(p: Program) -> set[str]:
    """What a program exercises: statement kinds, operators, atomic kinds, shuffle modes, launch
    traits (the coverage test asserts every one appears)."""
    out: set[str] = set()
    found: list[E] = []
    for s in walk(p.body):
        out.add(type(s).__name__)
        found += exprs(s)
        if isinstance(s, Shuffle):
            out.add(f"shfl.{s.mode}")
        elif isinstance(s, SharedAtomic):
            out.add(f"shared.{s.op}")
        elif isinstance(s, GlobalAtomic):
            w = p.words[s.word]
            out.add(f"atomic.{w.kind}.{w.op}")
            if w.use:
                out.add("atomic.old")
                found.append(w.use[1])
        elif isinstance(s, StoreSub):
            out.add(f"StoreSub.{s.bits}")
        elif isinstance(s, BreakIf):
            out.add("continue" if s.cont else "break")
        elif isinstance(s, If) and s.orelse:
            out.add("else")
        elif isinstance(s, Loop):
            out.add("unrolled_loop" if s.unroll else "loop")
            if any(isinstance(t, Loop) for t in walk(s.body)):
                out.add("nested_loop")
    for x in (x for e in found for x in nodes(e)):
        out.add(f"op.{x.op}" if x.op in OPS else f"leaf.{x.op}")
        if x.op == "atom":
            out.add(f"atom.{x.imm}")
        if x.op in DIRECT_DIV and x.kids[1].op == "const":
            out.add(f"op.{x.op}.const")
    out.add("warps>1" if p.threads > 4 else "warps=1")
    out.add("blocks>1" if p.blocks > 1 else "blocks=1")
    if p.block[1] > 1 or p.grid[1] > 1:
        out.add("2d")
    if p.threads % 4:
        out.add("partial_warp")
    return out


# --- rendering --------------------------------------------------------------------------------


def _hex(v: int) -> str:
    return f"{v}u" if v < 1024 else f"0x{v:x}u"


class _Render:
    def __init__(self, p: Program) -> None:
        self.p = p
        self.helpers: set[str] = set()
        self.masks = {"imask": len(p.inputs) - 1, "bmask": 4 * len(p.inputs) - 1,
                      "hmask": 2 * len(p.inputs) - 1}

    def expr(self, e: E) -> str:
        if e.op == "const":
            return _hex(int(e.imm))
        if e.op == "var":
            return f"v{e.imm}"
        if e.op == "ctr":
            return f"i{e.imm}"
        if e.op == "own":
            return f"out[base + {e.imm}]"
        if e.op in ("own8", "own16"):
            return f"(unsigned){'bytes' if e.op == 'own8' else 'halves'}[gid]"
        if e.op == "old":
            return "o"
        if e.op == "atom":
            return ATOMS[str(e.imm)][0]
        args = [self.expr(k) for k in e.kids]
        if e.op in DIRECT_DIV:
            d = e.kids[1]
            safe = d.op == "const" and int(d.imm) != 0 and (
                e.op[0] == "u" or int(d.imm) != MASK)
            if safe:
                cast = "" if e.op[0] == "u" else "(int)"
                text = f"({cast}{args[0]} {DIRECT_DIV[e.op]} {cast}{args[1]})"
                return text if e.op[0] == "u" else f"(unsigned){text}"
            self.helpers.add(e.op)
        return OPS[e.op][1].format(*args, **self.masks)

    def body(self, stmts: tuple[Stmt, ...], ind: str) -> list[str]:
        out: list[str] = []
        for s in stmts:
            out += self.stmt(s, ind)
        return out

    def stmt(self, s: Stmt, ind: str) -> list[str]:
        x = self.expr
        if isinstance(s, Assign):
            return [f"{ind}v{s.var} = {x(s.value)};"]
        if isinstance(s, Store):
            return [f"{ind}out[base + {s.slot}] = {x(s.value)};"]
        if isinstance(s, StoreSub):
            name, ty = ("bytes", "unsigned char") if s.bits == 8 else ("halves", "unsigned short")
            return [f"{ind}{name}[gid] = ({ty}){x(s.value)};"]
        if isinstance(s, If):
            lines = [f"{ind}if ({x(s.cond)}) {{", *self.body(s.then, ind + "  ")]
            if s.orelse:
                lines += [f"{ind}}} else {{", *self.body(s.orelse, ind + "  ")]
            return lines + [f"{ind}}}"]
        if isinstance(s, Loop):
            i = f"i{s.depth}"
            pragma = [] if s.unroll else [f"{ind}#pragma unroll 1"]
            return [*pragma, f"{ind}for (unsigned {i} = 0; {i} < min({x(s.bound)}, 4u); ++{i}) {{",
                    *self.body(s.body, ind + "  "), f"{ind}}}"]
        if isinstance(s, BreakIf):
            return [f"{ind}if ({x(s.cond)}) {'continue' if s.cont else 'break'};"]
        if isinstance(s, Shuffle):
            call = SHUFFLES[s.mode].format(v=x(s.value), l=x(s.lane))
            return [f"{ind}v{s.var} = {call};"]
        if isinstance(s, Exchange):
            return [f"{ind}__syncthreads();", f"{ind}sh[tid] = {x(s.value)};",
                    f"{ind}__syncthreads();",
                    f"{ind}v{s.var} = sh[({x(s.index)}) % {self.p.threads}u];"]
        if isinstance(s, SharedAtomic):
            call = ATOMIC_CALL[s.op].format(w="sa", v=x(s.value))
            return [f"{ind}__syncthreads();", f"{ind}if (tid == 0) sa = {_hex(s.init)};",
                    f"{ind}__syncthreads();", f"{ind}{call};", f"{ind}__syncthreads();",
                    f"{ind}v{s.var} = sa;"]
        if isinstance(s, GlobalAtomic):
            return self.atomic(s, ind)
        assert isinstance(s, Barrier)
        return [f"{ind}__syncthreads();"]

    def atomic(self, s: GlobalAtomic, ind: str) -> list[str]:
        w = self.p.words[s.word]
        word = f"acc[{s.word}]"
        if w.kind == "casloop":
            new = UPDATE[w.op].format(a="a", v=self.expr(s.value))
            return [f"{ind}{{",
                    f"{ind}  unsigned o = {word}, a;",
                    f"{ind}  do {{ a = o; o = atomicCAS(&{word}, a, {new}); }} while (o != a);",
                    f"{ind}}}"]
        value = _hex(w.a) if w.kind == "fixed" else self.expr(s.value)
        call = ATOMIC_CALL[w.op].format(w=word, v=value, v2=_hex(w.b))
        if w.use is None:
            return [f"{ind}{call};"]
        target, f = w.use
        use = ATOMIC_CALL[self.p.words[target].op].format(w=f"acc[{target}]", v=self.expr(f))
        return [f"{ind}{{", f"{ind}  unsigned o = {call};", f"{ind}  {use};", f"{ind}}}"]


def used_vars(p: Program) -> list[int]:
    """The variables a program's statements mention (only these are declared)."""
    found: set[int] = set()
    for s in walk(p.body):
        if isinstance(s, (Assign, Shuffle, Exchange, SharedAtomic)):
            found.add(s.var)
        for e in exprs(s):
            found.update(int(x.imm) for x in nodes(e) if x.op == "var")
    return sorted(found)


def render(p: Program) -> str:
    """CUDA source: helpers in use, then ``extern "C" __global__ void fuzz(...)``."""
    r = _Render(p)
    body = r.body(p.body, "  ")
    stmts = list(walk(p.body))
    head = ["  unsigned tid = threadIdx.x + threadIdx.y * blockDim.x;",
            "  unsigned gid = tid + (blockIdx.x + blockIdx.y * gridDim.x) "
            "* (blockDim.x * blockDim.y);",
            f"  unsigned base = gid * {p.slots}u;"]
    if any(isinstance(s, Exchange) for s in stmts):
        head.insert(0, f"  __shared__ unsigned sh[{SH_WORDS}];")
    if any(isinstance(s, SharedAtomic) for s in stmts):
        head.insert(0, "  __shared__ unsigned sa;")
    variables = used_vars(p)
    if variables:
        head.append("  unsigned " + ", ".join(f"v{v} = {_hex(p.inits[v])}" for v in variables)
                    + ";")
    bytes_, halves = p.subword
    params = ("const unsigned* in, unsigned* out, unsigned* acc, unsigned n"
              + (", unsigned char* bytes" if bytes_ else "")
              + (", unsigned short* halves" if halves else ""))
    lines = [HELPERS[h] for h in sorted(r.helpers)]
    lines += [f'extern "C" __global__ void fuzz({params}) {{', *head, *body, "}"]
    return "\n".join(lines) + "\n"
