"""The float unit's core (a prototype): one lane's fused multiply-add datapath, bit-coded.

``float_fma`` builds FFMA (a * b + c rounded once), FADD (a + b), FSUB (a - b) and FMUL (a * b)
through one datapath, in all four rounding modes with ftz and sat, the operation and the mod
bits chosen per token by literals. Every value is a 0/1 dim or a small count (the numerics
contract of docs/ARCHITECTURE.md §3), so the unit is exact in float32 and bfloat16; its results
are bit for bit ``qgpu.machine.float32``'s (tests/circuits/test_float_unit.py).

Operand routing (first layer, by literals): X = a; Y = b (FMUL, FFMA) or 1.0 (FADD, FSUB);
Z = c (FFMA), b (FADD), -b (FSUB), none (FMUL: no addend, so a zero product keeps its own sign
even under RM). FADD and FSUB ride the multiplier (a * 1.0: 48 more first-layer rules, no
depth). The product X * Y (48 bits, exact) sits at window positions 4..51 of a 78-position
window. Z's significand is aligned into the same window: with r2 = EX + EY - EZ (effective
biased exponents, a subnormal's is 1) Z's bit i lands at 154 - r2 + i. When r2 < 100 (Z so far
above that the product only decides a sticky bit) or the product is zero, Z is clamped to
positions 54..77; when r2 >= 184 it is only a sticky bit; bits that fall to position 0 or below
are OR-ed into position 0 (jamming: exact for rounding, as the product's leading one is at
position 27 or above whenever the product is not itself far below the rounding point). The
window's exponent frame: a leading one at position j gives the biased exponent
B - 128 + j, with B = max(EX + EY - 49, EZ + 51) (the clamp picks the second). An effective
subtraction adds the one's complement of the aligned Z: R = P + NOT Z' (mod 2^78); the
magnitude is NOT R when that carries out nothing (Z' >= P), else R + 1 (the end-around carry,
applied by the next layer as an increment rather than by a second carry chain).

Layers (MLP sublayers), each stage's rule groups and neurons (count steps are neuron pairs;
``stage_costs``):

 ====  =================================================================  =======  =======
 layer  what                                                               neurons  stage
 ====  =================================================================  =======  =======
  1    partial products a_i b_j summed into 47 column counts               675      product
       3:2 compressions of r2 = EX + EY - EZ and EX + EY - 49; EZ + 51     325      exponent
       Z routed and ftz-flushed, signs, effective subtraction, classes     179      unpack
  2    column counts -> binary digits (count steps, <= 24 per column)      1152     product
       exponent lookahead layer 1 (2 x 20); r2 mod 8 (19)                   59       exponent
       NaN / infinity / zero-product results                               19       specials
  3    columns again (<= 3 each)                                           366      product
       r2 and EX + EY - 49 (lookahead layer 2)                             220      exponent
       alignment stage 1: Z >> (r2 mod 8) into 31 positions                192      align
  4    columns -> two numbers x + y = X * Y                                250      product
       alignment stage 2: by r2 div 8 into the window, clamps, jam         419      align
       the frame B (the clamp picks one of two sums)                       99       exponent
  5    3:2 compression of x, y and Z' (inverted when subtracting) into    684      add
       u, v, with base-32 block counts of u + v (no extra neurons)
  6    propagate bits; block generate / propagate (count steps)            136      add
  7    R = u + v (mod 2^78) by block carry lookahead, and its carry out    1186     add
       marker of the subnormal boundary (B = 129 - position)               78       limits
  8    magnitude M (R, NOT R or R + 1), the shift position J (the leading  1083     lead
       one, or the subnormal boundary when it is below), sign, exact zero
       markers and flags for exponent 127 (sat) and 255 (overflow)         175      limits
  9    normalising shift: guard, 23 fraction bits, sticky (J one of 78)    1677     normalize
       exponent lookahead layer 1; overflow, sat-clamp, ftz-flush flags    331      limits
 10    rounding increment, exponent B' + J + carry, final select           411      finish
 ====  =================================================================  =======  =======

Total 9,716 neurons in 10 layers. With ``normalize_stages=2`` the shift takes two layers
(coarse by 8: 273; fine: 207), 8,519 neurons in 11 layers, the widest layer then 1,264.
Scheduled alone into 2B-shaped layers (``schedule``) the unit takes 10 (11) layers and
K = 193 residual dims, of which 104 are its inputs (a, b, c, the control) and 3 reserved: its
own values peak at 182 live dims (after layer 4: the aligned addend, 78, and the product's two
numbers, 96); the scheduler's clears add 1,112 (1,144) neurons.

The logic of each layer is written as integer-valued sums of conjunctions of literals
(``Sum``), one rule per distinct conjunction: a layer can compute any function of the layer
before as mutually exclusive (or signed, inclusion-exclusion) terms; depth is spent only where
a value must become a literal before the next function can use it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from qgpu.compiler import gadgets as gd
from qgpu.compiler.graph import Dim, Graph, Literal_, Rule

# --- sums of conjunctions -------------------------------------------------------------------

Conj = frozenset  # of literals (Dim, 0/1), no dim twice


def _key(c: Conj) -> tuple:
    """A conjunction's place in a fixed order."""
    return (len(c), sorted(c))


def _join(a: Conj, b: Conj) -> Conj | None:
    """The conjunction of both, None when they contradict."""
    if len(a) < len(b):
        a, b = b, a
    for d, v in b:
        if (d, 1 - v) in a:
            return None
    return a | b


