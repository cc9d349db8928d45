"""Weight-free evaluation of a circuit graph: the reference semantics a compiled model must match.

Tokens are processed in order; within a token, rule groups and memory banks run in dependency
order. Memory banks persist across tokens; a read sees a write of the same token (GDN reads after
it writes); a write part with a tap takes that feature's value in an earlier token (zeros before
the first token, as the conv1d pads). The evaluator also checks each node's exactness condition
(one-hot addresses, valid words, 0/1 dims) and raises on a violation, naming the node.
"""

from __future__ import annotations

from graphlib import TopologicalSorter

import numpy as np

from qgpu.compiler import numerics
from qgpu.compiler.graph import Addr, Address, Graph, Write, addr_features

Values = dict[str, list[int]]


class CircuitError(ValueError):
    """A node's exactness condition does not hold for some token."""


def node_order(g: Graph) -> list[tuple[str, str]]:
    """Rule groups ("rules", name) and banks ("bank", name) in dependency order."""
    return list(TopologicalSorter(node_deps(g)).static_order())


def node_deps(g: Graph) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """The nodes each node must run after: every writer of every feature it reads (a feature
    may have several writers when it is ``accumulate``; a group that reads and adds to one
    runs after its other writers)."""
    producers: dict[str, list[tuple[str, str]]] = {}
    for name, outs in g.rule_outputs.items():
        for f in outs:
            producers.setdefault(f, []).append(("rules", name))
    for r in g.reads:
        producers.setdefault(r.out, []).append(("bank", r.bank))
    deps: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for name, ins in g.rule_inputs.items():
        me = ("rules", name)
        deps[me] = {p for f in ins for p in producers.get(f, []) if p != me}
    for b in g.banks:
        me = ("bank", b)
        ins = g.write_inputs(b) | {f for r in g.reads if r.bank == b for f in addr_features(r.addr)}
        deps[me] = {p for f in ins for p in producers.get(f, []) if p != me}
    return deps


class _Group:
    """A rule group compiled to index arrays over the flat value vector (one numpy pass per
    token instead of a Python loop over its rules)."""

    def __init__(self, name: str, rules: list, at: dict[tuple[str, int], int], one: int,
                 zero: int) -> None:
        self.name = name
        width = max([len(r.literals) for r in rules] + [1])
        self.lit = np.full((len(rules), width), one, dtype=np.int64)
        self.want = np.ones((len(rules), width), dtype=np.int64)
        self.count = np.full(len(rules), one, dtype=np.int64)
        self.minus = np.full(len(rules), zero, dtype=np.int64)
        self.k = np.zeros(len(rules), dtype=np.int64)
        rule_of, target, delta = [], [], []
        for j, rule in enumerate(rules):
            for m, (d, want) in enumerate(rule.literals):
                self.lit[j, m], self.want[j, m] = at[d], want
            if rule.count is not None:
                self.count[j], self.k[j] = at[rule.count[0]], rule.count[1]
            if rule.minus is not None:
                self.minus[j] = at[rule.minus]
            for d, x in rule.deltas:
                rule_of.append(j)
                target.append(at[d])
                delta.append(x)
        self.literal_dims = np.unique(self.lit)
        self.count_dims = np.unique(np.array([at[d] for r in rules for d in r.counted],
                                             dtype=np.int64))
        self.rule_of = np.array(rule_of, dtype=np.int64)
        self.target = np.array(target, dtype=np.int64)
        self.delta = np.array(delta, dtype=np.int64)


def flat_offsets(g: Graph) -> dict[str, int]:
    """Where each feature's dims start in the evaluator's flat value vector."""
    out, at = {}, 0
    for name, f in g.features.items():
        out[name], at = at, at + f.size
    return out


