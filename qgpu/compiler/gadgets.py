"""The gadget library: logic, selection, conversions and arithmetic built from rules.

A rule (one MLP neuron) fires iff all its literals hold and then adds small integers to some
dims; every gadget here is a set of such rules, so it is exact exactly when the rules are
(docs/ARCHITECTURE.md, sections 3 and 8). What each gadget adds on top is its *exactness
condition* — what its inputs must hold — and its *cost* in neurons and MLP layers.

Conditions every gadget shares (the evaluator checks the first, and memory addresses and
written words, on every token):

* every literal dim holds 0 or 1 when the group runs (a 2 would count as a met literal plus one);
* output dims start at 0 (the graph gives every feature one writer, so they do);
* ``onehot`` inputs have at most one dim set, ``word`` inputs exactly one per digit (a memory
  read of nothing gives an all-zero word: only gadgets that say so accept it).

Conventions. Gadgets take the graph, a name (the rule group; multi-layer gadgets also name their
intermediate features ``{name}.…``), feature names, and ``when``: extra literals that every rule
of the (last) layer requires, so that outputs stay 0 unless they hold. With ``group=False`` the
(last-layer) rules are returned instead of added, so that several gadgets writing one feature can
share its single rule group; otherwise the group is added and its rules returned as well.
Single-output gates write one ``Dim``; word gadgets use base-4 digits, least significant first.
``lookup`` and ``copy_bits`` live in graph.py and are re-exported here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import comb

from qgpu.compiler import numerics as nx
from qgpu.compiler.graph import Dim, Feature, Graph, Literal_, Rule, copy_bits, lookup

__all__ = [
    "add_bits", "add_onehot", "add_words", "and_gate", "bits_to_onehot", "bits_to_word",
    "bitwise", "choose", "clear", "compare", "copy", "copy_bits", "equals", "increment",
    "increment_word", "lookup", "mux", "negate", "onehot_to_bits", "onehot_to_word", "or_gate",
    "shift", "sub_bits", "threshold", "threshold_cost", "word_to_bits", "word_to_onehot",
    "mul_bits", "mul_columns", "HighHalf", "pack", "unpack",
]

When = tuple[Literal_, ...]
CarryIn = bool | Literal_ | list[When]
"""A carry-in: a constant, a literal, or mutually exclusive conjunctions (1 iff one holds)."""


# --- helpers ----------------------------------------------------------------------------------


def negate(lit: Literal_) -> Literal_:
    """The literal that holds exactly when `lit` does not (for 0/1 dims)."""
    return (lit[0], 1 - lit[1])


def _finish(g: Graph, name: str, rules: list[Rule], group: bool) -> list[Rule]:
    if group:
        g.rule_group(name, rules)
    return rules


def _feature(g: Graph, name: str, code: str | None = None, size: int | None = None) -> Feature:
    f = g.features[name]
    if code is not None and f.code != code:
        raise ValueError(f"{name} is {f.code}, not {code}")
    if size is not None and f.size != size:
        raise ValueError(f"{name} has {f.size} dims, not {size}")
    return f


def _digits(g: Graph, name: str) -> int:
    return _feature(g, name, "word").size // 4


def _inc(dims: Sequence[Dim], delta: int = 1) -> tuple[tuple[Dim, int], ...]:
    return tuple((d, delta) for d in dims)


# --- gates ------------------------------------------------------------------------------------


def threshold_cost(n: int, k: int) -> int:
    """Neurons of `threshold` over n literals: C(n, k) direct or 1 + C(n, k-1) complemented."""
    if k <= 0:
        return 1
    if k > n:
        return 0
    return min(comb(n, k), 1 + comb(n, k - 1))


def _kth_holds(lits: Sequence[Literal_], k: int) -> list[tuple[Literal_, ...]]:
    """Mutually exclusive conjunctions, one of which holds iff at least k literals hold: "the k-th
    holding literal is l_j and exactly these k-1 of l_0..l_{j-1} hold". C(n, k) of them."""
    out = []
    for j in range(k - 1, len(lits)):
        for held in itertools.combinations(range(j), k - 1):
            out.append(tuple(lits[i] if i in held else negate(lits[i]) for i in range(j))
                       + (lits[j],))
    return out


def threshold(g: Graph, name: str, inputs: Sequence[Literal_], k: int, out: Dim, *,
              when: When = (), group: bool = True) -> list[Rule]:
    """out = 1 iff at least k of the input literals hold.

    Why: the general gate; AND (k = n) and OR (k = 1) are its cheap ends. A rule is an AND, so
    "at least k" becomes mutually exclusive AND terms (exactly one fires), or their complement
    (a constant rule adds 1, the terms for "at least n-k+1 fail" subtract it), whichever is
    smaller. Exact: input dims 0/1 and pairwise distinct. Cost: 1 layer,
    ``threshold_cost(n, k)`` = min(C(n,k), 1 + C(n,k-1)) neurons (k <= 0: 1, k > n: 0).
    """
    lits = list(inputs)
    if len({d for d, _ in lits}) != len(lits):
        raise ValueError(f"threshold {name}: input dims must be distinct")
    n, w = len(lits), tuple(when)
    if k <= 0:
        rules = [Rule(w, ((out, 1),), f"{name}:always")]
    elif k > n:
        rules = []
    elif comb(n, k) <= 1 + comb(n, k - 1):
        rules = [Rule(w + t, ((out, 1),), f"{name}:{i}")
                 for i, t in enumerate(_kth_holds(lits, k))]
    else:
        fails = _kth_holds([negate(x) for x in lits], n - k + 1)
        rules = [Rule(w, ((out, 1),), f"{name}:always")]
        rules += [Rule(w + t, ((out, -1),), f"{name}:~{i}") for i, t in enumerate(fails)]
    return _finish(g, name, rules, group)


