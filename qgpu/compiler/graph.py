"""The circuit graph: named features on the residual stream, MLP rules and GDN memory banks.

A *feature* is a named group of residual dims, each holding 0 or 1 (plus a constant offset for
memory-read outputs). Its *code* says which patterns are legal: ``onehot`` (at most one dim set),
``bits`` (any pattern) or ``word`` (a stored memory word: up to 32 base-4 digits, a group of 4 dims
with exactly one set per digit; a memory row always holds 32 digits, the ones a feature does not
carry are 0). Token features arrive with the token's embedding; every other feature is written by
exactly one node:

* ``Rule`` — one MLP neuron: it fires when all its literals (dim = 0 / dim = 1) hold and then adds
  +1 or -1 to some dims. Lookup tables, AND/OR, multiplexers, copy and clear are sets of rules.
* ``Write`` / ``Read`` — one GDN head holds a bank of up to 128 rows; a write stores a row at an
  address (none = no write), a read returns the row at an address (the new row if the same token
  wrote it). An address is a one-hot feature, or an ``Address``: the row number in binary dims
  (with an enable dim), decoded by the GDN's own key/query projection and SiLU, so the residual
  never holds the one-hot. A ``word`` bank stores words; a ``bits`` bank stores up to
  126 plain bits per row (two anchor entries keep the row's norm fixed, numerics.py), so a bit
  costs one residual dim and an unwritten row reads as zeros. A write to a ``bits`` bank may take
  parts of its row from the three tokens before (``Part.tap``), through the GDN's causal conv1d.

The graph is the reference semantics (``evaluate.py``) and the input of the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from qgpu.compiler import numerics

Code = Literal["onehot", "bits", "word"]


@dataclass(frozen=True)
class Feature:
    name: str
    size: int
    code: Code = "bits"
    token_input: bool = False  # set by the embedding rather than by a node
    accumulate: bool = False  # several rule groups may add to it (the output selection)
    alias: str | None = None  # occupies the dims of this token input (its value adds on top)

    def dim(self, i: int) -> tuple[str, int]:
        if not 0 <= i < self.size:
            raise IndexError(f"{self.name} has {self.size} dims, not {i}")
        return (self.name, i)


Dim = tuple[str, int]  # (feature name, index)
Literal_ = tuple[Dim, int]  # (dim, required value 0/1)


@dataclass(frozen=True)
class Rule:
    """An MLP neuron: if every literal holds, add each delta to its dim.

    With ``count = (dim, k)`` it also needs the integer in `dim` (0..numerics.COUNT_MAX, a sum
    other rules accumulated) to be at least k; such a step is a pair of neurons (numerics.py).
    With ``minus`` (a count dim too) the integer is count's minus minus's: a test on the
    difference of two counts (whether two digits agree) that needs no dim holding it.
    """

    literals: tuple[Literal_, ...]
    deltas: tuple[tuple[Dim, int], ...]
    label: str = ""
    count: tuple[Dim, int] | None = None
    minus: Dim | None = None

    def __post_init__(self) -> None:
        if self.minus is not None and self.count is None:
            raise ValueError(f"rule {self.label}: minus without a count")

    @property
    def counted(self) -> tuple[Dim, ...]:
        """The count dims the rule reads (none, its count, and its minus)."""
        if self.count is None:
            return ()
        return (self.count[0],) if self.minus is None else (self.count[0], self.minus)

    @property
    def neurons(self) -> int:
        return 1 if self.count is None else 2


BankCode = Literal["word", "bits"]


@dataclass(frozen=True)
class Bank:
    """A memory bank in one GDN head: up to 128 rows of 32 base-4 digits (``word``) or of
    ``numerics.ROW_BITS`` bits (``bits``)."""

    name: str
    rows: int
    code: BankCode = "word"

    def __post_init__(self) -> None:
        if not 0 < self.rows <= 128:
            raise ValueError(f"bank {self.name}: 1..128 rows, not {self.rows}")


@dataclass(frozen=True)
class Part:
    """Row dims offset.. of a ``bits``-bank write, from a feature of this token (tap 0) or of
    the token ``tap`` places before (1..3: the conv1d's reach)."""

    feature: str
    tap: int = 0
    offset: int = 0


@dataclass(frozen=True)
class Address:
    """A row number in binary: the row the 0/1 dims `bits` spell (least significant first),
    when the `enable` dim holds 1 (no enable dim: always). A number beyond the bank's rows
    addresses nothing. Emission gives each row r the key/query pre-activation
    KEY_SCALE * (enable - hamming(bits, r)): SiLU passes KEY_SCALE for the row and maps every
    other row to exactly 0 (numerics.py)."""

    bits: tuple[Dim, ...]
    enable: Dim | None = None

    @property
    def dims(self) -> tuple[Dim, ...]:
        return self.bits + ((self.enable,) if self.enable else ())


Addr = str | Address  # a one-hot feature of the bank's rows, or an Address


def addr_features(addr: Addr) -> set[str]:
    """The features an address reads."""
    return {addr} if isinstance(addr, str) else {f for f, _ in addr.dims}


@dataclass(frozen=True)
class Write:
    bank: str
    addr: Addr  # all zero / disabled: no write
    parts: tuple[Part, ...]  # word banks: one part, the whole word, tap 0
    enable: Dim | None = None  # a 0/1 dim: 0 = no write (the GDN's beta is exactly 0)


@dataclass(frozen=True)
class Read:
    bank: str
    addr: Addr  # all zero / disabled: reads nothing, the output stays 0
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
    # feature -> [(image, per dim i of the feature: (image dim, weight))] (``mirror``)
    mirrors: dict[str, list[tuple[str, Callable[[int], tuple[int, int]]]]] = field(
        default_factory=dict)
    through: set[str] = field(default_factory=set)  # names written through (``mirror``)

    def mirror(self, feature: str, image: str,
               weight: Callable[[int], tuple[int, int]], *, through: bool = False) -> None:
        """From now on (and for the rules already there) every rule that adds d to dim i of
        `feature` also adds d * w to dim j of `image`, (j, w) = weight(i): a linear image of
        the feature (its base-16 digits, say) that costs no neuron and no layer, ready in the
        same sublayer as the feature. `image` must accumulate (every writer adds to it).
        With `through` the feature itself is never written: it stops being a feature and
        becomes a name that rules write through to their images — a value that only ever
        lives as its image (a slot's result, held as base-16 digits) and that no rule reads."""
        if feature in self.through:  # its rules no longer add to it: a new image would miss them
            raise ValueError(f"{feature} is written through: it takes no further mirror")
        if not self.features[image].accumulate:
            raise ValueError(f"mirror image {image} must be an accumulate feature")
        if through:
            readers = [n for n, ins in self.rule_inputs.items() if feature in ins]
            if readers or any(r.out == feature for r in self.reads) or any(
                    p.feature == feature for w in self.writes for p in w.parts):
                raise ValueError(f"{feature} is read ({readers}): it cannot be written through")
            del self.features[feature]
            self.through.add(feature)
        self.mirrors.setdefault(feature, []).append((image, weight))
        for name in [n for n, outs in self.rule_outputs.items() if feature in outs]:
            self.rules[name] = self._written([self._mirrored(r, feature, image, weight)
                                              for r in self.rules[name]])
            self.rule_outputs[name].add(image)
            if through:
                self.rule_outputs[name].discard(feature)

    @staticmethod
    def _mirrored(rule: Rule, feature: str, image: str,
                  weight: Callable[[int], tuple[int, int]]) -> Rule:
        extra: dict[Dim, int] = {}
        for (f, i), d in rule.deltas:
            if f == feature:
                j, w = weight(i)
                extra[(image, j)] = extra.get((image, j), 0) + d * w
        deltas = rule.deltas + tuple((dim, v) for dim, v in extra.items() if v)
        return replace(rule, deltas=deltas)

    def _written(self, rules: list[Rule]) -> list[Rule]:
        """The rules without their deltas on written-through names (and without rules left
        with no delta at all)."""
        out = []
        for r in rules:
            deltas = tuple((d, v) for d, v in r.deltas if d[0] not in self.through)
            if deltas:
                out.append(r if len(deltas) == len(r.deltas)
                           else replace(r, deltas=deltas))
        return out

    def feature(self, name: str, size: int, code: Code = "bits", *, token_input: bool = False,
                accumulate: bool = False, alias: str | None = None) -> Feature:
        """A new feature. An `alias` shares the dims of a token input, which then stays in the
        residual to the end: how a token's own fields and the next token's choice meet in the
        dims its embedding (= output) row uses."""
        if name in self.features:
            raise ValueError(f"feature {name} already exists")
        if alias is not None:
            a = self.features.get(alias)
            if a is None or not a.token_input or a.size != size or token_input:
                raise ValueError(f"{name} can alias only a token input of its size, not {alias}")
        if code == "word" and not (size % 4 == 0 and 0 < size <= 4 * numerics.ROW_DIGITS):
            raise ValueError("a word feature has 4 dims per base-4 digit, at most 32 digits")
        f = Feature(name, size, code, token_input, accumulate, alias)
        self.features[name] = f
        return f

    def rule_group(self, name: str, rules: list[Rule]) -> None:
        """Add a named set of rules evaluated together in one MLP sublayer."""
        if name in self.rules:
            raise ValueError(f"rule group {name} already exists")
        ins = {d[0] for r in rules for (d, _) in r.literals}
        ins |= {d[0] for r in rules for d in r.counted}
        outs = {d[0] for r in rules for (d, _) in r.deltas}
        for f in ins & self.through:
            raise ValueError(f"rule group {name} reads {f}, which is written through to "
                             f"{[image for image, _ in self.mirrors[f]]}")
        for f in ins | (outs - self.through):
            if f not in self.features:
                raise ValueError(f"rule group {name} uses unknown feature {f}")
        for f in outs - self.through:
            feat = self.features[f]
            if feat.accumulate:
                continue
            if feat.token_input or any(f in o for o in self.rule_outputs.values()) \
                    or any(r.out == f for r in self.reads):
                raise ValueError(f"feature {f} already has a writer")
        for f in outs & set(self.mirrors):
            for image, weight in self.mirrors[f]:
                rules = [self._mirrored(r, f, image, weight) for r in rules]
                outs = outs | {image}
        rules, outs = self._written(rules), outs - self.through
        self.rules[name] = rules
        self.rule_inputs[name] = ins
        self.rule_outputs[name] = outs

    def bank(self, name: str, rows: int, code: BankCode = "word") -> Bank:
        b = Bank(name, rows, code)
        self.banks[name] = b
        return b

    def write(self, bank: str, addr: Addr, value: str | None = None, *,
              parts: list[Part] | None = None, enable: Dim | None = None) -> None:
        """Store `value` (or the row assembled from `parts`) at `addr`, if the
        `enable` dim holds 1 (so banks of one token kind can share its address feature)."""
        self._check_mem(bank, addr)
        if enable is not None:
            self.features[enable[0]].dim(enable[1])
        if (value is None) == (parts is None):
            raise ValueError(f"write to {bank}: give a value or parts")
        parts = [Part(value)] if value is not None else list(parts)
        if self.banks[bank].code == "word":
            if len(parts) != 1 or parts[0].tap or parts[0].offset \
                    or self.features[parts[0].feature].code != "word":
                raise ValueError(f"write to word bank {bank}: one word feature, this token")
        else:
            self._check_bits_parts(bank, parts)
        self.writes.append(Write(bank, addr, tuple(parts), enable))

    def _check_bits_parts(self, bank: str, parts: list[Part]) -> None:
        taken: set[int] = set()
        for p in parts:
            f = self.features[p.feature]
            if f.code == "word":
                raise ValueError(f"write to {bank}: {p.feature} is not a bits/one-hot feature")
            if f.accumulate and p.tap:
                raise ValueError(f"write to {bank}: {p.feature} has several writers: no tap")
            if not 0 <= p.tap <= numerics.CONV_REACH:
                raise ValueError(f"write to {bank}: tap {p.tap} is beyond the conv1d's reach")
            if p.tap and any(r.out == p.feature for r in self.reads):
                raise ValueError(f"write to {bank}: a memory read ({p.feature}) cannot be tapped")
            span = set(range(p.offset, p.offset + f.size))
            if p.offset < 0 or max(span) >= numerics.ROW_BITS or span & taken:
                raise ValueError(f"write to {bank}: part {p.feature} overlaps or leaves the row")
            taken |= span

    def read(self, bank: str, addr: Addr, out: str) -> None:
        self._check_mem(bank, addr)
        f = self.features[out]
        if not f.accumulate and (f.token_input or any(out in o for o in self.rule_outputs.values())
                                 or any(r.out == out for r in self.reads)):
            raise ValueError(f"feature {out} already has a writer")
        code, f = self.banks[bank].code, self.features[out]
        if code == "word" and f.code != "word":
            raise ValueError(f"read from {bank}: {out} is not a word feature")
        if code == "bits" and (f.code != "bits" or f.size > numerics.ROW_BITS):
            raise ValueError(f"read from {bank}: {out} is not a bits feature of a row")
        self.reads.append(Read(bank, addr, out))

    def write_inputs(self, bank: str) -> set[str]:
        """Features a bank's write reads (address and every part)."""
        return {x for w in self.writes if w.bank == bank
                for x in (*addr_features(w.addr), *(p.feature for p in w.parts),
                          *((w.enable[0],) if w.enable else ()))}

    def _check_mem(self, bank: str, addr: Addr) -> None:
        if bank not in self.banks:
            raise ValueError(f"unknown bank {bank}")
        if isinstance(addr, Address):
            for f, i in addr.dims:
                self.features[f].dim(i)
            if 1 << len(addr.bits) < self.banks[bank].rows:
                raise ValueError(f"{bank}: {len(addr.bits)} address bits cannot name "
                                 f"{self.banks[bank].rows} rows")
            return
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
    if g.features[dst].size < g.features[src].size:
        raise ValueError(f"copy {name}: {dst} is narrower than {src}")
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