class Evaluator:
    """Runs a graph token by token, keeping the memory banks. Values live in one flat integer
    vector (feature dims in a row, then a constant 1 that pads rules' literal lists)."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.order = node_order(g)
        self.memory: dict[str, dict[int, list[int]]] = {b: {} for b in g.banks}
        self.history: list[np.ndarray] = []  # the last CONV_REACH tokens' values, newest last
        self.offset = flat_offsets(g)
        n = sum(f.size for f in g.features.values())
        self.size, self.one, self.zero = n + 2, n, n + 1
        self.at = {(name, i): self.offset[name] + i
                   for name, f in g.features.items() for i in range(f.size)}
        self.where = {d: fi for fi, d in self.at.items()}
        self.groups = {name: _Group(name, rules, self.at, self.one, self.zero)
                       for name, rules in g.rules.items()}

    def _get(self, v: np.ndarray, name: str) -> list[int]:
        o = self.offset[name]
        return v[o:o + self.g.features[name].size].tolist()

    def step(self, token: Values) -> Values:
        """Evaluate one token given its input features; returns every feature's value."""
        v = self.step_vector(token)
        return {name: self._get(v, name) for name in self.g.features}

    def step_vector(self, token: Values) -> np.ndarray:
        """``step`` without the dict: every feature's value in the flat vector (``offset``)."""
        g = self.g
        v = np.zeros(self.size, dtype=np.int64)
        v[self.one] = 1
        for name, x in token.items():
            if not g.features[name].token_input:
                raise CircuitError(f"{name} is not a token input")
            o = self.offset[name]
            v[o:o + g.features[name].size] = x
        for kind, name in self.order:
            if kind == "rules":
                self._rules(self.groups[name], v)
            else:
                self._bank(name, v)
        self.history = (self.history + [v])[-numerics.CONV_REACH:]
        return v

    def _rules(self, grp: _Group, v: np.ndarray) -> None:
        lit = v[grp.literal_dims]
        if (lit >> 1).any():  # some literal dim is not 0/1
            f, i = self.where[int(grp.literal_dims[np.flatnonzero(lit >> 1)[0]])]
            raise CircuitError(f"rule group {grp.name}: {f}[{i}] = {v[self.at[(f, i)]]} is not 0/1")
        cnt = v[grp.count_dims]
        bad = (cnt < 0) | (cnt > numerics.COUNT_MAX)
        if bad.any():
            f, i = self.where[int(grp.count_dims[np.flatnonzero(bad)[0]])]
            raise CircuitError(f"rule group {grp.name}: count {f}[{i}] = {v[self.at[(f, i)]]} is "
                               f"not an integer 0..{numerics.COUNT_MAX}")
        fires = (v[grp.lit] == grp.want).all(axis=1) & (v[grp.count] - v[grp.minus] >= grp.k)
        hit = fires[grp.rule_of]
        np.add.at(v, grp.target[hit], grp.delta[hit])

    def _row(self, addr: Addr, v: np.ndarray, where: str, rows: int) -> int | None:
        if isinstance(addr, Address):
            for f, i in addr.dims:
                if v[self.at[(f, i)]] not in (0, 1):
                    raise CircuitError(f"{where}: address dim {f}[{i}] = {v[self.at[(f, i)]]} "
                                       f"not 0/1")
            if addr.enable and not v[self.at[addr.enable]]:
                return None
            row = sum(int(v[self.at[d]]) << k for k, d in enumerate(addr.bits))
            return row if row < rows else None
        vals = self._get(v, addr)
        hot = [i for i, x in enumerate(vals) if x]
        if len(hot) > 1 or any(x not in (0, 1) for x in vals):
            raise CircuitError(f"{where}: address {addr} is not one-hot: {vals}")
        return hot[0] if hot else None

    def _bank(self, name: str, v: np.ndarray) -> None:
        mem, bits = self.memory[name], self.g.banks[name].code == "bits"
        rows = self.g.banks[name].rows
        for w in self.g.writes:
            if w.bank != name:
                continue
            row = self._row(w.addr, v, f"write to {name}", rows)
            if w.enable is not None:
                x = v[self.at[w.enable]]
                if x not in (0, 1):
                    raise CircuitError(f"write to {name}: enable {w.enable[0]}[{w.enable[1]}] = "
                                       f"{x} not 0/1")
                row = row if x else None
            if row is not None:
                mem[row] = self._bits_row(w, v) if bits else self._word_row(w, v)
        for r in self.g.reads:
            if r.bank == name:
                row = self._row(r.addr, v, f"read from {name}", rows)
                stored = mem.get(row) if row is not None else None
                if stored is not None:  # adds, like the GDN output does to the residual
                    o, size = self.offset[r.out], self.g.features[r.out].size
                    v[o:o + size] += np.array(stored[:size], dtype=np.int64)

    def _word_row(self, w: Write, v: np.ndarray) -> list[int]:
        word = self._get(v, w.parts[0].feature)
        if any(sum(word[4 * k:4 * k + 4]) != 1 for k in range(len(word) // 4)) or \
                any(x not in (0, 1) for x in word):
            raise CircuitError(f"write to {w.bank}: {w.parts[0].feature} is not a valid word")
        return word + [1, 0, 0, 0] * (numerics.ROW_DIGITS - len(word) // 4)  # missing digits: 0

    def _bits_row(self, w: Write, v: np.ndarray) -> list[int]:
        row = [0] * numerics.ROW_BITS
        for p in w.parts:
            if p.tap > len(self.history):
                value = [0] * self.g.features[p.feature].size
            else:
                value = self._get(self.history[-p.tap] if p.tap else v, p.feature)
            if any(x not in (0, 1) for x in value):
                raise CircuitError(f"write to {w.bank}: {p.feature} (tap {p.tap}) is not 0/1")
            row[p.offset:p.offset + len(value)] = value
        return row


def evaluate(g: Graph, tokens: list[Values]) -> list[Values]:
    """Evaluate a whole token sequence from empty memory."""
    ev = Evaluator(g)
    return [ev.step(t) for t in tokens]