def and_gate(g: Graph, name: str, inputs: Sequence[Literal_], out: Dim, *, when: When = (),
             group: bool = True) -> list[Rule]:
    """out = 1 iff every input literal holds (negative literals give AND-NOT).
    Exact: input dims 0/1. Cost: 1 neuron, 1 layer."""
    return threshold(g, name, inputs, len(inputs), out, when=when, group=group)


def or_gate(g: Graph, name: str, inputs: Sequence[Literal_], out: Dim, *, when: When = (),
            group: bool = True) -> list[Rule]:
    """out = 1 iff some input literal holds: a constant rule adds 1 and "all fail" subtracts it.
    Exact: input dims 0/1, distinct. Cost: 2 neurons for n >= 2 inputs (1 for n = 1, 0 for
    none), 1 layer."""
    return threshold(g, name, inputs, 1, out, when=when, group=group)


# --- selection, copy, clear -------------------------------------------------------------------


def copy(g: Graph, name: str, src: str, dst: str, *, invert: bool = False, when: When = (),
         group: bool = True) -> list[Rule]:
    """dst = src (or NOT src, bit by bit), e.g. to hand a value to a later stage or to negate it.
    Exact: src dims 0/1 (a word stays a valid word; NOT of a word is not a word).
    Cost: n neurons (n = src size), 1 layer."""
    n = _feature(g, src).size
    _feature(g, dst, size=n)
    rules = [Rule(tuple(when) + (((src, i), 0 if invert else 1),), (((dst, i), 1),),
                  f"{name}[{i}]") for i in range(n)]
    return _finish(g, name, rules, group)


def clear(feature: Feature) -> list[Rule]:
    """Rules that subtract a feature from its own dims, leaving them 0 for a later feature.

    Why: residual dims are the scarce resource; a dead feature's dims are reused once cleared.
    The rules read and write the same dims, which is exact because a group reads the values
    before it. Exact: the dims hold 0/1 (plus the carrier of a memory read, which stays).
    Cost: one neuron per dim, whatever the code (one-hot n, bits n, word 4 * digits), 1 layer.
    """
    f = feature.name
    return [Rule((((f, i), 1),), (((f, i), -1),), f"clear {f}[{i}]") for i in range(feature.size)]


def mux(g: Graph, name: str, select: str, inputs: Sequence[str], out: str, *, when: When = (),
        group: bool = True) -> list[Rule]:
    """out = inputs[i] for the hot dim i of `select`; all zero when none is hot.

    Why: operand and result selection (register ports, forwarding, per-op results).
    Exact: `select` one-hot with one dim per input (at most one set), inputs 0/1 and of out's
    size; word inputs give a valid word iff some dim of `select` is set.
    Cost: m * n neurons (m inputs of n dims), 1 layer.
    """
    _feature(g, select, "onehot", len(inputs))
    n = _feature(g, out).size
    rules = []
    for i, src in enumerate(inputs):
        _feature(g, src, size=n)
        rules += [Rule(tuple(when) + (((select, i), 1), ((src, j), 1)), (((out, j), 1),),
                       f"{name}:{i}[{j}]") for j in range(n)]
    return _finish(g, name, rules, group)


def choose(g: Graph, name: str, cond: Literal_, a: str, b: str, out: str, *, when: When = (),
           group: bool = True) -> list[Rule]:
    """out = a if `cond` holds else b (the ISA's `sel`, or a predicated write).
    Exact: cond's dim and a, b 0/1, a, b of out's size. Cost: 2n neurons, 1 layer."""
    n = _feature(g, out).size
    _feature(g, a, size=n)
    _feature(g, b, size=n)
    w = tuple(when)
    rules = [Rule(w + (cond, ((a, j), 1)), (((out, j), 1),), f"{name}:a[{j}]") for j in range(n)]
    rules += [Rule(w + (negate(cond), ((b, j), 1)), (((out, j), 1),), f"{name}:b[{j}]")
              for j in range(n)]
    return _finish(g, name, rules, group)


# --- conversions ------------------------------------------------------------------------------


def onehot_to_bits(g: Graph, name: str, src: str, out: str, *, when: When = (),
                   group: bool = True) -> list[Rule]:
    """out = binary index of the hot dim of src (0 when none is hot).
    Exact: src one-hot of m <= 2^n dims (n = out bits). Cost: m - 1 neurons, 1 layer."""
    m, n = _feature(g, src, "onehot").size, _feature(g, out).size
    if m > 1 << n:
        raise ValueError(f"{name}: {m} values do not fit {n} bits")
    rules = [Rule(tuple(when) + (((src, v), 1),),
                  _inc([(out, b) for b in range(n) if v >> b & 1]), f"{name}:{v}")
             for v in range(1, m)]
    return _finish(g, name, rules, group)


def bits_to_onehot(g: Graph, name: str, src: str, out: str, *, when: When = (),
                   group: bool = True) -> list[Rule]:
    """out = one-hot of the unsigned value of src; a value >= m (out size) sets nothing.
    Exact: src dims 0/1; out is exactly one-hot when m = 2^n. Cost: m neurons, 1 layer."""
    n, m = _feature(g, src).size, _feature(g, out, "onehot").size
    rules = [Rule(tuple(when) + tuple(((src, b), v >> b & 1) for b in range(n)),
                  (((out, v), 1),), f"{name}:{v}") for v in range(min(m, 1 << n))]
    return _finish(g, name, rules, group)


