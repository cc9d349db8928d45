"""The circuit graph: named features on the residual stream, MLP rules and GDN memory banks.

A *feature* is a named group of residual dims, each holding 0 or 1 (plus a constant offset for
memory-read outputs). Its *code* says which patterns are legal: ``onehot`` (at most one dim set),
``bits`` (any pattern) or ``word`` (a stored memory word: up to 32 base-4 digits, a group of 4 dims
with exactly one set per digit; a memory row always holds 32 digits, the ones a feature does not
carry are 0). Token features arrive with the token's embedding; every other feature is written by
exactly one node:

* ``Rule`` — one MLP neuron: it fires when all its literals (dim = 0 / dim = 1) hold and then adds
  +1 or -1 to some dims. Lookup tables, AND/OR, multiplexers, copy and clear are sets of rules.
* ``Write`` / ``Read`` — one GDN head holds a bank of up to 128 words; a write stores a word at a
  one-hot address (no address = no write), a read returns the word at a one-hot address (the new
  word if the same token wrote it).

The graph is the reference semantics (``evaluate.py``) and the input of the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from qgpu.compiler import numerics

Code = Literal["onehot", "bits", "word"]


@dataclass(frozen=True)
class Feature:
    name: str
    size: int
    code: Code = "bits"
    token_input: bool = False  # set by the embedding rather than by a node
    accumulate: bool = False  # a token input that rules may also add to (the output selection)

    def dim(self, i: int) -> tuple[str, int]:
        if not 0 <= i < self.size:
            raise IndexError(f"{self.name} has {self.size} dims, not {i}")
        return (self.name, i)


Dim = tuple[str, int]  # (feature name, index)
Literal_ = tuple[Dim, int]  # (dim, required value 0/1)


@dataclass(frozen=True)
class Rule:
    """An MLP neuron: if every literal holds, add each delta to its dim."""

    literals: tuple[Literal_, ...]
    deltas: tuple[tuple[Dim, int], ...]
    label: str = ""


@dataclass(frozen=True)
class Bank:
    """A memory bank: up to 128 words of 32 base-4 digits, in one GDN head."""

    name: str
    rows: int

    def __post_init__(self) -> None:
        if not 0 < self.rows <= 128:
            raise ValueError(f"bank {self.name}: 1..128 rows, not {self.rows}")


@dataclass(frozen=True)
class Write:
    bank: str
    addr: str  # onehot feature of `rows` dims (all zero: no write)
    value: str  # word feature (128 dims)


@dataclass(frozen=True)
class Read:
    bank: str
    addr: str  # onehot feature (all zero: reads nothing, the output stays 0)
    out: str  # word feature receiving the row


@dataclass
class Graph:
    """Builder and container of a circuit."""

    features: dict[str, Feature] = field(default_factory=dict)
    rules: dict[str, list[Rule]] = field(default_factory=dict)  # output group name -> rules
    banks: dict[str, Bank] = field(default_factory=dict)
    writes: list[Write] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    rule_inputs: dict[str, set[str]] = field(default_factory=dict)
    rule_outputs: dict[str, set[str]] = field(default_factory=dict)

    def feature(self, name: str, size: int, code: Code = "bits", *, token_input: bool = False,
                accumulate: bool = False) -> Feature:
        if name in self.features:
            raise ValueError(f"feature {name} already exists")
        if code == "word" and not (size % 4 == 0 and 0 < size <= 4 * numerics.ROW_DIGITS):
            raise ValueError("a word feature has 4 dims per base-4 digit, at most 32 digits")
        f = Feature(name, size, code, token_input, accumulate)
        self.features[name] = f
        return f

    def rule_group(self, name: str, rules: list[Rule]) -> None:
        """Add a named set of rules evaluated together in one MLP sublayer."""
        if name in self.rules:
            raise ValueError(f"rule group {name} already exists")
        ins = {d[0] for r in rules for (d, _) in r.literals}
        outs = {d[0] for r in rules for (d, _) in r.deltas}
        for f in ins | outs:
            if f not in self.features:
                raise ValueError(f"rule group {name} uses unknown feature {f}")
        for f in outs:
            feat = self.features[f]
            if feat.accumulate:
                continue
            if feat.token_input or any(f in o for o in self.rule_outputs.values()) \
                    or any(r.out == f for r in self.reads):
                raise ValueError(f"feature {f} already has a writer")
        self.rules[name] = rules
        self.rule_inputs[name] = ins
        self.rule_outputs[name] = outs

    def bank(self, name: str, rows: int) -> Bank:
        b = Bank(name, rows)
        self.banks[name] = b
        return b

    def write(self, bank: str, addr: str, value: str) -> None:
        self._check_mem(bank, addr)
        if self.features[value].code != "word":
            raise ValueError(f"write to {bank}: {value} is not a word feature")
        self.writes.append(Write(bank, addr, value))

    def read(self, bank: str, addr: str, out: str) -> None:
        self._check_mem(bank, addr)
        if self.features[out].code != "word":
            raise ValueError(f"read from {bank}: {out} is not a word feature")
        self.reads.append(Read(bank, addr, out))

    def _check_mem(self, bank: str, addr: str) -> None:
        if bank not in self.banks:
            raise ValueError(f"unknown bank {bank}")
        f = self.features[addr]
        if f.code != "onehot" or f.size != self.banks[bank].rows:
            raise ValueError(f"{addr} must be a one-hot of {self.banks[bank].rows} dims")


# --- small gadget builders -------------------------------------------------------------------


def lookup(g: Graph, name: str, inputs: list[str], out: str,
           table: dict[tuple[int, ...], tuple[int, ...]]) -> None:
    """Table over one-hot inputs: for each listed combination of hot indices, set the given dims
    of `out`. Unlisted combinations leave `out` at 0. One neuron per entry."""
    for f in inputs:
        if g.features[f].code != "onehot":
            raise ValueError(f"lookup {name}: input {f} is not one-hot")
    rules = []
    for combo, dims in table.items():
        lits = tuple(((f, i), 1) for f, i in zip(inputs, combo, strict=True))
        rules.append(Rule(lits, tuple(((out, d), 1) for d in dims), f"{name}{combo}"))
    g.rule_group(name, rules)


def copy_bits(g: Graph, name: str, src: str, dst: str, when: Dim | None = None) -> None:
    """dst[i] = src[i] (and `when` = 1), one neuron per dim."""
    cond = ((when, 1),) if when else ()
    rules = [Rule((((src, i), 1),) + cond, (((dst, i), 1),), f"{name}[{i}]")
             for i in range(g.features[src].size)]
    g.rule_group(name, rules)


def word_digits(value: int, digits: int = numerics.ROW_DIGITS) -> list[int]:
    """A value as base-4 digits, least significant first."""
    return [(value >> (2 * i)) & 3 for i in range(digits)]


def word_dims(value: int, digits: int = numerics.ROW_DIGITS) -> list[int]:
    """The hot dims of the word code of a value."""
    return [4 * i + d for i, d in enumerate(word_digits(value, digits))]
