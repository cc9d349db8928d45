"""The float unit prototype (qgpu/circuits/gpu/float_unit.py) is bit for bit float32's FADD,
FSUB, FMUL and FFMA in every rounding mode, with and without ftz and sat: on the weight-free
evaluator over special values, random operands and targeted corner cases, and compiled into
2B-shaped Qwen3.5 layers in float32 and bfloat16.

The unit holds no memory, so its tokens are independent: ``Batch`` runs the evaluator's
semantics (rule groups in dependency order, every literal dim 0/1 and every count 0..64 when
read, else ``CircuitError``) on a whole batch of tokens at once, each rule group as two small
matrix products; ``test_batch_is_the_evaluator`` holds it against ``Evaluator`` feature by
feature. ``pytest -s -k costs`` prints the cost report.
"""

from __future__ import annotations

import functools
import itertools
import random
from fractions import Fraction

import numpy as np
import pytest
import torch

from qgpu.circuits.gpu import float_unit as fu
from qgpu.compiler import numerics as nx
from qgpu.compiler.circuit_model import build_circuit_model, run_layers
from qgpu.compiler.evaluate import CircuitError, Evaluator
from qgpu.compiler.graph import Graph
from qgpu.compiler.schedule import rule_neurons, schedule
from qgpu.compiler.weights import embed
from qgpu.machine import float32 as F
from tests.compiler.helpers import SHAPE, bits, live_values

OPS = ("add", "sub", "mul", "fma")
ROUNDS = tuple(F.Round)
Case = tuple[str, int, int, int, int, bool, bool]  # op, a, b, c, rounding, ftz, sat

SPECIALS = [0, 1, 2, 0x0000_0FFF, 0x007F_FFFF, 0x0040_0000, 0x0080_0000, 0x0080_0001,
            0x00FF_FFFF, 0x0C00_0000, 0x1F80_0000, 0x3380_0000, 0x3F00_0000, 0x3F80_0000,
            0x3F80_0001, 0x3F7F_FFFF, 0x3FFF_FFFF, 0x4B80_0000, 0x5F80_0000, 0x7F00_0000,
            0x7F7F_FFFF, 0x7F80_0000, 0x7F80_0001, 0x7FC0_0000, 0x7FFF_FFFF]
SPECIALS += [w | F.SIGN for w in SPECIALS]
"""±0, subnormals (min, max, half, small), the min normal and its neighbours, powers of two
around 1 and far away, all-ones significands, max, infinities, NaNs."""
TRIPLE_SPECIALS = [0, 1, 0x007F_FFFF, 0x0080_0000, 0x3F80_0000, 0x3FFF_FFFF, 0x7F7F_FFFF,
                   0x7F80_0000]
TRIPLE_SPECIALS += [w | F.SIGN for w in TRIPLE_SPECIALS] + [0x7FC0_0000]


def reference(case: Case) -> int:
    op, a, b, c, rnd, ftz, sat = case
    mode = (F.Round(rnd), ftz, sat)
    if op == "fma":
        return F.fma(a, b, c, *mode)
    return {"add": F.add, "sub": F.sub, "mul": F.mul}[op](a, b, *mode)


def modes(base: list[tuple[str, int, int, int]], seed: int = 0) -> list[Case]:
    """Every base case in every rounding mode, ftz and sat taking each combination in turn."""
    out = []
    for k, (op, a, b, c) in enumerate(base):
        for rnd in ROUNDS:
            flags = (k + rnd + seed) % 4
            out.append((op, a, b, c, int(rnd), bool(flags & 1), bool(flags & 2)))
    return out


# --- the unit and a batched evaluator ---------------------------------------------------------


def control() -> fu.Control:
    return fu.Control(*(("ctl", i) for i in range(4)), (("ctl", 4), ("ctl", 5)), ("ctl", 6),
                      ("ctl", 7))


@functools.cache
def unit(stages: int = 1, when: bool = False) -> tuple[Graph, fu.FloatUnit]:
    """A graph holding the unit alone: token inputs a, b, c (words), ctl (the op one-hot, the
    rounding mode's two bits, ftz, sat) and, with `when`, a 1-dim run flag."""
    g = Graph()
    for f in "abc":
        g.feature(f, 32, token_input=True)
    g.feature("ctl", 8, token_input=True)
    g.feature("out", 32)
    gate = ()
    if when:
        g.feature("run", 1, token_input=True)
        gate = ((("run", 0), 1),)
    return g, fu.float_fma(g, "fu", "a", "b", "c", control(), "out", when=gate,
                           normalize_stages=stages)