def word_to_onehot(g: Graph, name: str, src: str, out: str, *, when: When = (),
                   group: bool = True) -> list[Rule]:
    """out = one-hot of the value of a narrow word (an address, a small field); values >= m
    (out size) set nothing, and so does an all-zero word (a read of nothing).
    Exact: src a valid or all-zero word of d digits. Cost: m <= 4^d neurons, 1 layer."""
    d, m = _digits(g, src), _feature(g, out, "onehot").size
    rules = [Rule(tuple(when) + tuple(((src, 4 * k + (v >> 2 * k & 3)), 1) for k in range(d)),
                  (((out, v), 1),), f"{name}:{v}") for v in range(min(m, 4 ** d))]
    return _finish(g, name, rules, group)


def onehot_to_word(g: Graph, name: str, src: str, out: str, *, when: When = (),
                   group: bool = True) -> list[Rule]:
    """out = the word of the hot index of src (to store it, or to feed word arithmetic).
    Exact: src one-hot of m <= 4^d dims; out is a valid word iff one dim is set (else all zero).
    Cost: m neurons, 1 layer."""
    m, d = _feature(g, src, "onehot").size, _digits(g, out)
    if m > 4 ** d:
        raise ValueError(f"{name}: {m} values do not fit {d} digits")
    rules = [Rule(tuple(when) + (((src, v), 1),),
                  _inc([(out, 4 * k + (v >> 2 * k & 3)) for k in range(d)]), f"{name}:{v}")
             for v in range(m)]
    return _finish(g, name, rules, group)


def word_to_bits(g: Graph, name: str, src: str, out: str, *, when: When = (),
                 group: bool = True) -> list[Rule]:
    """out = the value of a word in binary, keeping the low n bits (n = out size <= 2d).
    Exact: src a valid or all-zero word (all zero gives 0). Cost: 3 neurons per digit that
    reaches out (digit value 0 writes nothing), 1 layer."""
    d, n = _digits(g, src), _feature(g, out).size
    rules = []
    for k in range(d):
        for v in (1, 2, 3):
            dims = [(out, 2 * k + b) for b in (0, 1) if v >> b & 1 and 2 * k + b < n]
            if dims:
                rules.append(Rule(tuple(when) + (((src, 4 * k + v), 1),), _inc(dims),
                                  f"{name}:{k}={v}"))
    return _finish(g, name, rules, group)


