"""Count rules: a dim holding an integer sum (0..COUNT_MAX) and rules that fire on "count >= k"
(a neuron pair) — the popcount of 32 bits turned into its binary digits, gated by a literal,
exact in real 2B-shaped layers, float32 and bfloat16, prefill and token by token."""

import random

import pytest

from qgpu.compiler import numerics as nx
from qgpu.compiler.evaluate import CircuitError, evaluate
from qgpu.compiler.graph import Graph, Rule
from tests.compiler.helpers import MODES, assert_exact, bits


def popcount_graph(n: int = 32) -> Graph:
    g = Graph()
    g.feature("x", n, token_input=True)
    g.feature("on", 1, token_input=True)
    g.feature("c", 1)  # the count
    g.rule_group("sum", [Rule(((("x", i), 1),), ((("c", 0), 1),)) for i in range(n)])
    g.feature("p", 6)  # popcount in binary, only when `on`
    g.rule_group("digits", [
        Rule(((("on", 0), 1),), tuple((("p", b), (m >> b & 1) - ((m - 1) >> b & 1))
                                      for b in range(6) if (m >> b & 1) != ((m - 1) >> b & 1)),
             count=(("c", 0), m))
        for m in range(1, n + 1)])
    return g


@pytest.mark.parametrize("dtype,step", MODES)
def test_popcount_digits_from_count_steps(dtype: str, step: bool) -> None:
    rng = random.Random(6)
    values = [0, 0xFFFFFFFF, 1, 0x80000000] + [rng.getrandbits(32) for _ in range(40)]
    tokens = [{"x": bits(v, 32), "on": [int(i % 5 != 0)]} for i, v in enumerate(values)]
    got = evaluate(popcount_graph(), tokens)
    for t, v, out in zip(tokens, values, got, strict=True):
        assert out["p"] == (bits(bin(v).count("1"), 6) if t["on"][0] else [0] * 6)
    assert_exact(popcount_graph(), tokens, dtype, step)


def test_counts_must_be_small_integers() -> None:
    g = Graph()
    g.feature("c", 1, token_input=True)
    g.feature("o", 1)
    g.rule_group("o", [Rule((), ((("o", 0), 1),), count=(("c", 0), 1))])
    with pytest.raises(CircuitError, match="not an integer"):
        evaluate(g, [{"c": [nx.COUNT_MAX + 1]}])


def digits_differ_graph() -> Graph:
    """o = how many of 4 digit pairs differ: counts summed from bits, compared by rules on the
    difference of two counts (count >= 1 minus, or not >= 0 minus), no dim holding it."""
    g = Graph()
    for x in "ab":
        g.feature(x, 16, token_input=True)
        g.feature(f"{x}d", 4)  # base-16 digits, counts
        g.rule_group(f"{x}d", [Rule((((x, i), 1),), (((f"{x}d", i // 4), 1 << i % 4),))
                               for i in range(16)])
    g.feature("on", 1, token_input=True)
    g.feature("o", 1)
    on = ((("on", 0), 1),)
    g.rule_group("o", [r for k in range(4) for r in (
        Rule(on, ((("o", 0), 1),), count=(("ad", k), 1), minus=("bd", k)),
        Rule(on, ((("o", 0), 1),)),
        Rule(on, ((("o", 0), -1),), count=(("ad", k), 0), minus=("bd", k)))])
    return g


@pytest.mark.parametrize("dtype,step", MODES)
def test_difference_of_two_counts(dtype: str, step: bool) -> None:
    rng = random.Random(7)
    pairs = [(a | 16 * b, b | 16 * a) for a in range(16) for b in range(16)]  # every digit pair
    pairs += [(v, v) for v in (0, 0xFFFF, 0x1234)] + [(rng.getrandbits(16), rng.getrandbits(16))
                                                       for _ in range(20)]
    tokens = [{"a": bits(a, 16), "b": bits(b, 16), "on": [int(i % 7 != 3)]}
              for i, (a, b) in enumerate(pairs)]
    got = evaluate(digits_differ_graph(), tokens)
    for t, (a, b), out in zip(tokens, pairs, got, strict=True):
        differ = sum((a >> 4 * k & 15) != (b >> 4 * k & 15) for k in range(4))
        assert out["o"] == [differ * t["on"][0]], (hex(a), hex(b))
    assert_exact(digits_differ_graph(), tokens, dtype, step)


def test_minus_needs_a_count() -> None:
    with pytest.raises(ValueError, match="minus without a count"):
        Rule((), ((("o", 0), 1),), minus=("c", 0))