def token(case: Case) -> dict[str, list[int]]:
    op, a, b, c, rnd, ftz, sat = case
    ctl = [int(op == o) for o in OPS] + [rnd & 1, rnd >> 1, int(ftz), int(sat)]
    return {"a": bits(a, 32), "b": bits(b, 32), "c": bits(c, 32), "ctl": ctl}


class Batch:
    """The evaluator's semantics on a batch of independent tokens: a rule fires when the sum of
    its literal dims (+1 for dim = 1, -1 for dim = 0) reaches its number of positive literals
    (and its count condition holds), and its deltas add to its dims."""

    def __init__(self, g: Graph) -> None:
        ev = self.ev = Evaluator(g)
        assert not g.banks
        self.plan = []
        for _, name in ev.order:
            grp = ev.groups[name]
            lits = grp.literal_dims[grp.literal_dims != ev.one]
            row = {d: i for i, d in enumerate(lits)}
            n = len(grp.k)
            sign, need = np.zeros((len(lits), n), np.float32), np.zeros(n, np.float32)
            for j, m in zip(*np.nonzero(grp.lit != ev.one), strict=True):
                want = grp.want[j, m]
                sign[row[grp.lit[j, m]], j] += 1 if want else -1
                need[j] += want
            targets = np.unique(grp.target)
            col = {d: i for i, d in enumerate(targets)}
            deltas = np.zeros((n, len(targets)), np.float32)
            for r, t, x in zip(grp.rule_of, grp.target, grp.delta, strict=True):
                deltas[r, col[t]] += x
            counted = grp.count != ev.one
            self.plan.append((name, lits, sign, need, grp.count_dims, counted, targets, deltas,
                              grp.count[counted], grp.minus[counted], grp.k[counted]))

    def run(self, tokens: list[dict[str, list[int]]]) -> np.ndarray:
        ev = self.ev
        v = np.zeros((len(tokens), ev.size), np.float32)  # small integers: exact
        v[:, ev.one] = 1
        for r, t in enumerate(tokens):
            for name, x in t.items():
                v[r, ev.offset[name]:ev.offset[name] + len(x)] = x
        for name, lits, sign, need, cdims, counted, targets, deltas, cnt, minus, k in self.plan:
            lv, cv = v[:, lits], v[:, cdims]
            if ((lv != 0) & (lv != 1)).any():
                r, i = np.argwhere((lv != 0) & (lv != 1))[0]
                raise CircuitError(f"{name}: {ev.where[int(lits[i])]} = {lv[r, i]} is not 0/1 "
                                   f"(token {r})")
            if ((cv < 0) | (cv > nx.COUNT_MAX)).any():
                r, i = np.argwhere((cv < 0) | (cv > nx.COUNT_MAX))[0]
                raise CircuitError(f"{name}: count {ev.where[int(cdims[i])]} = {cv[r, i]} "
                                   f"(token {r})")
            fires = lv @ sign == need
            fires[:, counted] &= v[:, cnt] - v[:, minus] >= k
            v[:, targets] += fires.astype(np.float32) @ deltas
        return v

    def feature(self, v: np.ndarray, name: str) -> np.ndarray:
        o = self.ev.offset[name]
        return v[:, o:o + self.ev.g.features[name].size]


@functools.cache
def batch(stages: int = 1, when: bool = False) -> Batch:
    return Batch(unit(stages, when)[0])


def words(x: np.ndarray) -> list[int]:
    return [int(w) for w in (x.astype(np.int64) << np.arange(32)).sum(axis=1)]


def results(cases: list[Case], stages: int = 1) -> list[int]:
    out = []
    for i in range(0, len(cases), 4096):
        chunk = cases[i:i + 4096]
        bt = batch(stages)
        out += words(bt.feature(bt.run([token(c) for c in chunk]), "out"))
    return out


def assert_exact(cases: list[Case], stages: int = 1) -> None:
    got = results(cases, stages)
    bad = [(c[0], hex(c[1]), hex(c[2]), hex(c[3]), F.Round(c[4]).name, c[5], c[6], hex(w),
            hex(reference(c))) for c, w in zip(cases, got, strict=True) if w != reference(c)]
    assert not bad, f"{len(bad)} of {len(cases)} differ, e.g. {bad[:5]}"


# --- cases --------------------------------------------------------------------------------------


def word(sign: int, exp: int, frac: int) -> int:
    return sign << 31 | exp << 23 | frac