class Sum:
    """An integer-valued function of 0/1 dims: the sum of coef * [every literal holds] over its
    terms. A rule group computes any Sum of the values before it, one rule per term."""

    __slots__ = ("t",)

    def __init__(self, t: dict[Conj, int] | None = None) -> None:
        self.t = {k: v for k, v in (t or {}).items() if v}

    @classmethod
    def const(cls, v: int = 1) -> Sum:
        return cls({frozenset(): v})

    @classmethod
    def of(cls, *lits: Literal_) -> Sum:
        """The conjunction of the literals (0 if they contradict)."""
        c = frozenset(lits)
        if len({d for d, _ in c}) != len(c):
            return cls()
        return cls({c: 1})

    @classmethod
    def lit(cls, dim: Dim, v: int = 1) -> Sum:
        return cls({frozenset({(dim, v)}): 1})

    def __add__(self, o: Sum | int) -> Sum:
        o = Sum.const(o) if isinstance(o, int) else o
        t = dict(self.t)
        for k, v in o.t.items():
            t[k] = t.get(k, 0) + v
        return Sum(t)

    __radd__ = __add__

    def __neg__(self) -> Sum:
        return Sum({k: -v for k, v in self.t.items()})

    def __sub__(self, o: Sum | int) -> Sum:
        return self + (-(Sum.const(o) if isinstance(o, int) else o))

    def __rsub__(self, o: int) -> Sum:
        return Sum.const(o) - self

    def __mul__(self, o: Sum | int) -> Sum:
        if isinstance(o, int):
            return Sum({k: v * o for k, v in self.t.items()})
        t: dict[Conj, int] = {}
        for ka, va in self.t.items():
            for kb, vb in o.t.items():
                k = _join(ka, kb)
                if k is not None:
                    t[k] = t.get(k, 0) + va * vb
        return Sum(t)

    __rmul__ = __mul__

    def inv(self) -> Sum:
        """1 - self (for a 0/1 value); a single literal becomes its negation."""
        if len(self.t) == 1:
            (k, v), = self.t.items()
            if v == 1 and len(k) == 1:
                (d, x), = k
                return Sum.lit(d, 1 - x)
        return Sum.const(1) - self

    def simplified(self, width: int = 16) -> Sum:
        """The same function with fewer terms: c*(T and l) + c*(T and not l) = c*T, and
        c*T - c*(T and l) = c*(T and not l), merged greedily in a fixed order (so a build is
        the same in every process). Sums with longer conjunctions than `width` are left as
        they are (long ones rarely merge, and the search is quadratic in them)."""
        if any(len(k) > width for k in self.t):
            return Sum(self.t)
        t = dict(self.t)
        changed = True
        while changed:
            changed = False
            index: dict[tuple[Conj, Dim], list[tuple[int, Conj]]] = {}
            for k in sorted(t, key=_key):
                for d, v in sorted(k):
                    index.setdefault((k - {(d, v)}, d), []).append((v, k))
            for (rest, _), entries in index.items():
                live = [(v, k) for v, k in entries if k in t]
                if len(live) == 2 and t[live[0][1]] == t[live[1][1]]:
                    c = t.pop(live[0][1])
                    t.pop(live[1][1])
                    t[rest] = t.get(rest, 0) + c
                    if not t[rest]:
                        del t[rest]
                    changed = True
            for k in sorted(t, key=_key):
                if k not in t:
                    continue
                for d, v in sorted(k):
                    rest = k - {(d, v)}
                    if rest in t and t[rest] == -t[k]:
                        c = t.pop(rest)
                        t.pop(k)
                        nk = rest | {(d, 1 - v)}
                        t[nk] = t.get(nk, 0) + c
                        if not t[nk]:
                            del t[nk]
                        changed = True
                        break
        return Sum(t)

    def __len__(self) -> int:
        return len(self.t)


def conj(lits: Iterable[Literal_]) -> Sum:
    return Sum.of(*lits)


def all_eq(dims: Sequence[Dim], value: int) -> Sum:
    """Every dim holds `value` (0 or 1)."""
    return Sum.of(*((d, value) for d in dims))


def any_set(dims: Sequence[Dim]) -> Sum:
    return all_eq(dims, 0).inv()


def bits_are(dims: Sequence[Dim], value: int) -> Sum:
    """The binary dims (least significant first) hold `value`."""
    return Sum.of(*((d, value >> i & 1) for i, d in enumerate(dims)))


def boolfn(xs: Sequence[Sum], f: Callable[..., bool]) -> Sum:
    """f of 0/1-valued Sums, as its true minterms (each a product of the Sums or their
    complements), simplified."""
    out = Sum()
    for vals in itertools.product((0, 1), repeat=len(xs)):
        if f(*vals):
            term = Sum.const(1)
            for x, v in zip(xs, vals, strict=True):
                term = term * (x if v else x.inv())
            out = out + term
    return out.simplified()


def xor(*xs: Sum) -> Sum:
    return boolfn(xs, lambda *v: sum(v) % 2 == 1)


def maj(x: Sum, y: Sum, z: Sum) -> Sum:
    return boolfn([x, y, z], lambda a, b, c: a + b + c >= 2)


def ge_const(dims: Sequence[Dim], k: int) -> Sum:
    """The unsigned binary dims hold a value >= k: exclusive terms, one per 0 bit of k (a set
    bit there with the bits above equal to k's) and one for equality."""
    n = len(dims)
    if k <= 0:
        return Sum.const(1)
    if k >= 1 << n:
        return Sum()
    out = bits_are(dims, k)
    for i in range(n):
        if not k >> i & 1:
            out = out + conj([(dims[i], 1)] + [(dims[j], k >> j & 1) for j in range(i + 1, n)])
    return out


def const_add(xs: Sequence[Sum], k: int, n: int) -> list[Sum]:
    """The n low bits of (the number whose bits are the 0/1 Sums xs) + k, each as a Sum
    (carry lookahead against a constant: position j generates where k_j = x_j = 1, propagates
    where x_j differs from k_j)."""
    xs = list(xs) + [Sum()] * (n - len(xs))
    gen = [xs[j] if k >> j & 1 else Sum() for j in range(n)]
    prop = [xs[j].inv() if k >> j & 1 else xs[j] for j in range(n)]
    out = []
    for i in range(n):
        carry = Sum()
        for j in range(i):
            term = gen[j]
            for m in range(j + 1, i):
                term = term * prop[m]
            carry = carry + term
        out.append((prop[i] + carry - 2 * prop[i] * carry).simplified())
    return out