def bits_to_word(g: Graph, name: str, src: str, out: str, *, when: When = (),
                 group: bool = True) -> list[Rule]:
    """out = the word of an unsigned binary value (digits beyond the bits are 0).
    Exact: src dims 0/1, n <= 2d. Cost: 4 neurons per digit holding two bits, 2 per digit
    holding one, plus 1 for all digits above the bits; 1 layer. Always a valid word."""
    n, d = _feature(g, src).size, _digits(g, out)
    if n > 2 * d:
        raise ValueError(f"{name}: {n} bits do not fit {d} digits")
    w, rules = tuple(when), []
    for k in range((n + 1) // 2):
        bits = [b for b in (2 * k, 2 * k + 1) if b < n]
        for v in range(1 << len(bits)):
            lits = tuple(((src, b), v >> i & 1) for i, b in enumerate(bits))
            rules.append(Rule(w + lits, (((out, 4 * k + v), 1),), f"{name}:{k}={v}"))
    high = [(out, 4 * k) for k in range((n + 1) // 2, d)]
    if high:
        rules.append(Rule(w, _inc(high), f"{name}:high"))
    return _finish(g, name, rules, group)


# --- arithmetic -------------------------------------------------------------------------------


def add_onehot(g: Graph, name: str, a: str, b: str, out: str, *, when: When = (),
               group: bool = True) -> list[Rule]:
    """out = (a + b) mod m over one-hot values (m = out size): a lookup table.
    Exact: a, b one-hot; out is one-hot iff both are set (else all zero).
    Cost: |a| * |b| neurons, 1 layer."""
    ma, mb = _feature(g, a, "onehot").size, _feature(g, b, "onehot").size
    m = _feature(g, out, "onehot").size
    rules = [Rule(tuple(when) + (((a, i), 1), ((b, j), 1)), (((out, (i + j) % m), 1),),
                  f"{name}:{i}+{j}") for i in range(ma) for j in range(mb)]
    return _finish(g, name, rules, group)


def _carry_terms(gen: Callable[[int], When], prop: Callable[[int], Literal_],
                 carry_in: CarryIn, i: int) -> list[When]:
    """Mutually exclusive conjunctions, one of which holds iff a carry enters position i:
    "position j generates (gen(j): literals) and j+1..i-1 propagate" (generate and propagate
    never both hold, so at most one j works), plus the carry-in propagated through 0..i-1."""
    props = tuple(prop(k) for k in range(i))
    terms = [t + props for t in (carry_in if isinstance(carry_in, list) else
                                 [] if carry_in is False else [()] if carry_in is True else
                                 [(carry_in,)])]
    for j in range(i):
        terms.append(tuple(gen(j)) + tuple(prop(k) for k in range(j + 1, i)))
    return terms


def add_bits(g: Graph, name: str, a: str, b: str, out: str, *,
             carry_in: CarryIn = False, carry_out: Dim | None = None,
             invert_b: bool | Literal_ = False, when: When = (),
             all_propagate: Dim | None = None, group: bool = True) -> list[Rule]:
    """out = (a + b + carry_in) mod 2^n on n-bit values; `invert_b` adds NOT b instead (with
    carry_in=True that is a - b) — True, or a literal that chooses per token (add or subtract
    with one adder). Optional carry_out (for a - b: 1 iff a >= b unsigned) and all_propagate
    (every bit propagates: for a - b, a == b).

    Layout (two layers, carry lookahead): layer 1 writes propagate p_j = a_j XOR b_j per bit
    into ``{name}.p``; layer 2 writes out_i = p_i XOR c_i, where the carry c_i is a sum of
    mutually exclusive terms (g_j AND p_{j+1..i-1}), as p_i + sum(term AND NOT p_i) -
    sum(term AND p_i). Generate is read off a and p in layer 2 — g_j = a_j AND NOT p_j (where
    p_j is 0, b_j equals a_j) — so the adder holds n dims between its layers, not 2n (a
    usually lives on for the other units of its slot).
    Exact: a, b n bits of 0/1, a carry_in literal's dim 0/1 (terms: at most one holds), out n
    bits.
    Cost: layer 1: 2n neurons (4n with a literal invert_b); layer 2: n^2 (+2n per carry-in
    term, literal or constant), +n for carry_out (+1 per carry-in term), +1 for all_propagate
    — n = 32: 64 + 1024, n = 64: 128 + 4096. 2 layers.
    """
    n = _feature(g, a).size
    _feature(g, b, size=n)
    _feature(g, out, size=n)
    p = f"{name}.p"
    g.feature(p, n, "bits")
    # (extra literals, b's literal value for an effective 1, for an effective 0)
    modes = [((), 0, 1) if invert_b is True else ((), 1, 0)] if isinstance(invert_b, bool) \
        else [((negate(invert_b),), 1, 0), ((invert_b,), 0, 1)]
    g.rule_group(p, [r for j in range(n) for m, (x, b1, b0) in enumerate(modes) for r in (
        Rule(x + (((a, j), 1), ((b, j), b0)), (((p, j), 1),), f"{p}:{j}a.{m}"),
        Rule(x + (((a, j), 0), ((b, j), b1)), (((p, j), 1),), f"{p}:{j}b.{m}"))])
    w = tuple(when)

    def gen(j: int) -> When:
        return ((a, j), 1), ((p, j), 0)

    def prop(j: int) -> Literal_:
        return ((p, j), 1)

    rules = []
    for i in range(n):
        rules.append(Rule(w + (prop(i),), (((out, i), 1),), f"{name}:p{i}"))
        for t, term in enumerate(_carry_terms(gen, prop, carry_in, i)):
            rules.append(Rule(w + term + (negate(prop(i)),), (((out, i), 1),), f"{name}:{i}c{t}"))
            rules.append(Rule(w + term + (prop(i),), (((out, i), -1),), f"{name}:{i}c{t}~"))
    if carry_out is not None:
        rules += [Rule(w + term, ((carry_out, 1),), f"{name}:cout{t}")
                  for t, term in enumerate(_carry_terms(gen, prop, carry_in, n))]
    if all_propagate is not None:
        rules.append(Rule(w + tuple(prop(j) for j in range(n)), ((all_propagate, 1),),
                          f"{name}:allp"))
    return _finish(g, name, rules, group)


def sub_bits(g: Graph, name: str, a: str, b: str, out: str, *, borrow_in: Literal_ | None = None,
             no_borrow: Dim | None = None, when: When = (), group: bool = True) -> list[Rule]:
    """out = (a - b - borrow_in) mod 2^n as a + NOT b + 1 (``add_bits`` with invert_b); the
    optional no_borrow output is 1 iff a >= b (+ borrow_in), unsigned. Exact and cost: as
    ``add_bits`` with a carry-in (the constant 1 or NOT borrow_in): layer 2 n^2 + 2n."""
    cin: bool | Literal_ = True if borrow_in is None else negate(borrow_in)
    return add_bits(g, name, a, b, out, carry_in=cin, carry_out=no_borrow, invert_b=True,
                    when=when, group=group)


def add_words(g: Graph, name: str, a: str, b: str, out: str, *,
              carry_in: bool | Literal_ = False, carry_out: Dim | None = None,
              invert_b: bool = False, when: When = (), group: bool = True) -> list[Rule]:
    """out = (a + b + carry_in) mod 4^d on words of d base-4 digits, the code memory reads
    return (so register values need no conversion); `invert_b` uses 3 - digit (NOT b), so
    carry_in=True, invert_b=True is a - b.

    Layout (two layers): layer 1 maps each digit pair to its sum mod 4 (``{name}.s``, a word)
    and to generate (sum >= 4) / propagate (sum = 3) flags (``{name}.gp``); layer 2 rotates
    each sum digit by its carry, a sum of mutually exclusive lookahead terms: out[v] = s[v]
    minus, per firing term, s[v] moved to v+1.
    Exact: a, b valid words of d digits (an all-zero word gives garbage), a carry_in literal's
    dim 0/1. Cost: layer 1: 16d neurons; layer 2: 2d^2 + 2d (+4d with a carry-in), +d for
    carry_out (+1 with a carry-in) — d = 16 (32 bits): 256 + 544. 2 layers.
    """
    d = _digits(g, a)
    _feature(g, b, "word", 4 * d)
    _feature(g, out, "word", 4 * d)
    s, gp = f"{name}.s", f"{name}.gp"
    g.feature(s, 4 * d, "word")
    g.feature(gp, 2 * d, "bits")
    first = []
    for k in range(d):
        for x in range(4):
            for y in range(4):
                total = x + (3 - y if invert_b else y)
                deltas = [((s, 4 * k + total % 4), 1)]
                if total >= 4:
                    deltas.append(((gp, 2 * k), 1))
                elif total == 3:
                    deltas.append(((gp, 2 * k + 1), 1))
                first.append(Rule((((a, 4 * k + x), 1), ((b, 4 * k + y), 1)), tuple(deltas),
                                  f"{name}.s:{k}:{x}+{y}"))
    g.rule_group(f"{name}.s", first)
    w = tuple(when)

    def gen(j: int) -> When:
        return (((gp, 2 * j), 1),)

    def prop(j: int) -> Literal_:
        return ((gp, 2 * j + 1), 1)

    rules = []
    for k in range(d):
        rules += [Rule(w + (((s, 4 * k + v), 1),), (((out, 4 * k + v), 1),), f"{name}:{k}={v}")
                  for v in range(4)]
        for t, term in enumerate(_carry_terms(gen, prop, carry_in, k)):
            rules += [Rule(w + term + (((s, 4 * k + v), 1),),
                           (((out, 4 * k + v), -1), ((out, 4 * k + (v + 1) % 4), 1)),
                           f"{name}:{k}={v}c{t}") for v in range(4)]
    if carry_out is not None:
        rules += [Rule(w + term, ((carry_out, 1),), f"{name}:cout{t}")
                  for t, term in enumerate(_carry_terms(gen, prop, carry_in, d))]
    return _finish(g, name, rules, group)


def increment(g: Graph, name: str, a: str, out: str, *, carry_out: Dim | None = None,
              when: When = (), group: bool = True) -> list[Rule]:
    """out = (a + 1) mod 2^n: bit i flips iff all lower bits are 1, as a_i + t - 2 a_i t with
    t = "all lower bits 1". Exact: a 0/1. Cost: 3n - 2 neurons (+1 carry_out), 1 layer."""
    n = _feature(g, a).size
    _feature(g, out, size=n)
    w, rules = tuple(when), []
    for i in range(n):
        ones = tuple(((a, j), 1) for j in range(i))
        if i:
            rules.append(Rule(w + (((a, i), 1),), (((out, i), 1),), f"{name}:{i}"))
            rules.append(Rule(w + ones + (((a, i), 1),), (((out, i), -1),), f"{name}:{i}c1"))
        rules.append(Rule(w + ones + (((a, i), 0),), (((out, i), 1),), f"{name}:{i}c0"))
    if carry_out is not None:
        rules.append(Rule(w + tuple(((a, j), 1) for j in range(n)), ((carry_out, 1),),
                          f"{name}:cout"))
    return _finish(g, name, rules, group)


def increment_word(g: Graph, name: str, a: str, out: str, *, carry_out: Dim | None = None,
                   when: When = (), group: bool = True) -> list[Rule]:
    """out = (a + 1) mod 4^d on a word: digit k moves up by one iff all lower digits are 3.
    Exact: a valid word. Cost: 8d - 4 neurons (+1 carry_out), 1 layer."""
    d = _digits(g, a)
    _feature(g, out, "word", 4 * d)
    w, rules = tuple(when), []
    for k in range(d):
        threes = tuple(((a, 4 * j + 3), 1) for j in range(k))
        for v in range(4):
            here = ((a, 4 * k + v), 1)
            if k:
                rules.append(Rule(w + (here,), (((out, 4 * k + v), 1),), f"{name}:{k}={v}"))
                rules.append(Rule(w + threes + (here,),
                                  (((out, 4 * k + v), -1), ((out, 4 * k + (v + 1) % 4), 1)),
                                  f"{name}:{k}={v}c"))
            else:
                rules.append(Rule(w + (here,), (((out, (v + 1) % 4), 1),), f"{name}:0={v}"))
    if carry_out is not None:
        rules.append(Rule(w + tuple(((a, 4 * j + 3), 1) for j in range(d)), ((carry_out, 1),),
                          f"{name}:cout"))
    return _finish(g, name, rules, group)


_RELATIONS = ("lt", "le", "eq", "ne", "gt", "ge")


def compare(g: Graph, name: str, a: str, b: str, *, signed: bool = False, when: When = (),
            group: bool = True, **outs: Dim) -> list[Rule]:
    """Relations of two values: any of lt, le, eq, ne, gt, ge (keyword -> output dim), unsigned
    or two's complement (`signed`). Works on two bits features or two words.

    Layout (two layers): layer 1 writes, per bit (or digit) j, lt_j and gt_j into ``{name}.d``;
    layer 2: a < b iff some lt_j holds with every higher position equal — one exclusive term
    per j; eq is "all positions equal". A signed compare swaps the order of the top bit (top
    digit: 2, 3 are -2, -1).
    Exact: a, b of one size, bits 0/1 or valid words. Cost: layer 1: 2 neurons per bit / 12
    per digit; layer 2: n (if lt, le or ne) + n (if gt, ge or ne) + 1 (if eq, le or ge) for n
    positions — n = 32 bits: 64 + 65. 2 layers.
    """
    fa = _feature(g, a)
    _feature(g, b, fa.code, fa.size)
    if bad := set(outs) - set(_RELATIONS):
        raise ValueError(f"compare {name}: unknown relations {sorted(bad)}")
    word = fa.code == "word"
    n = fa.size // 4 if word else fa.size
    vals = 4 if word else 2

    def lit(f: str, j: int, x: int) -> Literal_:
        return ((f, 4 * j + x), 1) if word else ((f, j), x)

    def key(j: int, x: int) -> int:
        return x - vals if signed and j == n - 1 and 2 * x >= vals else x

    dd = f"{name}.d"
    g.feature(dd, 2 * n, "bits")
    first = []
    for j in range(n):
        for x in range(vals):
            for y in range(vals):
                if key(j, x) != key(j, y):
                    side = 0 if key(j, x) < key(j, y) else 1
                    first.append(Rule((lit(a, j, x), lit(b, j, y)), (((dd, 2 * j + side), 1),),
                                      f"{dd}:{j}:{x}{y}"))
    g.rule_group(dd, first)
    w = tuple(when)

    def same_above(j: int) -> tuple[Literal_, ...]:
        return tuple(((dd, 2 * k + s), 0) for k in range(j + 1, n) for s in (0, 1))

    rules = []
    for side, rels in ((0, ("lt", "le", "ne")), (1, ("gt", "ge", "ne"))):
        targets = [outs[r] for r in rels if r in outs]
        if targets:
            rules += [Rule(w + (((dd, 2 * j + side), 1),) + same_above(j), _inc(targets),
                           f"{name}:{rels[0]}{j}") for j in range(n)]
    targets = [outs[r] for r in ("eq", "le", "ge") if r in outs]
    if targets:
        rules.append(Rule(w + same_above(-1), _inc(targets), f"{name}:eq"))
    return _finish(g, name, rules, group)


def equals(g: Graph, name: str, a: str, b: str, out: Dim, *, when: When = (),
           group: bool = True) -> list[Rule]:
    """out = 1 iff a == b (bits or words): ``compare`` with only eq.
    Cost: 2n + 1 neurons for n bits (12d + 1 for d digits), 2 layers."""
    return compare(g, name, a, b, when=when, group=group, eq=out)


def bitwise(g: Graph, name: str, a: str, b: str, out: str, op: Callable[[int, int], int], *,
            when: When = (), group: bool = True) -> list[Rule]:
    """out = op(a, b) bit by bit (op on ints, e.g. operator.and_ / or_ / xor), on bits or on
    words (op applied to each pair of 2-bit digits).
    Exact: a, b, out of one code and size; bits 0/1 or valid words.
    Cost: bits: per bit the cheaper of its truth table's 1-rows or 1 + its 0-rows (<= 2
    neurons: and 1, or 2, xor 2); words: 16 neurons per digit. 1 layer."""
    fa = _feature(g, a)
    _feature(g, b, fa.code, fa.size)
    _feature(g, out, fa.code, fa.size)
    w, rules = tuple(when), []
    if fa.code == "word":
        for k in range(fa.size // 4):
            rules += [Rule(w + (((a, 4 * k + x), 1), ((b, 4 * k + y), 1)),
                           (((out, 4 * k + (op(x, y) & 3)), 1),), f"{name}:{k}:{x}{y}")
                      for x in range(4) for y in range(4)]
        return _finish(g, name, rules, group)
    ones = [(x, y) for x in (0, 1) for y in (0, 1) if op(x, y) & 1]
    zeros = [(x, y) for x in (0, 1) for y in (0, 1) if not op(x, y) & 1]
    for j in range(fa.size):
        dim = (out, j)
        if len(ones) <= 1 + len(zeros):
            rules += [Rule(w + (((a, j), x), ((b, j), y)), ((dim, 1),), f"{name}[{j}]:{x}{y}")
                      for x, y in ones]
        else:
            rules.append(Rule(w, ((dim, 1),), f"{name}[{j}]:1"))
            rules += [Rule(w + (((a, j), x), ((b, j), y)), ((dim, -1),), f"{name}[{j}]:~{x}{y}")
                      for x, y in zeros]
    return _finish(g, name, rules, group)


def shift(g: Graph, name: str, a: str, amount: str, out: str, *, right: bool = False,
          arithmetic: bool = False, when: When = (), group: bool = True) -> list[Rule]:
    """out = a << s, a >> s (logical) or a >> s (arithmetic: sign fill) for the hot dim s of a
    one-hot `amount`; amounts >= n give 0 (or all sign bits), no hot dim gives 0.
    Exact: amount one-hot, a 0/1 of out's size. Cost: one neuron per (amount, source bit) whose
    bit lands in out: n(n+1)/2 for amounts 0..n-1, +1 per larger amount if arithmetic; 1 layer."""
    n = _feature(g, a).size
    _feature(g, out, size=n)
    m = _feature(g, amount, "onehot").size
    w, rules = tuple(when), []
    for s in range(m):
        for j in range(n):
            if right:
                dims = [i for i in range(n) if i + s == j or (arithmetic and j == n - 1
                                                              and i + s >= n)]
            else:
                dims = [j + s] if j + s < n else []
            if dims:
                rules.append(Rule(w + (((amount, s), 1), ((a, j), 1)),
                                  _inc([(out, i) for i in dims]), f"{name}:{s}:{j}"))
    return _finish(g, name, rules, group)


def _step_digits(count: str, k: int, top: int, digits: Callable[[int], list[tuple[Dim, int]]],
                 lits: tuple = ()) -> list[Rule]:
    """Steps on the integer in (count, k) for m = 1..top: each adds the change of digits(m)
    over digits(m - 1), so together they write digits(value) (a count rule pair per step)."""
    rules = []
    for m in range(1, top + 1):
        new, old = dict(digits(m)), dict(digits(m - 1))
        deltas = tuple((d, new.get(d, 0) - old.get(d, 0)) for d in sorted(set(new) | set(old))
                       if new.get(d, 0) != old.get(d, 0))
        if deltas:
            rules.append(Rule(lits, deltas, f"{count}[{k}]>={m}", count=((count, k), m)))
    return rules


def pack(g: Graph, name: str, a: str, out: str, *, digit_bits: int = 4) -> None:
    """out (one count dim per `digit_bits` bits of a) += the value of those bits: a wide
    feature held in few dims while it waits for a late reader (``unpack`` gives the bits back).
    Exact: a 0/1, out 0; 2**digit_bits - 1 <= COUNT_MAX. Cost: n neurons, 1 layer."""
    g.rule_group(name, pack_rules(g, a, out, digit_bits=digit_bits))


def pack_rules(g: Graph, a: str, out: str, *, when: When = (),
               digit_bits: int = 4) -> list[Rule]:
    """``pack``'s rules, each also needing `when`: for a group that packs a value only when
    it is needed (an operand that waits, for one opcode) among other rules."""
    n = _feature(g, a).size
    if _feature(g, out).size != -(-n // digit_bits) or (1 << digit_bits) - 1 > nx.COUNT_MAX:
        raise ValueError(f"pack {a}: {out} needs one dim per {digit_bits} bits of {a}")
    return [Rule(tuple(when) + (((a, i), 1),), (((out, i // digit_bits), 1 << i % digit_bits),))
            for i in range(n)]


def unpack(g: Graph, name: str, packed: str, out: str, *, digit_bits: int = 4) -> None:
    """out (bits) += the bits of every digit of `packed` (``pack``'s output): count steps.
    Exact: each digit below 2**digit_bits; out 0. Cost: 2 (2**digit_bits - 1) neurons per
    digit, 1 layer."""
    g.rule_group(name, unpack_rules(g, packed, out, digit_bits=digit_bits))


def unpack_rules(g: Graph, packed: str, out: str, *, when: When = (),
                 digit_bits: int = 4) -> list[Rule]:
    """``unpack``'s rules, each also needing `when`: for a group that adds a packed value's
    bits among other rules (a patch that reads a packed operand)."""
    n = _feature(g, out).size
    rules = []
    for k in range(_feature(g, packed).size):
        bits = range(k * digit_bits, min(n, (k + 1) * digit_bits))
        rules += _step_digits(packed, k, (1 << len(bits)) - 1,
                              lambda v, bits=bits: [((out, i), 1) for j, i in enumerate(bits)
                                                    if v >> j & 1], tuple(when))
    return rules


def popcount(g: Graph, name: str, a: str, out: str, *, when: When = ()) -> None:
    """out (bits) += the number of set bits of a: each set bit adds 1 to a count dim
    ``{name}.n`` (layer 1), count steps write its binary digits (layer 2).
    Exact: a 0/1 of n <= COUNT_MAX bits, out 0 where it is written (wide enough for n).
    Cost: n | 2n neurons. 2 layers."""
    n = _feature(g, a).size
    count = f"{name}.n"
    g.feature(count, 1)
    w = tuple(when)
    g.rule_group(count, [Rule(w + (((a, i), 1),), (((count, 0), 1),)) for i in range(n)])
    width = _feature(g, out).size
    g.rule_group(name, _step_digits(count, 0, n, lambda v: [((out, d), 1) for d in range(width)
                                                             if v >> d & 1]))


def mul_bits(g: Graph, name: str, a: str, b: str, out: str, *, addend: str | None = None,
             when: When = ()) -> None:
    """out = (a * b [+ addend]) mod 2^n on n-bit values (the low half of the product):
    ``mul_columns`` (four layers) into two numbers, then a carry-lookahead ``add_bits`` of them
    (two layers). Exact as ``mul_columns``. Cost for n = 32: 528 (+32) | 1120 | 384 | 192 | 96 |
    1024 neurons."""
    n = _feature(g, a).size
    x, y = f"{name}.x", f"{name}.y"
    g.feature(x, n)
    g.feature(y, n)
    mul_columns(g, name, a, b, x, y, addend=addend, when=when)
    _feature(g, out, size=n)
    add_bits(g, f"{name}.add", x, y, out)


@dataclass(frozen=True)
class HighHalf:
    """Where the 1-dim flag ``when`` is 1, ``mul_columns`` hands over the high half of the
    2n-bit product instead of the low one, signed (two's complement) where the flag
    ``signed`` is 1 too."""

    when: str
    signed: str


CARRY_BLOCK = 4
"""Low columns per block of the high half's carry: a block's value (two numbers' digits) is at
most 2 * (2^4 - 1) = 30 <= numerics.COUNT_MAX."""


def mul_columns(g: Graph, name: str, a: str, b: str, x: str, y: str, *,
                addend: str | None = None, when: When = (),
                high: HighHalf | None = None) -> list[When]:
    """Two n-bit numbers x, y with x + y = a * b [+ addend] (mod 2^n), for an adder to finish
    (so a machine slot's adder can serve both its multiplies and its additions; x and y may have
    other writers, e.g. the adder's operands when the slot does not multiply). With `high`, on
    request x + y + carry = the high n bits of the product instead, where carry is 1 iff one
    of the returned terms (mutually exclusive conjunctions) holds: the adder's carry-in.

    Layout (four layers): 1. partial products a_i AND b_j (and the addend's bits) summed into
    column counts ``{name}.c1`` (integers <= n + 3); 2. each column's binary digits, read off
    by count steps, summed into the columns they belong to (``.c2``, <= 6); 3. again (``.c3``,
    <= 3); 4. digit 0 of each column goes to x, digit 1 to y one column up. With `high` the
    columns run to 2n - 1, the high ones counting only when the high half is asked for; then
    the low digits are summed per block of CARRY_BLOCK columns (``.v``), and a fifth layer
    (beside the adder's first) reads each block's generate (value >= 2^4) and propagate (value
    = 2^4 - 1) off it (``.gp``), so the carry terms "block j generates, the blocks above
    propagate" join the adder's second layer and cost no layer of their own. A signed product
    adds the two's complement corrections -a * b31 * 2^n - b * a31 * 2^n = ((NOT b) AND a31)
    + a31 + ((NOT a) AND b31) + b31 in the high half (mod 2^n).
    Exact: a, b, addend 0/1 of n bits, n + 3 <= COUNT_MAX. Cost for n = 32: 528 (+32) | 1120 |
    384 | 192 neurons (count steps are neuron pairs); with `high` 1090 | 2254 | 762 | 574 | 32,
    and 2 * 8 * n in the adder's second layer."""
    n = _feature(g, a).size
    _feature(g, b, size=n)
    _feature(g, x, size=n)
    _feature(g, y, size=n)
    cols = 2 * n if high else n
    c1, c2, c3 = (f"{name}.{t}" for t in ("c1", "c2", "c3"))
    for f in (c1, c2, c3):
        g.feature(f, cols)
    w = tuple(when)
    hi = (((high.when, 0), 1),) if high else ()
    ones = [Rule(w + (hi if k >= n else ()) + (((a, i), 1), ((b, k - i), 1)), (((c1, k), 1),),
                 f"{c1}:{i},{k - i}")
            for k in range(cols) for i in range(max(0, k - n + 1), min(k, n - 1) + 1)]
    if addend is not None:
        _feature(g, addend, size=n)
        ones += [Rule(w + (((addend, k), 1),), (((c1, k), 1),), f"{c1}:+{k}") for k in range(n)]
    if high:
        sgn = w + (((high.signed, 0), 1),)
        for u, v in ((a, b), (b, a)):
            ones.append(Rule(sgn + (((u, n - 1), 1),), (((c1, n), 1),), f"{c1}:{u}-"))
            ones += [Rule(sgn + (((u, n - 1), 1), ((v, j), 0)), (((c1, n + j), 1),),
                          f"{c1}:{u}-{j}") for j in range(n)]
    g.rule_group(c1, ones)
    top = [sum(r.deltas[0][0] == (c1, k) for r in ones) for k in range(cols)]

    def spread(dst: str, k: int) -> Callable[[int], list[tuple[Dim, int]]]:
        return lambda v: [((dst, k + d), 1) for d in range(v.bit_length())
                          if v >> d & 1 and k + d < cols]

    def carried(tops: list[int]) -> list[int]:
        """Bounds on the next columns: one digit from each column below that reaches them."""
        return [sum(1 for j in range(k + 1) if tops[j] >> (k - j) > 0) for k in range(cols)]

    g.rule_group(c2, [r for k in range(cols) for r in _step_digits(c1, k, top[k], spread(c2, k))])
    top = carried(top)
    g.rule_group(c3, [r for k in range(cols) for r in _step_digits(c2, k, top[k], spread(c3, k))])
    top = carried(top)
    assert max(top) <= 3, top
    blocks = f"{name}.v"

    def split(k: int, high_half: bool) -> Callable[[int], list[tuple[Dim, int]]]:
        """Column k's digit 0 at column k, digit 1 at k + 1: the low half's to x, y (or to
        the blocks' values, for the high half), the high half's to x, y."""
        def to(v: int) -> list[tuple[Dim, int]]:
            out: dict[Dim, int] = {}
            for f, col in ((0, k), (1, k + 1)):
                if not v >> f & 1 or col >= (cols if high_half else n):
                    continue
                dim = (((x, y)[f], col - n) if col >= n else
                       (blocks, col // CARRY_BLOCK) if high_half else ((x, y)[f], col))
                out[dim] = out.get(dim, 0) + (1 << col % CARRY_BLOCK if dim[0] == blocks else 1)
            return list(out.items())
        return to

    if not high:
        g.rule_group(f"{name}.xy", [r for k in range(n)
                                    for r in _step_digits(c3, k, top[k], split(k, False))])
        return []
    nb = -(-n // CARRY_BLOCK)
    gp = f"{name}.gp"
    g.feature(blocks, nb)
    g.feature(gp, 2 * nb)
    g.rule_group(f"{name}.xy", [
        r for k in range(cols) for mode in (0, 1) if k < n or mode
        for r in _step_digits(c3, k, top[k], split(k, bool(mode)), (((high.when, 0), mode),))])
    full = [1 << min(CARRY_BLOCK, n - CARRY_BLOCK * j) for j in range(nb)]  # 2^(its columns)
    g.rule_group(gp, [r for j in range(nb) for r in (
        Rule((), (((gp, 2 * j + 1), 1),), f"{gp}:p{j}", count=((blocks, j), full[j] - 1)),
        Rule((), (((gp, 2 * j + 1), -1), ((gp, 2 * j), 1)), f"{gp}:g{j}",
             count=((blocks, j), full[j])))])
    return [(((gp, 2 * j), 1),) + tuple(((gp, 2 * m + 1), 1) for m in range(j + 1, nb))
            for j in range(nb)]
