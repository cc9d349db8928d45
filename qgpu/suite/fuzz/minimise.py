"""Shrink a divergent program while it still diverges the same way (greedy delta debugging).

Candidates come biggest cut first: a smaller launch, then statements removed or unwrapped
(pre-order, so a whole branch or loop goes before its parts), then expressions replaced by a
child or a constant, then data zeroed. The first candidate that still diverges is taken and the
search goes on from the same position; a pass that takes none ends it. Every candidate is valid
by construction (program.py), so a divergence that survives is still a real one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from qgpu.suite.fuzz.program import (
    Assign,
    BreakIf,
    E,
    Exchange,
    If,
    Loop,
    Program,
    SharedAtomic,
    Shuffle,
    Stmt,
    Word,
    const,
    exprs,
    walk,
    with_exprs,
)

MAX_TESTS = 3000


def minimise(p: Program, still_fails: Callable[[list[Program]], list[bool]], chunk: int = 1,
             max_tests: int = MAX_TESTS) -> tuple[Program, int]:
    """The smallest program found that `still_fails` (it tests candidates `chunk` at a time:
    the model runs a chunk as one batch) and the number of candidates tested."""
    tests = 0
    seen = {_key(p)}
    position = 0
    while tests < max_tests:
        cands = [c for c in candidates(p) if _key(c) not in seen]
        taken = None
        for i in range(min(position, len(cands)), len(cands), chunk):
            group = cands[i:i + chunk]
            seen.update(_key(c) for c in group)
            tests += len(group)
            hit = next((c for c, ok in zip(group, still_fails(group), strict=True) if ok), None)
            if hit is not None:
                taken, position = hit, i
                break
            if tests >= max_tests:
                break
        if taken is None:
            if position == 0 or tests >= max_tests:
                break
            position = 0  # one more pass from the start before giving up
            continue
        p = taken
    return p, tests


def _key(p: Program) -> tuple:
    return (p.source(), p.launch_text())


def size(p: Program) -> tuple[int, int]:
    """(statements, expression nodes): how big a program is."""
    stmts = list(walk(p.body))
    return len(stmts), sum(_count(e) for s in stmts for e in exprs(s))


def _count(e: E) -> int:
    return 1 + sum(_count(k) for k in e.kids)


def candidates(p: Program) -> Iterator[Program]:
    """Every one-step simplification of `p`, biggest first."""
    shuffles = any(isinstance(s, Shuffle) for s in walk(p.body))
    if p.grid != (1, 1):
        yield replace(p, grid=(1, 1))
        if p.grid[1] > 1:
            yield replace(p, grid=(p.grid[0], 1))
    for block in ((4, 1), (p.threads // 2, 1), (1, 1)):
        if block[0] >= 1 and block[0] < p.threads and (not shuffles or block[0] % 4 == 0):
            yield replace(p, block=block)
    for body in _bodies(p.body):
        yield replace(p, body=body)
    for body in _expr_bodies(p.body):
        yield replace(p, body=body)
    for i, w in enumerate(p.words):
        if w.use is not None:
            yield _with_word(p, i, replace(w, use=None))
            for f in _exprs(w.use[1]):
                yield _with_word(p, i, replace(w, use=(w.use[0], f)))
    for i, v in enumerate(p.inits):
        if v:
            yield replace(p, inits=p.inits[:i] + (0,) + p.inits[i + 1:])
    if p.n:
        yield replace(p, n=0)
    for i, v in enumerate(p.inputs):
        if v:
            yield replace(p, inputs=p.inputs[:i] + (0,) + p.inputs[i + 1:])
    for i, v in enumerate(p.acc_init):
        if v:
            yield replace(p, acc_init=p.acc_init[:i] + (0,) + p.acc_init[i + 1:])


def _with_word(p: Program, i: int, w: Word) -> Program:
    return replace(p, words=p.words[:i] + (w,) + p.words[i + 1:])


def _bodies(body: tuple[Stmt, ...]) -> Iterator[tuple[Stmt, ...]]:
    """`body` with one statement removed, unwrapped or simplified, at any depth."""
    for i, s in enumerate(body):
        before, after = body[:i], body[i + 1:]
        yield before + after
        for repl in _unwraps(s):
            yield before + repl + after
        if isinstance(s, If):
            for then in _bodies(s.then):
                yield before + (replace(s, then=then),) + after
            for orelse in _bodies(s.orelse):
                yield before + (replace(s, orelse=orelse),) + after
        elif isinstance(s, Loop):
            for inner in _bodies(s.body):
                yield before + (replace(s, body=inner),) + after


def _unwraps(s: Stmt) -> Iterator[tuple[Stmt, ...]]:
    """Simpler statements in place of `s`, valid where `s` was."""
    if isinstance(s, If):
        yield s.then
        if s.orelse:
            yield s.orelse
            yield (replace(s, orelse=()),)
    elif isinstance(s, Loop):
        yield tuple(_no_counter(t, s.depth) for t in s.body if not isinstance(t, BreakIf))
        if s.bound != const(1):
            yield (replace(s, bound=const(1)),)
    elif isinstance(s, (Shuffle, Exchange, SharedAtomic)):
        yield (Assign(s.var, s.value),)


def _no_counter(s: Stmt, depth: int) -> Stmt:
    """`s` with loop counter `depth` read as 0 (its loop is gone)."""
    s = with_exprs(s, [_subst(e, depth) for e in exprs(s)])
    if isinstance(s, If):
        return replace(s, then=tuple(_no_counter(t, depth) for t in s.then),
                       orelse=tuple(_no_counter(t, depth) for t in s.orelse))
    if isinstance(s, Loop):
        return replace(s, body=tuple(_no_counter(t, depth) for t in s.body))
    return s


def _subst(e: E, depth: int) -> E:
    if e.op == "ctr" and e.imm == depth:
        return const(0)
    return replace(e, kids=tuple(_subst(k, depth) for k in e.kids)) if e.kids else e


def _expr_bodies(body: tuple[Stmt, ...]) -> Iterator[tuple[Stmt, ...]]:
    """`body` with one expression node replaced by a child or a constant."""
    for i, s in enumerate(body):
        before, after = body[:i], body[i + 1:]
        slots = exprs(s)
        for j, e in enumerate(slots):
            for new in _exprs(e):
                yield before + (with_exprs(s, slots[:j] + [new] + slots[j + 1:]),) + after
        if isinstance(s, If):
            for then in _expr_bodies(s.then):
                yield before + (replace(s, then=then),) + after
            for orelse in _expr_bodies(s.orelse):
                yield before + (replace(s, orelse=orelse),) + after
        elif isinstance(s, Loop):
            for inner in _expr_bodies(s.body):
                yield before + (replace(s, body=inner),) + after


def _exprs(e: E) -> Iterator[E]:
    """Simpler expressions in place of `e`: its children, 0, 1, then inside a child."""
    yield from e.kids
    for v in (0, 1):
        if e != const(v):
            yield const(v)
    for k, kid in enumerate(e.kids):
        for new in _exprs(kid):
            yield replace(e, kids=e.kids[:k] + (new,) + e.kids[k + 1:])