def emit(g: Graph, name: str, outs: dict[Dim, Sum], when: Sequence[Literal_] = (),
         extra: Sequence[Rule] = ()) -> list[Rule]:
    """One rule group computing every output dim's Sum: one rule per distinct conjunction
    (a conjunction that several outputs share is one neuron with several deltas)."""
    merged: dict[Conj, dict[Dim, int]] = {}
    for dim, s in outs.items():
        for k, v in s.t.items():
            merged.setdefault(k, {})
            merged[k][dim] = merged[k].get(dim, 0) + v
    w = tuple(when)
    rules = []
    for k in sorted(merged, key=_key):
        deltas = {d: v for d, v in merged[k].items() if v}
        if not deltas:
            continue
        if any(abs(v) > 16 for v in deltas.values()):
            raise ValueError(f"{name}: delta {deltas} too large")
        lits = tuple(sorted(k, key=lambda x: (x[0][0], x[0][1])))
        rules.append(Rule(w + lits, tuple(deltas.items()), name))
    rules += list(extra)
    g.rule_group(name, rules)
    return rules


def steps(count: Dim, top: int, digits: Callable[[int], dict[Dim, int]],
          lits: tuple = ()) -> list[Rule]:
    """Count steps on the integer in `count` (0..top): step m adds digits(m) - digits(m-1), so
    together they write digits(value) (a neuron pair each, numerics.py)."""
    rules = []
    for m in range(1, top + 1):
        new, old = digits(m), digits(m - 1)
        deltas = tuple((d, new.get(d, 0) - old.get(d, 0)) for d in sorted(set(new) | set(old))
                       if new.get(d, 0) != old.get(d, 0))
        if deltas:
            rules.append(Rule(lits, deltas, f"{count[0]}[{count[1]}]>={m}", count=(count, m)))
    return rules


# --- the unit ---------------------------------------------------------------------------------

W = 78  # window positions
PROD = 4  # window position of the product's bit 0
CLAMP_AT = 54  # window position of a clamped addend's bit 0
JB0 = 129  # the subnormal boundary's window position is JB0 - B
OPS = ("add", "sub", "mul", "fma")
# stage labels of the cost report
UNPACK, PRODUCT, EXPONENT, ALIGN, ADD = ("unpack/specials", "significand product",
                                         "exponent arithmetic", "addend alignment",
                                         "wide add/subtract")
LEAD, NORMALIZE, LIMITS, FINISH = ("magnitude, leading one", "normalising shift",
                                   "overflow/underflow/subnormal limits",
                                   "rounding, exponent, final select")
BLOCK = 5  # carry-lookahead block: a block count of u + v is at most 2 * 31 <= COUNT_MAX


@dataclass(frozen=True)
class Control:
    """The unit's per-token control literals: one dim per operation (at most one set: FADD,
    FSUB, FMUL, FFMA), the rounding mode (float32.Round in two bits), ftz and sat. In a GPU
    slot: opcode flags like ``execute.any_op``'s, and the instruction's mod field bits 0-3
    (isa: rounding | FTZ 4 | SAT 8)."""

    add: Dim
    sub: Dim
    mul: Dim
    fma: Dim
    rnd: tuple[Dim, Dim]
    ftz: Dim
    sat: Dim


@dataclass
class FloatUnit:
    """What ``float_fma`` built: its name (features are ``{name}.…``) and the MLP layer of each
    stage's rule groups, relative to the unit's first layer (1-based), for the cost report."""

    name: str
    stages: dict[str, tuple[int, str]]  # rule group -> (layer, stage)


def float_fma(g: Graph, name: str, a: str, b: str, c: str, ctl: Control, out: str, *,
              when: Sequence[Literal_] = (), normalize_stages: int = 1) -> FloatUnit:
    """out (32 bits) += the operation `ctl` selects on the binary32 words a, b, c (each 32
    bits), rounded as `ctl` says: bit for bit float32.add / sub / mul / fma. Every rule of the
    last layer also needs `when`, so out may be a slot's accumulated result (written only when
    the lane runs a float operation). With no operation selected the unit's values stay 0/1
    and in range (its result is then meaningless: gate it with `when`). See the module
    docstring; ``normalize_stages`` 1 or 2 trades a layer for ~1,200 neurons."""
    return _Builder(g, name, a, b, c, ctl, out, tuple(when), normalize_stages).build()


