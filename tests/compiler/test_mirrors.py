"""Mirrors (``Graph.mirror``): a linear image of a feature that its writers' rules fill at no
neuron and no layer, and written-through names, whose value only ever lives as the image (a
slot's result, held as base-16 digits until its bits are needed)."""

import random

import pytest

from qgpu.circuits.gpu.banks import hex_digit
from qgpu.compiler import gadgets as gd
from qgpu.compiler.evaluate import evaluate
from qgpu.compiler.graph import Graph, Rule
from qgpu.compiler.schedule import schedule
from tests.compiler.helpers import MODES, SHAPE, assert_exact, bits


def result_graph(through: bool) -> Graph:
    """r = a XOR b, or NOT a when `n` (two units writing r), held as base-16 digits (`rd`),
    then its bits again (`out`)."""
    g = Graph()
    for name, size in (("a", 32), ("b", 32), ("n", 1)):
        g.feature(name, size, token_input=True)
    g.feature("r", 32, accumulate=True)
    gd.bitwise(g, "r.xor", "a", "b", "r", lambda x, y: x ^ y, when=((("n", 0), 0),))
    g.feature("rd", 8, accumulate=True)
    g.mirror("r", "rd", hex_digit, through=through)  # the rules already there, and...
    g.rule_group("r.not", [Rule(((("n", 0), 1), (("a", i), 0)), ((("r", i), 1),))
                           for i in range(32)])  # ...the ones that come after
    g.feature("out", 32)
    gd.unpack(g, "out", "rd", "out")
    return g


def tokens() -> list[dict]:
    rng = random.Random(3)
    return [{"a": bits(rng.getrandbits(32), 32), "b": bits(rng.getrandbits(32), 32),
             "n": [i % 3 == 0]} for i in range(24)]


@pytest.mark.parametrize("through", [False, True])
def test_the_image_holds_the_value_and_the_bits_come_back(through: bool) -> None:
    g = result_graph(through)
    for t, got in zip(tokens(), evaluate(g, tokens()), strict=True):
        a, b = (sum(v << i for i, v in enumerate(t[x])) for x in "ab")
        want = ~a & 0xFFFFFFFF if t["n"][0] else a ^ b
        assert got["rd"] == [want >> 4 * k & 15 for k in range(8)]
        assert got["out"] == bits(want, 32)
        assert ("r" in got) == (not through)


def test_a_written_through_name_takes_no_dims_and_no_neurons() -> None:
    kept, through = (schedule(result_graph(t), SHAPE) for t in (False, True))
    assert "r" in kept.dims and "r" not in through.dims
    assert through.k_used < kept.k_used
    neurons = [sum(len(rules) for rules in s.graph.rules.values()) for s in (kept, through)]
    assert neurons[0] == neurons[1]


@pytest.mark.parametrize("dtype,step", MODES[:2])
def test_written_through_results_compile_exactly(dtype: str, step: bool) -> None:
    assert_exact(result_graph(True), tokens(), dtype, step)


def test_a_written_through_name_cannot_be_read_or_mirrored_again() -> None:
    g = result_graph(True)
    g.feature("x", 1)
    with pytest.raises(ValueError, match="written through"):
        g.rule_group("x", [Rule(((("r", 0), 1),), ((("x", 0), 1),))])
    with pytest.raises(ValueError, match="no further mirror"):
        g.mirror("r", "x", hex_digit)
    g2 = Graph()
    g2.feature("a", 4, token_input=True)
    g2.feature("r", 4, accumulate=True)
    g2.feature("c", 4)
    g2.rule_group("r", [Rule(((("a", i), 1),), ((("r", i), 1),)) for i in range(4)])
    g2.rule_group("c", [Rule(((("r", i), 1),), ((("c", i), 1),)) for i in range(4)])
    g2.feature("rd", 1, accumulate=True)
    with pytest.raises(ValueError, match="cannot be written through"):
        g2.mirror("r", "rd", hex_digit, through=True)
