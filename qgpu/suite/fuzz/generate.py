"""Random fuzz programs: deterministic per (seed, index, attempt), valid by construction
(program.py says what that means), sized to fit the machine's limits."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from qgpu.suite.fuzz.program import (
    ATOMIC_CALL,
    ATOMS,
    BLOCK,
    COMMUTATIVE,
    DIRECT_DIV,
    LOADS,
    MASK,
    OPS,
    SHUFFLES,
    THREAD,
    UPDATE,
    WARP,
    Assign,
    Barrier,
    BreakIf,
    E,
    Exchange,
    GlobalAtomic,
    If,
    Loop,
    Program,
    SharedAtomic,
    Shuffle,
    Stmt,
    Store,
    StoreSub,
    Word,
    const,
    uniformity,
)

MAX_LOOP_DEPTH = 2
MAX_OUTPUT_WORDS = 80  # of the 127 usable global words; inputs and atomic words take the rest
SUBWORD_OUTPUT_WORDS = 40  # with the bytes and halves arrays (a quarter and a half word a thread)
CMP = ("eq", "ne", "lt", "le", "gt", "ge", "lo", "hs")
SHAPES_2D = ((2, 2), (4, 2), (2, 4), (3, 3), (4, 4), (8, 2), (2, 8), (4, 3), (3, 4), (5, 3))


@dataclass(frozen=True)
class Size:
    """How big programs get: statements, divisions by a variable (each a loop of ~10 ROM
    blocks), launch shapes. The model pays a generated token per executed block and written-back
    value, so its runs use SMALL."""

    statements: int
    divisions: int
    grids: tuple[tuple[int, int], ...]


NORMAL = Size(22, 3, ((1, 1), (1, 1), (2, 1), (3, 1), (4, 1), (2, 2), (1, 2)))
SMALL = Size(10, 1, ((1, 1), (1, 1), (2, 1), (1, 2)))
SIZES = {"normal": NORMAL, "small": SMALL}


def generate(seed: int, index: int, attempt: int = 0, size: Size = NORMAL) -> Program:
    """Program `index` of the run with `seed` (`attempt` > 0: the next try when an earlier one
    did not fit the machine)."""
    rng = random.Random(f"qgpu-fuzz:{seed}:{index}:{attempt}")
    return _Gen(rng, size).program()


class _Gen:
    def __init__(self, rng: random.Random, size: Size) -> None:
        self.rng = rng
        self.size = size
        self.statements = 0
        self.divisions = 0

    # --- values ---------------------------------------------------------------------------
    def value(self) -> int:
        """An interesting 32-bit word: small, near a power of two, extreme or random."""
        r = self.rng
        pick = r.random()
        if pick < 0.35:
            return r.randint(0, 16)
        if pick < 0.5:
            return (-r.randint(1, 16)) & MASK
        if pick < 0.7:
            return ((1 << r.randint(0, 31)) + r.choice((-1, 0, 0, 1))) & MASK
        if pick < 0.8:
            return r.choice((0x80000000, 0x7FFFFFFF, 0xFFFFFFFF, 0x80000001, 0xFFFF, 0x10000))
        return r.getrandbits(32)

    # --- launch and program ---------------------------------------------------------------
    def program(self) -> Program:
        r = self.rng
        if r.random() < 0.25:
            block = r.choice(SHAPES_2D)
        else:
            threads = r.choice((4, 8, 12, 16)) if r.random() < 0.7 else r.randint(1, 16)
            block = (threads, 1)
        grid = r.choice(self.size.grids)
        self.subword = r.random() < 0.35
        limit = SUBWORD_OUTPUT_WORDS if self.subword else MAX_OUTPUT_WORDS
        while grid[0] * grid[1] * block[0] * block[1] > limit:
            grid = (1, 1) if grid[1] > 1 else (grid[0] - 1, 1)
        total = grid[0] * grid[1] * block[0] * block[1]
        slots = self.slots = r.randint(1, max(1, min(3, limit // total)))
        self.shuffles = block[0] * block[1] % 4 == 0
        self.nvars = r.randint(2, 5)
        words = self.acc_words = self.words()
        body = list(self.block(BLOCK, {}, 0, r.randint(4, self.size.statements - 4)))
        for k in range(slots):  # every variable reaches an output word
            mine = [E("var", imm=v) for v in range(self.nvars) if v % slots == k]
            if mine:
                acc = mine[0]
                for m in mine[1:]:
                    acc = E(r.choice(("xor", "add")), (acc, m))
                body.append(Store(k, acc))
        return Program(
            body=tuple(body), inits=tuple(self.value() for _ in range(self.nvars)),
            slots=slots, words=words, grid=grid, block=block,
            inputs=tuple(self.value() for _ in range(r.choice((8, 16)))),
            acc_init=tuple(self.value() for _ in words), n=self.value())

    def words(self) -> tuple[Word, ...]:
        r = self.rng
        out = [Word("comm", r.choice(COMMUTATIVE))]
        for _ in range(r.randint(1, 5)):
            kind = r.choice(("comm", "fixed", "fixed", "casloop"))
            if kind == "comm":
                out.append(Word(kind, r.choice(COMMUTATIVE)))
            elif kind == "casloop":
                out.append(Word(kind, r.choice(tuple(UPDATE))))
            else:
                op = r.choice(tuple(ATOMIC_CALL))
                a = r.randint(0, 20) if op in ("inc", "dec") else self.value()
                out.append(Word(kind, op, a, self.value()))
        targets = [i for i, w in enumerate(out) if w.kind == "comm"]
        return tuple(replace(w, use=(r.choice(targets), self.expr(2, THREAD, {}, old=True)))
                     if w.kind == "fixed" and r.random() < 0.6 else w for w in out)

    # --- statements -----------------------------------------------------------------------
    def block(self, ctx: int, counters: dict[int, int], depth: int, count: int) -> list[Stmt]:
        out: list[Stmt] = []
        for _ in range(count):
            if self.statements >= self.size.statements:
                break
            self.statements += 1
            out.append(self.stmt(ctx, counters, depth))
        return out

    def stmt(self, ctx: int, counters: dict[int, int], depth: int) -> Stmt:
        r = self.rng
        kinds = {"assign": 8, "store": 2, "if": 3, "atomic": 2}
        if depth < MAX_LOOP_DEPTH:
            kinds["loop"] = 2
        if self.subword:
            kinds["substore"] = 1.5
        if ctx >= WARP and self.shuffles:
            kinds["shuffle"] = 2
        if ctx == BLOCK:
            kinds.update(exchange=1.5, shared_atomic=1, barrier=0.3)
        kind = r.choices(list(kinds), list(kinds.values()))[0]
        var = r.randrange(self.nvars)
        x = self.expr
        if kind == "assign":
            return Assign(var, x(3, THREAD, counters))
        if kind == "store":
            return Store(r.randrange(self.slots), x(2, THREAD, counters))
        if kind == "if":
            cond = self.cond(r.choice((THREAD, THREAD, WARP, BLOCK)), counters)
            inner = min(ctx, uniformity(cond, counters))
            then = self.block(inner, counters, depth, r.randint(1, 3))
            orelse = self.block(inner, counters, depth, r.randint(1, 2)) if r.random() < 0.5 \
                else []
            return If(cond, tuple(then), tuple(orelse))
        if kind == "loop":
            bound = const(r.randint(1, 4)) if r.random() < 0.7 else \
                x(2, r.choice((THREAD, BLOCK)), counters)
            level = min(ctx, uniformity(bound, counters))
            inner = {**counters, depth: level}
            body = self.block(level, inner, depth + 1, r.randint(1, 4))
            if r.random() < 0.4:
                body.insert(r.randint(0, len(body)),
                            BreakIf(self.cond(level, inner), r.random() < 0.4))
            return Loop(depth, bound, tuple(body), r.random() < 0.4)
        if kind == "shuffle":
            mode = r.choice(tuple(SHUFFLES))
            lane = const(r.randint(0, 4)) if r.random() < 0.6 else x(1, THREAD, counters)
            return Shuffle(var, mode, x(2, THREAD, counters), lane)
        if kind == "exchange":
            index = E("atom", imm=r.choice(("tid", "gid", "warp")))
            index = E("add", (index, const(r.randint(1, 15)))) if r.random() < 0.6 else \
                x(2, THREAD, counters)
            return Exchange(var, x(2, THREAD, counters), index)
        if kind == "shared_atomic":
            op = r.choice((*COMMUTATIVE, "inc", "dec"))
            value = const(r.randint(0, 20)) if op in ("inc", "dec") else x(2, THREAD, counters)
            return SharedAtomic(var, op, self.value(), value)
        if kind == "substore":
            return StoreSub(r.choice((8, 16)), x(2, THREAD, counters))
        if kind == "barrier":
            return Barrier()
        return self.atomic(counters)

    def atomic(self, counters: dict[int, int]) -> GlobalAtomic:
        r = self.rng
        w = r.randrange(len(self.acc_words))
        word = self.acc_words[w]
        if word.kind == "fixed":  # its operand is the word's constant
            return GlobalAtomic(w, const(0))
        return GlobalAtomic(w, self.expr(2, THREAD, counters))

    # --- expressions ----------------------------------------------------------------------
    def cond(self, level: int, counters: dict[int, int]) -> E:
        r = self.rng
        pick = r.random()
        if pick < 0.6:
            return E(r.choice(CMP), (self.expr(2, level, counters), self.expr(1, level, counters)))
        if pick < 0.8:
            return E(r.choice(("land", "lor")), (self.cond(level, counters),
                                                 self.cond(level, counters)))
        if pick < 0.9:
            return E("lnot", (self.cond(level, counters),))
        return E("and", (self.expr(2, level, counters), const(1 << r.randint(0, 4))))

    def leaf(self, level: int, counters: dict[int, int], old: bool) -> E:
        r = self.rng
        if old:
            return E("old") if r.random() < 0.6 else const(self.value())
        options: list[E] = [const(self.value())] * 3
        options += [E("atom", imm=a) for a, (_, u) in ATOMS.items() if u >= level]
        options += [E("ctr", imm=d) for d, u in counters.items() if u >= level] * 2
        if level == THREAD:
            options += [E("var", imm=v) for v in range(self.nvars)] * 3
            options.append(E("own", imm=0))
            if self.subword:
                options += [E("own8"), E("own16")]
        return r.choice(options)

    def expr(self, depth: int, level: int, counters: dict[int, int], old: bool = False) -> E:
        r = self.rng
        if depth <= 0 or r.random() < 0.35:
            if not old and r.random() < 0.1:
                load = r.choice(("load", "load", "load8", "load16"))
                return E(load, (self.expr(1, level, counters),))
            return self.leaf(level, counters, old)
        op = r.choice([o for o in OPS if o not in LOADS])
        if op in DIRECT_DIV:
            if self.divisions >= self.size.divisions or r.random() < 0.5:
                divisor = const(self.value() if r.random() < 0.3 else r.randint(1, 40))
                return E(op, (self.expr(depth - 1, level, counters, old), divisor))
            self.divisions += 1
        kids = tuple(self.expr(depth - 1, level, counters, old) for _ in range(OPS[op][0]))
        if op == "sel":
            kids = (self.cond(level, counters) if not old else kids[0], *kids[1:])
        return E(op, kids)