class _Builder:
    def __init__(self, g: Graph, name: str, a: str, b: str, c: str, ctl: Control, out: str,
                 when: tuple, normalize_stages: int) -> None:
        if normalize_stages not in (1, 2):
            raise ValueError("normalize_stages is 1 or 2")
        self.g, self.n, self.a, self.b, self.c = g, name, a, b, c
        self.ctl, self.out, self.when, self.ns = ctl, out, when, normalize_stages
        self.stages: dict[str, tuple[int, str]] = {}
        for f in (a, b, c, out):
            if g.features[f].size != 32:
                raise ValueError(f"{f} must have 32 dims")

    # names and literals
    def f(self, part: str, size: int) -> str:
        full = f"{self.n}.{part}"
        self.g.feature(full, size)
        return full

    def fl(self, part: str) -> Dim:
        """A 1-dim feature of the unit."""
        return (self.f(part, 1), 0)

    def op(self, o: str) -> Sum:
        return Sum.lit(getattr(self.ctl, o))

    def emit(self, part: str, outs: dict[Dim, Sum], layer: int, stage: str, when: tuple = (),
             extra: Sequence[Rule] = ()) -> None:
        emit(self.g, f"{self.n}.{part}", outs, when, extra)
        self.stages[f"{self.n}.{part}"] = (layer, stage)

    def group(self, part: str, rules: list[Rule], layer: int, stage: str) -> None:
        self.g.rule_group(f"{self.n}.{part}", rules)
        self.stages[f"{self.n}.{part}"] = (layer, stage)

    def build(self) -> FloatUnit:
        self.unpack()
        self.columns()
        self.exponents()
        self.specials()
        self.align()
        self.frame()
        self.add()
        self.thresholds()
        self.magnitude()
        self.normalize()
        self.finish()
        return FloatUnit(self.n, self.stages)

    # --- layer 1: unpack ----------------------------------------------------------------------

    def word(self, w: str) -> tuple[list[Dim], list[Dim], Dim]:
        """(fraction dims, exponent dims, sign dim) of a word feature."""
        return [(w, i) for i in range(23)], [(w, 23 + i) for i in range(8)], (w, 31)

    def classes(self, w: str) -> tuple[Sum, Sum, Sum]:
        """NaN, infinity, zero (a subnormal is zero under ftz) of a word, as Sums."""
        frac, exp, _ = self.word(w)
        ftz = Sum.lit(self.ctl.ftz)
        ones, fz = all_eq(exp, 1), all_eq(frac, 0)
        ez = all_eq(exp, 0)
        return ((ones * fz.inv()).simplified(), ones * fz,
                (ez * (fz + ftz * fz.inv())).simplified())

    def eff_exp(self, w: str) -> list[Sum]:
        """The effective biased exponent's 8 bits (a subnormal's or zero's is 1)."""
        _, exp, _ = self.word(w)
        bits = [Sum.lit(d) for d in exp]
        bits[0] = bits[0] + all_eq(exp, 0)
        return bits

    def significand(self, w: str) -> list[Sum]:
        """24 bits: the fraction and the hidden bit (exponent not 0)."""
        frac, exp, _ = self.word(w)
        return [Sum.lit(d) for d in frac] + [any_set(exp)]

    def unpack(self) -> None:
        a, b, c, ctl = self.a, self.b, self.c, self.ctl
        add, sub, mul, fma = (self.op(o) for o in OPS)
        ymul = Sum.of((ctl.add, 0), (ctl.sub, 0))  # Y = b (else 1.0)
        addsub = add + sub
        ftz = Sum.lit(ctl.ftz)
        # partial products into column counts (the product X * Y, X = a)
        mx, my = self.significand(a), self.significand(b)
        self.c1 = self.f("c1", 48)
        cols: dict[Dim, Sum] = {}
        for i in range(24):
            for j in range(24):
                k = (self.c1, i + j)
                cols[k] = cols.get(k, Sum()) + mx[i] * my[j] * ymul
            k = (self.c1, i + 23)
            cols[k] = cols.get(k, Sum()) + mx[i] * addsub
        self.top1 = [sum(1 for i in range(24) if 0 <= k - i < 24) for k in range(48)]
        # Z routed (c, b, -b or none), ftz flushed: its significand, sign, non-zero flag
        cases = [(fma, c), (add, b), (sub, b)]
        zsig = self.f("zsig", 24)
        outs = {(zsig, i): Sum() for i in range(24)}
        zs, znz, ps, sb = self.fl("zs"), self.fl("znz"), self.fl("ps"), self.fl("sub")
        for case, w in cases:
            frac, exp, _ = self.word(w)
            flush = all_eq(exp, 0) * ftz
            for i in range(23):
                outs[(zsig, i)] = outs[(zsig, i)] + case * Sum.lit(frac[i]) * flush.inv()
            outs[(zsig, 23)] = outs[(zsig, 23)] + case * any_set(exp)
        zsign = fma * Sum.lit((c, 31)) + add * Sum.lit((b, 31)) + sub * Sum.lit((b, 31), 0)
        outs[(zs[0], 0)] = zsign
        psign = ymul * xor(Sum.lit((a, 31)), Sum.lit((b, 31))) + addsub * Sum.lit((a, 31))
        outs[(ps[0], 0)] = psign
        # effective subtraction: the product's sign differs from Z's (no Z: never)
        outs[(sb[0], 0)] = (fma * xor(Sum.lit((a, 31)), Sum.lit((b, 31)), Sum.lit((c, 31)))
                            + add * xor(Sum.lit((a, 31)), Sum.lit((b, 31)))
                            + sub * xor(Sum.lit((a, 31)), Sum.lit((b, 31), 0)))
        for case, w in cases:
            zero = self.classes(w)[2]
            outs[(znz[0], 0)] = outs.get((znz[0], 0), Sum()) + case * zero.inv()
        # special classes of X, Y (= b or 1.0) and Z
        cls = {}
        for part, sums in (("x", [(Sum.const(1), a)]), ("y", [(ymul, b)]),
                           ("z", [(fma, c), (addsub, b)])):
            for k, kind in enumerate(("nan", "inf", "zero")):
                if part == "z" and kind == "zero":
                    continue
                dim = self.fl(f"{part}{kind}")
                cls[dim] = sum((case * self.classes(w)[k] for case, w in sums), Sum())
        self.cls = {d[0].rsplit(".", 1)[1]: d for d in cls}
        # exponents: r2 = EX + EY - EZ (+1 carry-in below) and EX + EY - 49, as two numbers
        ea, eb, ec = self.eff_exp(a), self.eff_exp(b), self.eff_exp(c)
        one = [Sum.const(127 >> k & 1) for k in range(8)]

        def ten(bits: list[Sum], invert: bool = False) -> list[Sum]:
            if invert:
                return [x.inv() for x in bits] + [Sum.const(1)] * 2
            return bits + [Sum()] * 2

        def const10(v: int) -> list[Sum]:
            return [Sum.const(v >> k & 1) for k in range(10)]

        r_ops = [(fma, ten(ea), ten(eb), ten(ec, True)), (mul, ten(ea), ten(eb), const10(1022)),
                 (addsub, ten(ea), ten(one), ten(eb, True))]
        s_ops = [(fma + mul, ten(ea), ten(eb), const10(1024 - 49)),
                 (addsub, ten(ea), ten(one), const10(1024 - 49))]
        expo = {}
        for part, ops in (("r", r_ops), ("s", s_ops)):
            x, y = self.f(f"{part}x", 10), self.f(f"{part}y", 10)
            setattr(self, f"{part}xy", (x, y))
            for k in range(10):
                expo[(x, k)] = sum((case * xor(p[k], q[k], r[k]) for case, p, q, r in ops),
                                   Sum())
                if k < 9:
                    expo[(y, k + 1)] = sum((case * maj(p[k], q[k], r[k])
                                            for case, p, q, r in ops), Sum())
        # EZ + 51 (no Z: 1 + 51), 9 bits
        zb = self.zb = self.f("zb", 9)
        zplus = [Sum() for _ in range(9)]
        for case, e in ((fma, ec), (addsub, eb)):
            for k, s in enumerate(const_add(e, 51, 9)):
                zplus[k] = zplus[k] + case * s
        for k in range(9):
            zplus[k] = zplus[k] + mul * Sum.const(52 >> k & 1)
            expo[(zb, k)] = zplus[k]
        outs.update(cls)
        self.emit("pp", {d: s.simplified(80) for d, s in cols.items()}, 1, PRODUCT)
        self.emit("exp", {d: s.simplified(80) for d, s in expo.items()}, 1, EXPONENT)
        self.emit("unpack", {d: s.simplified(80) for d, s in outs.items()}, 1, UNPACK)
        self.zsig, self.zs, self.znz, self.ps, self.sub = zsig, zs, znz, ps, sb

    # --- layers 2-4: column compression -------------------------------------------------------

    def columns(self) -> None:
        def carried(tops: list[int]) -> list[int]:
            return [sum(1 for j in range(k + 1) if tops[j] >> (k - j) > 0) for k in range(48)]

        def spread(dst: str, k: int) -> Callable[[int], dict[Dim, int]]:
            return lambda v: {(dst, k + d): 1 for d in range(v.bit_length())
                              if v >> d & 1 and k + d < 48}

        top, src = self.top1, self.c1
        for layer, part in ((2, "c2"), (3, "c3")):
            dst = self.f(part, 48)
            self.group(part, [r for k in range(48) for r in steps((src, k), top[k],
                                                                  spread(dst, k))],
                       layer, PRODUCT)
            top, src = carried(top), dst
        assert max(top) <= 3, top
        self.x, self.y = self.f("x", 48), self.f("y", 48)
        pz = self.pzdim = self.fl("pz")  # written by specials()

        def split(k: int) -> Callable[[int], dict[Dim, int]]:
            def to(v: int) -> dict[Dim, int]:
                out = {}
                if v & 1:
                    out[(self.x, k)] = 1
                if v >> 1 & 1 and k + 1 < 48:
                    out[(self.y, k + 1)] = 1
                return out
            return to

        self.group("xy", [r for k in range(48) for r in steps((src, k), top[k], split(k),
                                                             ((pz, 0),))], 4, PRODUCT)

    # --- exponents ----------------------------------------------------------------------------

    def exponents(self) -> None:
        """r2 = EX + EY - EZ and S49 = EX + EY - 49 (10-bit two's complement), r2's low three
        bits a layer early for alignment stage 1."""
        rx, ry = self.rxy
        sx, sy = self.sxy
        self.r2, self.s49 = self.f("r2", 10), self.f("s49", 10)
        gd.add_bits(self.g, f"{self.n}.r2add", rx, ry, self.r2, carry_in=True)
        gd.add_bits(self.g, f"{self.n}.s49add", sx, sy, self.s49)
        for part in ("r2add", "s49add"):
            self.stages[f"{self.n}.{part}.p"] = (2, EXPONENT)
            self.stages[f"{self.n}.{part}"] = (3, EXPONENT)
        # low bits of rx + ry + 1 (ry[0] is never written: 0)
        s0, s1, s2 = (Sum.lit((rx, k)) for k in range(3))
        t1, t2 = Sum.lit((ry, 1)), Sum.lit((ry, 2))
        lo = self.rlo = self.f("rlo", 3)
        self.emit("rlo", {(lo, 0): s0.inv(), (lo, 1): xor(s1, t1, s0),
                          (lo, 2): xor(s2, t2, maj(s1, t1, s0))}, 2, EXPONENT)

    # --- specials ----------------------------------------------------------------------------

    def specials(self) -> None:
        """nan: the result is the canonical NaN; inf: an infinity of sign infs; pz: the product
        is zero (its datapath value is dropped and Z passes through the window)."""
        c = {k: Sum.lit(v) for k, v in self.cls.items()}
        nan, inf, infs = self.fl("nan"), self.fl("inf"), self.fl("infs")
        ps, zs, sub = Sum.lit(self.ps), Sum.lit(self.zs), Sum.lit(self.sub)
        pinf = boolfn([c["xinf"], c["yinf"]], lambda x, y: x or y)
        bad = boolfn([c["xnan"], c["ynan"], c["znan"], c["xinf"], c["yinf"], c["xzero"],
                      c["yzero"], c["zinf"], sub],
                     lambda xn, yn, zn, xi, yi, xz, yz, zi, s: bool(
                         xn or yn or zn or (xi and yz) or (xz and yi)
                         or ((xi or yi) and zi and s)))
        anyinf = boolfn([c["xinf"], c["yinf"], c["zinf"]], lambda x, y, z: x or y or z)
        self.emit("special", {
            nan: bad,
            inf: (bad.inv() * anyinf).simplified(),
            infs: (pinf * ps + pinf.inv() * zs).simplified(),
            self.pzdim: boolfn([c["xzero"], c["yzero"]], lambda x, y: x or y),
        }, 2, UNPACK)
        self.nan, self.inf, self.infs = nan, inf, infs

    # --- layers 3-4: alignment ---------------------------------------------------------------

    def r2_below(self, k: int) -> Sum:
        """r2 < k (two's complement, k > 0)."""
        r2 = [(self.r2, i) for i in range(10)]
        return Sum.lit(r2[9]) + Sum.lit(r2[9], 0) * ge_const(r2[:9], k).inv()

    def align(self) -> None:
        zsig = [Sum.lit((self.zsig, i)) for i in range(24)]
        lo = [(self.rlo, i) for i in range(3)]
        c1 = self.f("al1", 31)  # Z's significand shifted right by r2 mod 8, 7 guard positions
        outs: dict[Dim, Sum] = {}
        for v in range(8):
            for i in range(24):
                q = i + 7 - v
                outs[(c1, q)] = outs.get((c1, q), Sum()) + bits_are(lo, v) * zsig[i]
        self.emit("al1", outs, 3, ALIGN)
        r2 = [(self.r2, i) for i in range(10)]
        pz = Sum.lit(self.pzdim)
        clamp = (pz + pz.inv() * self.r2_below(100)).simplified()
        self.clamp = clamp
        cp = self.cp = self.f("cp", W)
        outs = {(cp, i): Sum() for i in range(W)}
        for i in range(24):
            outs[(cp, CLAMP_AT + i)] = outs[(cp, CLAMP_AT + i)] + clamp * zsig[i]
        jam = Sum()
        for h in range(12, 23):
            cond = pz.inv() * bits_are(r2[3:], h)
            if h == 12:
                cond = cond * Sum.lit(r2[2])  # r2 >= 100
            below = []
            for q in range(31):
                at = 147 - 8 * h + q
                if at >= 1:
                    if at < W:
                        outs[(cp, at)] = outs[(cp, at)] + cond * Sum.lit((c1, q))
                    else:  # would need q > 26, i.e. r2 mod 8 < 4: never with h = 12
                        assert h == 12
                else:
                    below.append((c1, q))
            if below:
                jam = jam + cond * any_set(below)
        big = pz.inv() * Sum.lit(r2[9], 0) * ge_const(r2[:9], 184) * Sum.lit(self.znz)
        outs[(cp, 0)] = outs[(cp, 0)] + jam + big
        self.emit("al2", {d: s.simplified(80) for d, s in outs.items()}, 4, ALIGN)

    def frame(self) -> None:
        """B = EZ + 51 when clamped, else EX + EY - 49 (9 bits, 52..459)."""
        bb = self.B = self.f("B", 9)
        clamp = self.clamp
        self.emit("frame", {(bb, k): (clamp * Sum.lit((self.zb, k)) + clamp.inv()
                                      * Sum.lit((self.s49, k))).simplified()
                            for k in range(9)}, 4, EXPONENT)

    # --- layers 5-7: the sum ------------------------------------------------------------------

    def add(self) -> None:
        vpos = self.vpos = list(range(PROD + 1, PROD + 49))  # where v can be 1
        gen = self.gen_blocks = sorted({i // BLOCK for i in vpos})  # blocks that can generate
        u, v, blocks = self.f("u", W), self.f("v", len(vpos)), self.f("V", len(gen))
        self.at = {i: k for k, i in enumerate(vpos)}
        self.bat = {m: k for k, m in enumerate(gen)}
        sub = Sum.lit(self.sub)
        outs: dict[Dim, Sum] = {}

        def add_to(d: Dim, s: Sum) -> None:
            outs[d] = outs.get(d, Sum()) + s

        def block(i: int, s: Sum) -> None:  # i's share of its block's count
            if i // BLOCK in self.bat:
                add_to((blocks, self.bat[i // BLOCK]), s * (1 << i % BLOCK))

        for i in range(W):
            w = xor(Sum.lit((self.cp, i)), sub)
            if PROD <= i < PROD + 48:
                x, y = Sum.lit((self.x, i - PROD)), Sum.lit((self.y, i - PROD))
                us, vs = xor(x, y, Sum.lit((self.cp, i)), sub), maj(x, y, w)
                add_to((v, self.at[i + 1]), vs)
                block(i + 1, vs)
            else:
                us = w
            add_to((u, i), us)
            block(i, us)
        self.emit("csa", outs, 5, ADD)  # u, v simplified: the block counts reuse their terms
        self.u, self.v = u, v
        # layer 6: propagate bits where v exists; block generate / propagate
        p, gp = self.p, self.gp = self.f("p", len(vpos)), self.f("gp", 2 * len(gen))
        prop = {(p, self.at[i]): xor(Sum.lit((u, i)), Sum.lit((v, self.at[i]))) for i in vpos}
        extra = []
        for m, k in self.bat.items():
            extra.append(Rule((), (((gp, 2 * k + 1), 1),), f"P{m}",
                              count=((blocks, k), (1 << BLOCK) - 1)))
            extra.append(Rule((), (((gp, 2 * k + 1), -1), ((gp, 2 * k), 1)), f"G{m}",
                              count=((blocks, k), 1 << BLOCK)))
        self.emit("prop", prop, 6, ADD, extra=extra)
        # layer 7: R = u + v by block carry lookahead; cout
        r = self.R = self.f("R", W)
        cout = self.cout = self.fl("cout")
        nb = -(-W // BLOCK)

        def pl(i: int) -> Literal_:
            return ((p, self.at[i]), 1) if i in self.at else ((u, i), 1)

        def gl(i: int) -> Sum:
            return Sum.of(((u, i), 1), ((p, self.at[i]), 0))

        def P(m: int) -> Sum:
            if m in self.bat:
                return Sum.lit((gp, 2 * self.bat[m] + 1))
            return conj(pl(i) for i in range(BLOCK * m, min(BLOCK * m + BLOCK, W)))

        def G(m: int) -> Sum:
            return Sum.lit((gp, 2 * self.bat[m]))

        def carry(i: int) -> Sum:
            b, s0 = i // BLOCK, BLOCK * (i // BLOCK)
            out = Sum()
            for k in range(s0, i):
                if k in self.at:
                    out = out + gl(k) * conj(pl(j) for j in range(k + 1, i))
            for m in gen:
                if m < b:
                    t = G(m)
                    for mm in range(m + 1, b):
                        t = t * P(mm)
                    out = out + t * conj(pl(j) for j in range(s0, i))
            return out

        outs = {}
        for i in range(W):
            pi = Sum.of(pl(i))
            cy = carry(i)
            outs[(r, i)] = pi + cy * pi.inv() - cy * pi
        co = Sum()
        for m in gen:
            t = G(m)
            for mm in range(m + 1, nb):
                t = t * P(mm)
            co = co + t
        outs[cout] = co
        self.emit("sum", outs, 7, ADD)

    # --- markers: the subnormal boundary, exponent 127 and 255 --------------------------------

    def thresholds(self) -> None:
        """One-hot markers over window positions, from B: mk[i] = [B == JB0 - i] (the subnormal
        boundary: a leading one below i gives a subnormal), tm[i] = [B == 255 - i] or
        [B == 383 - i] (a leading one at i or above gives an exponent >= 127, or >= 255 in
        the second range: the value ranges are disjoint, the window narrower than 128), and
        the flags mid = [B >= 256] (every leading one gives an exponent >= 127), hi = [B >= 306]
        (tm marks 255), big = [B >= 384] (every leading one overflows)."""
        bd = [(self.B, k) for k in range(9)]
        mk, tm = self.mk, self.tm = self.f("mk", W), self.f("tm", W)
        self.emit("mk", {(mk, i): bits_are(bd, JB0 - i) for i in range(W)}, 7, LIMITS)
        outs = {(tm, i): bits_are(bd, 255 - i) + bits_are(bd, 383 - i) for i in range(W)}
        self.mid, self.hi, self.big = (self.fl(x) for x in ("mid", "hi", "big"))
        outs[self.mid], outs[self.hi], outs[self.big] = (ge_const(bd, k) for k in (256, 306, 384))
        self.emit("tm", outs, 8, LIMITS)

    # --- layer 8: magnitude, leading one ------------------------------------------------------

    def magnitude(self) -> None:
        r, cout, sub = self.R, self.cout, self.sub
        add = Sum.lit(sub, 0)
        s0 = Sum.of((sub, 1), (cout, 0))  # difference negative: M = NOT R
        s1 = Sum.of((sub, 1), (cout, 1))  # positive: M = R + 1

        def rz(lo: int, hi: int) -> Sum:  # R's bits lo..hi-1 all 0
            return all_eq([(r, i) for i in range(max(lo, 0), min(hi, W))], 0)

        def ro(lo: int, hi: int) -> Sum:
            return all_eq([(r, i) for i in range(max(lo, 0), min(hi, W))], 1)

        def rb(i: int, v: int = 1) -> Sum:
            return Sum.lit((r, i), v)

        m = self.M = self.f("M", W)
        outs: dict[Dim, Sum] = {}
        for i in range(W):
            outs[(m, i)] = (add * rb(i) + s0 * rb(i, 0)
                            + s1 * (rb(i) - rb(i) * ro(0, i) + rb(i, 0) * ro(0, i)))
        # the shift position J: the leading one j when at or above the boundary (no marker
        # above j), else the boundary (fake: a subnormal, exponent 0)
        fake, jj = self.fake, self.J = self.fl("fake"), self.f("J", 7)
        mk = self.mk
        for j in range(W):
            real = (add * rz(j + 1, W) * rb(j) + s0 * ro(j + 1, W) * rb(j, 0)
                    + s1 * rz(j + 1, W) * (rb(j) - rb(j) * ro(0, j) + rb(j, 0) * ro(0, j)))
            real = real * all_eq([(mk, i) for i in range(j + 1, W)], 0)
            fk = Sum.lit((mk, j)) * (add * rz(j, W) + s0 * ro(j, W)
                                     + s1 * (rz(j, W) - rz(j, W) * ro(0, j)))
            outs[fake] = outs.get(fake, Sum()) + fk
            for k in range(7):
                if j >> k & 1:
                    outs[(jj, k)] = outs.get((jj, k), Sum()) + real + fk
        zero = self.zero = self.fl("zero")
        outs[zero] = add * rz(0, W) + s0 * ro(0, W)
        sign = self.sign = self.fl("sign")
        ps, rm = Sum.lit(self.ps), Sum.of((self.ctl.rnd[0], 0), (self.ctl.rnd[1], 1))
        outs[sign] = (add * ps + s1 * ps + s0 * ps.inv() - s0 * ps.inv() * ro(0, W)
                      + s0 * ro(0, W) * rm)
        self.emit("lead", {d: s.simplified() for d, s in outs.items()}, 8, LEAD)

    # --- layers 9(-10): normalising shift; flags ---------------------------------------------

    def normalize(self) -> None:
        m, jd = self.M, [(self.J, k) for k in range(7)]
        ns = self.NS = self.f("NS", 24)  # NS[0] guard, NS[1..23] the fraction
        st = self.st = self.fl("sticky")
        layer = 9
        outs: dict[Dim, Sum] = {}
        if self.ns == 1:
            for j in range(W):
                at = bits_are(jd, j)
                for k in range(24):
                    if j - 24 + k >= 0:
                        outs[(ns, k)] = outs.get((ns, k), Sum()) + at * Sum.lit((m, j - 24 + k))
                if j - 24 > 0:
                    outs[st] = outs.get(st, Sum()) + at * any_set([(m, i) for i in range(j - 24)])
            self.emit("norm", outs, layer, NORMALIZE)
        else:  # coarse: by J div 8 into CS (31 positions); fine: by J mod 8
            hi, lo = jd[3:], jd[:3]
            cs, st0 = self.f("CS", 31), self.fl("sticky0")
            for h in range(-(-W // 8)):
                at = bits_are(hi, h)
                for n in range(31):
                    i = 8 * h - 24 + n
                    if 0 <= i < W:
                        outs[(cs, n)] = outs.get((cs, n), Sum()) + at * Sum.lit((m, i))
                if 8 * h - 24 > 0:
                    outs[st0] = outs.get(st0, Sum()) + at * any_set(
                        [(m, i) for i in range(8 * h - 24)])
            self.emit("normc", outs, layer, NORMALIZE)
            layer += 1
            outs = {}
            for v in range(8):
                at = bits_are(lo, v)
                for k in range(24):
                    outs[(ns, k)] = outs.get((ns, k), Sum()) + at * Sum.lit((cs, v + k))
                outs[st] = outs.get(st, Sum()) + at * any_set([st0] + [(cs, i) for i in range(v)])
            self.emit("normf", outs, layer, NORMALIZE)
        self.last = layer + 1
        # flags (beside the shift): exponent lookahead layer 1 (pe = B' XOR J, B' = B + 128
        # mod 256), overflow, sat's clamp, ftz's flush
        pe = self.pe = self.f("pe", 8)
        outs = {}
        for k in range(8):
            bk = Sum.lit((self.B, k), 0 if k == 7 else 1)
            outs[(pe, k)] = xor(bk, Sum.lit((self.J, k))) if k < 7 else bk
        sat, sign = Sum.lit(self.ctl.sat), Sum.lit(self.sign)
        nz = Sum.of((self.nan, 0), (self.inf, 0), (self.zero, 0))  # a finite non-zero result
        mid, hi, big = (Sum.lit(d) for d in (self.mid, self.hi, self.big))
        above = Sum()  # the leading one is at or above tm's marker
        for i in range(W):
            above = above + Sum.lit((self.tm, i)) * any_set([(m, k) for k in range(i, W)])
        ovf = big + hi * big.inv() * above
        ge = mid + mid.inv() * above
        okv, ov, one, fz = (self.fl(x) for x in ("okv", "ovf", "one", "fz"))
        outs[okv] = nz * ((1 - ovf) * sat.inv() + sat * sign.inv() * (1 - ge))
        outs[ov] = nz * ovf * sat.inv()
        outs[one] = (nz * sat * sign.inv() * ge
                     + Sum.of((self.inf, 1), (self.ctl.sat, 1), (self.infs, 0)))
        outs[fz] = Sum.of((self.ctl.ftz, 1), (self.fake, 1))
        self.emit("flags", {d: s.simplified(80) for d, s in outs.items()}, 9, LIMITS)
        self.okv, self.ovf, self.one, self.fz = okv, ov, one, fz

    # --- last layer: round, exponent, select --------------------------------------------------

    def finish(self) -> None:
        ns, st, sign = self.NS, self.st, Sum.lit(self.sign)
        r0, r1 = self.ctl.rnd
        mode = {rn: Sum.of((r0, rn & 1), (r1, rn >> 1)) for rn in range(4)}
        g, lsb, sk = Sum.lit((ns, 0)), Sum.lit((ns, 1)), Sum.lit(st)
        up = (mode[0] * (g * sk + g * sk.inv() * lsb)
              + mode[2] * sign * (g + g.inv() * sk) + mode[3] * sign.inv() * (g + g.inv() * sk))
        up = up.simplified()
        frac = [Sum.lit((ns, 1 + f)) for f in range(23)]
        okv, ovf, fz = Sum.lit(self.okv), Sum.lit(self.ovf), Sum.lit(self.fz)
        fake = Sum.lit(self.fake)
        nan = Sum.lit(self.nan) * Sum.lit(self.ctl.sat, 0)
        inf = Sum.lit(self.inf) * Sum.lit(self.ctl.sat, 0)
        to_inf = (mode[0] + mode[3] * sign.inv() + mode[2] * sign).simplified()
        out = self.out
        outs: dict[Dim, Sum] = {}
        keep = okv * fz.inv()
        for f in range(23):
            ones = conj(((ns, 1 + i), 1) for i in range(f))
            inc = frac[f] + up * ones * (frac[f].inv() - frac[f])
            outs[(out, f)] = keep * inc + ovf * to_inf.inv() + nan
        # exponent: B' + J + the fraction's carry out (8 bits); at the boundary just the carry
        pe = [Sum.lit((self.pe, k)) for k in range(8)]
        cf = up * conj(((ns, 1 + i), 1) for i in range(23))
        bprime = [Sum.lit((self.B, k), 0 if k == 7 else 1) for k in range(8)]
        for k in range(8):
            cy = cf * conj(((self.pe, i), 1) for i in range(k))
            for j in range(k):
                cy = cy + bprime[j] * pe[j].inv() * conj(((self.pe, i), 1)
                                                          for i in range(j + 1, k))
            e = fake.inv() * (pe[k] + cy * pe[k].inv() - cy * pe[k]) + (fake * cf if k == 0
                                                                         else Sum())
            outs[(out, 23 + k)] = (okv * e + ovf * (to_inf if k == 0 else Sum.const(1)) + nan
                                   + inf + Sum.lit(self.one) * (1 if k < 7 else 0))
        outs[(out, 31)] = (Sum.of((self.nan, 0), (self.inf, 0), (self.ctl.sat, 0)) * sign
                           + inf * Sum.lit(self.infs))
        self.emit("out", {d: s.simplified(80) for d, s in outs.items()}, self.last, FINISH,
                  when=self.when)


def stage_costs(g: Graph, unit: FloatUnit) -> list[tuple[int, str, str, int]]:
    """(layer, stage, rule group, neurons) of every rule group of the unit, by layer (count
    steps are neuron pairs; the scheduler's clears come on top)."""
    return sorted((layer, stage, group, sum(r.neurons for r in g.rules[group]))
                  for group, (layer, stage) in unit.stages.items())