def random_word(rng: random.Random) -> int:
    """Mostly ordinary numbers near 1, some anywhere, some subnormal or tiny, some special."""
    k = rng.random()
    if k < 0.08:
        return rng.choice(SPECIALS)
    if k < 0.4:
        return word(rng.getrandbits(1), rng.randrange(100, 155), rng.getrandbits(23))
    if k < 0.5:
        return word(rng.getrandbits(1), rng.randrange(0, 4), rng.getrandbits(23))
    return rng.getrandbits(32)


def random_cases(op: str, n: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b, c = (random_word(rng) for _ in range(3))
        if op == "fma" and rng.random() < 0.25:  # c near -(a * b): cancellation
            c = F.mul(a, b, F.Round(rng.randrange(4))) ^ F.SIGN ^ rng.getrandbits(2)
        out.append((op, a, b, c, rng.randrange(4), rng.random() < 0.3, rng.random() < 0.15))
    return out


def value(w: int) -> Fraction:
    return Fraction(F.to_float(w))


def targeted() -> dict[str, list[tuple[str, int, int, int]]]:
    rng = random.Random(11)

    def normal(lo: int = 100, hi: int = 155, frac_bits: int = 23) -> int:
        f = rng.getrandbits(frac_bits) << (23 - frac_bits)
        return word(rng.getrandbits(1), rng.randrange(lo, hi), f)

    cases: dict[str, list[tuple[str, int, int, int]]] = {}
    # a * b exact (12 significant bits each), c its negation; a + (-a), a - a
    out = []
    for _ in range(120):
        a, b = normal(80, 170, 11), normal(80, 170, 11)
        out += [("fma", a, b, F.mul(a, b) ^ F.SIGN), ("add", a, a ^ F.SIGN, 0),
                ("sub", a, a, 0), ("fma", a, F.ONE, a ^ F.SIGN)]
    cases["exact cancellation"] = out
    # c = -(a * b) rounded (the result is a * b's rounding error), a - (a +- k ulps)
    out = []
    for _ in range(150):
        a, b = normal(), normal()
        for rnd in (F.Round.RN, F.Round.RZ):
            out.append(("fma", a, b, F.mul(a, b, rnd) ^ F.SIGN))
        k = rng.randrange(1, 9)
        out += [("sub", a, a + k if (a + k) & F.EXPONENT == a & F.EXPONENT else a - k, 0),
                ("fma", a, b, (F.mul(a, b) ^ F.SIGN) + rng.randrange(-3, 4))]
    cases["massive cancellation"] = out
    # c far above or below the product: 24..28, 48..52, 75..80, 100 exponents away
    out = []
    for _ in range(40):
        a, b = normal(110, 145), normal(110, 145)
        pe = (a >> 23 & 255) + (b >> 23 & 255) - 127
        for d in (24, 25, 26, 27, 28, 48, 49, 50, 51, 52, 75, 76, 77, 79, 80, 100):
            for s in (1, -1):
                e = min(max(pe + s * d, 1), 254)
                out.append(("fma", a, b, word(rng.getrandbits(1), e, rng.getrandbits(23))))
    cases["far addends"] = out
    # products at the subnormal boundary (just below the min normal: rounding up reaches it),
    # subnormal sums
    out = []
    tiny = Fraction(1, 2**126)
    for _ in range(120):
        a = normal(90, 160)
        target = tiny - Fraction(rng.randrange(0, 8), 2**152)
        b = F.from_fraction(target / abs(value(a)), F.Round(rng.randrange(4)))
        c = rng.choice([0, F.SIGN, 1, F.SIGN | 1, word(0, 0, rng.getrandbits(23))])
        out += [("mul", a, b, 0), ("fma", a, b, c),
                ("mul", a, word(0, rng.randrange(1, 40), rng.getrandbits(23)), 0),
                ("add", word(rng.getrandbits(1), 0, rng.getrandbits(23)),
                 word(rng.getrandbits(1), rng.randrange(0, 2), rng.getrandbits(23)), 0)]
    cases["subnormal results"] = out
    # overflow: products and sums at 2^128
    out = []
    big = [F.MAX_FINITE, 0x7F7F_FFFE, 0x7F00_0000, 0x7F40_0000]
    for _ in range(40):
        a = word(rng.getrandbits(1), rng.randrange(250, 255), rng.getrandbits(23))
        b = word(rng.getrandbits(1), rng.randrange(125, 131), rng.getrandbits(23))
        m = rng.choice(big) | rng.getrandbits(1) << 31
        half = word(rng.getrandbits(1), 103, rng.choice([0, 0, 1, 0x7FFFFF]))
        out += [("mul", a, b, 0), ("fma", a, b, m), ("add", m, half, 0),
                ("add", m, m, 0), ("sub", m, m ^ F.SIGN, 0), ("fma", m, F.ONE, half)]
    cases["overflow"] = out
    # ties: an addend of exactly half an ulp; products with 25 significant bits
    out = []
    for _ in range(150):
        a = normal(30, 220)
        e = (a >> 23 & 255) - 24
        h = word(rng.getrandbits(1), e, 0)
        out += [("add", a, h, 0), ("sub", a, h, 0), ("fma", a, F.ONE, h),
                ("add", a, word(h >> 31, e + 1, 1 << 22), 0)]  # 3/2 ulp
        while True:
            x, y = rng.getrandbits(12) | 1 << 12, rng.getrandbits(12) | 1 << 12
            p = x * y
            if p >> (p.bit_length() - 25) & 1 and not p & ((1 << (p.bit_length() - 25)) - 1):
                break
        a = word(rng.getrandbits(1), rng.randrange(100, 150), (x - (1 << 12)) << 11)
        b = word(rng.getrandbits(1), rng.randrange(100, 150), (y - (1 << 12)) << 11)
        out += [("mul", a, b, 0), ("fma", a, b, 0), ("fma", a, b, F.SIGN)]
    cases["ties"] = out
    return cases


TARGETED = targeted()


# --- tests ----------------------------------------------------------------------------------------


def test_batch_is_the_evaluator() -> None:
    """Every feature of the graph, token by token: Batch gives what Evaluator gives."""
    rng = random.Random(1)
    cases = [c for op in OPS for c in random_cases(op, 6, 5)]
    cases += [("fma", rng.choice(SPECIALS), rng.choice(SPECIALS), rng.choice(SPECIALS),
               rng.randrange(4), rng.random() < 0.5, rng.random() < 0.5) for _ in range(8)]
    for stages in (1, 2):
        g, bt = unit(stages)[0], batch(stages)
        got = bt.run([token(c) for c in cases])
        ev = Evaluator(g)
        for i, c in enumerate(cases):
            want = ev.step(token(c))
            for name in g.features:
                assert bt.feature(got[i:i + 1], name)[0].tolist() == want[name], (i, name)


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_every_pair_of_special_values(op: str) -> None:
    cases = modes([(op, a, b, 0x5A5A_5A5A) for a, b in itertools.product(SPECIALS, repeat=2)])
    assert_exact(cases)


def test_every_triple_of_special_values() -> None:
    """FFMA on every triple of a shorter list (±0, ±min and max subnormal, ±min normal, ±1,
    ±an all-ones significand, ±max, ±inf, NaN) in every rounding mode."""
    assert_exact(modes([("fma", a, b, c)
                        for a, b, c in itertools.product(TRIPLE_SPECIALS, repeat=3)]))


@pytest.mark.parametrize("op", OPS)
def test_random_operands_in_every_rounding_mode(op: str) -> None:
    """2,000 random operand triples per rounding mode, ftz and sat at random."""
    cases = random_cases(op, 8000, seed=OPS.index(op))
    assert min(sum(c[4] == rnd for c in cases) for rnd in range(4)) > 1900
    assert_exact(cases)


@pytest.mark.parametrize("name", list(TARGETED))
def test_targeted_cases(name: str) -> None:
    cases = modes(TARGETED[name], seed=len(name))
    assert_exact(cases)
    want = [reference(c) for c in cases]
    if name == "exact cancellation":  # they do cancel
        assert all(w & F.MAGNITUDE == 0 for w in want)
    if name == "massive cancellation":  # most results are far below the operands
        drops = [(max(c[1] & F.EXPONENT, c[2] & F.EXPONENT) - (w & F.EXPONENT)) >> 23
                 for c, w in zip(cases, want, strict=True) if w & F.MAGNITUDE]
        assert sum(d >= 20 for d in drops) > len(drops) // 3
    if name == "subnormal results":  # some round up to the min normal, some stay subnormal
        assert 0x0080_0000 in {w & F.MAGNITUDE for w in want}
        assert any(0 < w & F.MAGNITUDE < 0x0080_0000 for w in want)
    if name == "overflow":  # overflows round to inf or to max by mode
        assert {w & F.MAGNITUDE for w in want} >= {F.INF, F.MAX_FINITE}


def test_two_stage_normalising_shift() -> None:
    """normalize_stages=2 (coarse by 8, then fine) computes the same words."""
    cases = [c for op in OPS for c in random_cases(op, 1000, seed=10 + OPS.index(op))]
    cases += [c for k, name in enumerate(TARGETED) for c in modes(TARGETED[name][::2], seed=k)]
    cases += modes([(op, a, b, 0) for op in ("add", "mul")
                    for a, b in itertools.product(SPECIALS[::3], repeat=2)])
    assert_exact(cases, stages=2)


def test_when_gates_the_result_and_no_operation_keeps_the_invariants() -> None:
    rng = random.Random(4)
    cases = [c for op in OPS for c in random_cases(op, 50, seed=20)]
    bt = batch(1, when=True)
    for run in (0, 1):
        out = words(bt.feature(bt.run([token(c) | {"run": [run]} for c in cases]), "out"))
        assert out == ([reference(c) for c in cases] if run else [0] * len(cases))
    idle = [token(("none", rng.getrandbits(32), rng.getrandbits(32), rng.getrandbits(32),
                   rng.randrange(4), rng.random() < 0.5, rng.random() < 0.5))
            for _ in range(500)]
    assert all(t["ctl"][:4] == [0, 0, 0, 0] for t in idle)
    batch(1).run(idle)  # every dim 0/1 or a count in range: no CircuitError


# neurons per layer of the unit's own rule groups (stage_costs), and the scheduler's result
COSTS = {1: {1: 1179, 2: 1230, 3: 778, 4: 768, 5: 684, 6: 136, 7: 1264, 8: 1258, 9: 2008,
             10: 411},
         2: {1: 1179, 2: 1230, 3: 778, 4: 768, 5: 684, 6: 136, 7: 1264, 8: 1258, 9: 604,
             10: 207, 11: 411}}


@functools.cache
def scheduled(stages: int):
    return schedule(unit(stages)[0], SHAPE)


@pytest.mark.parametrize("stages", [1, 2])
def test_costs(stages: int) -> None:
    """The documented neurons per layer; scheduled alone into 2B-shaped layers the unit takes
    10 layers (11 with the two-stage shift) and under 200 residual dims, its inputs included."""
    g, u = unit(stages)
    rows = fu.stage_costs(g, u)
    per: dict[int, int] = {}
    for layer, _, _, n in rows:
        per[layer] = per.get(layer, 0) + n
    assert per == COSTS[stages]
    sched = scheduled(stages)
    assert sched.layers == 9 + stages
    assert sched.k_used <= 200
    used: dict[int, int] = {}
    for name, (layer, _) in sched.neurons.items():
        used[layer] = used.get(layer, 0) + rule_neurons(sched.graph.rules[name])
    for f, (layer, _) in sched.clears.items():
        used[layer] = used.get(layer, 0) + sched.graph.features[f].size
    print(f"\nfloat unit, {stages}-stage normalising shift: {sched.layers} layers, "
          f"K = {sched.k_used} (inputs a, b, c, ctl: 104; reserved: 3)")
    for layer, stage, group, n in rows:
        print(f"  layer {layer:2}  {n:5}  {group:12} {stage}")
    print("  scheduled neurons per layer (with clears):",
          [used.get(x, 0) for x in range(sched.layers)], "total", sum(used.values()))


@pytest.fixture
def one_thread():
    """Torch on one thread: on a shared two-core machine a second one only thrashes."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_compiled_layers_are_exact(dtype: str, one_thread) -> None:
    """The scheduled unit compiled into Qwen3.5 layers (2B shapes): a sequence of 24 tokens in
    one pass (and, in float32, its first 3 token by token) gives the reference words."""
    rng = random.Random(7)
    cases = [c for op in OPS for c in random_cases(op, 3, seed=30 + OPS.index(op))]
    cases += [c for name in TARGETED for c in rng.sample(modes(TARGETED[name]), 1)]
    cases += [("fma", 0x7F80_0000, 0, 0x3F80_0000, 0, False, False),
              ("mul", 0x0080_0000, 0x3F00_0000, 0, 3, True, False),
              ("add", 0x7F7F_FFFF, 0x7F7F_FFFF, 0, 1, False, True)]
    assert len(cases) <= 24
    sched = scheduled(1)
    model, k = build_circuit_model(sched, dtype)
    embeds = torch.stack([embed(sched, k, k, token(c)) for c in cases])
    want = [reference(c) for c in cases]
    for step, n in ((False, len(cases)), (True, 3 if dtype == "float32" else 0)):
        if n:
            out = live_values(sched, run_layers(model, embeds[:n], step=step))["out"]
            assert set(out.unique().tolist()) <= {0.0, 1.0}
            assert words(out.numpy()) == want[:n], (dtype, step)
