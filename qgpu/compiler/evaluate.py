"""Weight-free evaluation of a circuit graph: the reference semantics a compiled model must match.

Tokens are processed in order; within a token, rule groups and memory banks run in dependency
order. Memory banks persist across tokens; a read sees a write of the same token (GDN reads after
it writes); a write part with a tap takes that feature's value in an earlier token (zeros before
the first token, as the conv1d pads). The evaluator also checks each node's exactness condition
(one-hot addresses, valid words, 0/1 dims) and raises on a violation, naming the node.
"""

from __future__ import annotations

from graphlib import TopologicalSorter

from qgpu.compiler import numerics
from qgpu.compiler.graph import Addr, Address, Graph, Write, addr_features

Values = dict[str, list[int]]


class CircuitError(ValueError):
    """A node's exactness condition does not hold for some token."""


def node_order(g: Graph) -> list[tuple[str, str]]:
    """Rule groups ("rules", name) and banks ("bank", name) in dependency order. A node runs
    after every writer of every feature it reads (a feature may have several writers when it is
    ``accumulate``; a group that reads and adds to one runs after its other writers)."""
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
    return list(TopologicalSorter(deps).static_order())


class Evaluator:
    """Runs a graph token by token, keeping the memory banks."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.order = node_order(g)
        self.memory: dict[str, dict[int, list[int]]] = {b: {} for b in g.banks}
        self.history: list[Values] = []  # the last CONV_REACH tokens' values, newest last

    def step(self, token: Values) -> Values:
        """Evaluate one token given its input features; returns every feature's value."""
        g = self.g
        vals: Values = {n: [0] * f.size for n, f in g.features.items()}
        for name, v in token.items():
            if not g.features[name].token_input:
                raise CircuitError(f"{name} is not a token input")
            vals[name] = list(v)
        for kind, name in self.order:
            if kind == "rules":
                self._rules(name, vals)
            else:
                self._bank(name, vals)
        self.history = (self.history + [vals])[-numerics.CONV_REACH:]
        return vals

    def _rules(self, name: str, vals: Values) -> None:
        deltas: list[tuple[tuple[str, int], int]] = []
        for rule in self.g.rules[name]:
            for (f, i), _ in rule.literals:
                if vals[f][i] not in (0, 1):
                    raise CircuitError(f"rule group {name}: {f}[{i}] = {vals[f][i]} is not 0/1")
            if rule.count is not None:
                (f, i), k = rule.count
                if vals[f][i] not in range(numerics.COUNT_MAX + 1):
                    raise CircuitError(f"rule group {name}: count {f}[{i}] = {vals[f][i]} is "
                                       f"not an integer 0..{numerics.COUNT_MAX}")
                if vals[f][i] < k:
                    continue
            if all(vals[f][i] == want for (f, i), want in rule.literals):
                deltas += rule.deltas
        for (f, i), d in deltas:
            vals[f][i] += d

    def _row(self, addr: Addr, vals: Values, where: str, rows: int) -> int | None:
        if isinstance(addr, Address):
            for f, i in addr.dims:
                if vals[f][i] not in (0, 1):
                    raise CircuitError(f"{where}: address dim {f}[{i}] = {vals[f][i]} not 0/1")
            if addr.enable and not vals[addr.enable[0]][addr.enable[1]]:
                return None
            row = sum(vals[f][i] << k for k, (f, i) in enumerate(addr.bits))
            return row if row < rows else None
        feature = addr
        hot = [i for i, v in enumerate(vals[feature]) if v]
        if len(hot) > 1 or any(v not in (0, 1) for v in vals[feature]):
            raise CircuitError(f"{where}: address {feature} is not one-hot: {vals[feature]}")
        return hot[0] if hot else None

    def _bank(self, name: str, vals: Values) -> None:
        mem, bits = self.memory[name], self.g.banks[name].code == "bits"
        for w in self.g.writes:
            if w.bank != name:
                continue
            row = self._row(w.addr, vals, f"write to {name}", self.g.banks[name].rows)
            if w.enable is not None:
                (f, i) = w.enable
                if vals[f][i] not in (0, 1):
                    raise CircuitError(f"write to {name}: enable {f}[{i}] = {vals[f][i]} not 0/1")
                row = row if vals[f][i] else None
            if row is not None:
                mem[row] = self._bits_row(w, vals) if bits else self._word_row(w, vals)
        for r in self.g.reads:
            if r.bank == name:
                row = self._row(r.addr, vals, f"read from {name}", self.g.banks[name].rows)
                size = self.g.features[r.out].size
                stored = mem.get(row) if row is not None else None
                if stored is not None:  # adds, like the GDN output does to the residual
                    vals[r.out] = [a + b for a, b in zip(vals[r.out], stored[:size], strict=True)]

    def _word_row(self, w: Write, vals: Values) -> list[int]:
        word = vals[w.parts[0].feature]
        if any(sum(word[4 * k:4 * k + 4]) != 1 for k in range(len(word) // 4)) or \
                any(v not in (0, 1) for v in word):
            raise CircuitError(f"write to {w.bank}: {w.parts[0].feature} is not a valid word")
        return word + [1, 0, 0, 0] * (numerics.ROW_DIGITS - len(word) // 4)  # missing digits: 0

    def _bits_row(self, w: Write, vals: Values) -> list[int]:
        row = [0] * numerics.ROW_BITS
        for p in w.parts:
            if p.tap > len(self.history):
                value = [0] * self.g.features[p.feature].size
            else:
                value = (self.history[-p.tap] if p.tap else vals)[p.feature]
            if any(v not in (0, 1) for v in value):
                raise CircuitError(f"write to {w.bank}: {p.feature} (tap {p.tap}) is not 0/1")
            row[p.offset:p.offset + len(value)] = value
        return row


def evaluate(g: Graph, tokens: list[Values]) -> list[Values]:
    """Evaluate a whole token sequence from empty memory."""
    ev = Evaluator(g)
    return [ev.step(t) for t in tokens]
