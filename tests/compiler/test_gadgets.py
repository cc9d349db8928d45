"""Compiled gadgets are exact in real Qwen3.5 layers (2B layer shapes), float32 and bfloat16,
whole-sequence and token by token: each is compared with the weight-free evaluator on every
input of its domain (memory: on random write/read sequences over every row)."""

import itertools
import random

import pytest

from qgpu.compiler.evaluate import CircuitError, evaluate
from qgpu.compiler.graph import Graph, Rule, copy_bits, lookup
from qgpu.compiler.schedule import LayerShape, schedule
from tests.compiler.graphs import waiting_graph
from tests.compiler.helpers import MODES, SHAPE, assert_exact, onehot, word


def test_a_feature_that_waits_is_held_packed() -> None:
    g = waiting_graph()
    plain, packed = schedule(g, SHAPE, pack=False), schedule(g, SHAPE)
    assert "a.pk" in packed.graph.features and packed.graph.rule_inputs["late"] >= {"a.hd"}
    assert packed.layers == plain.layers and packed.k_used < plain.k_used


@pytest.mark.parametrize("dtype,step", MODES)
def test_packing_is_exact(dtype: str, step: bool) -> None:
    """Every 32-bit pattern class: a held packed across the chain reads back the same."""
    rng = random.Random(1)
    values = [0, 0xFFFF_FFFF, 0x8000_0001, 0x0F0F_F0F0] + [rng.getrandbits(32) for _ in range(12)]
    tokens = [{"a": [v >> i & 1 for i in range(32)], "s": [t % 3 != 2]}
              for t, v in enumerate(values)]
    assert_exact(waiting_graph(), tokens, dtype, step)


@pytest.mark.parametrize("dtype,step", MODES)
def test_lookup_table_over_one_hot_groups(dtype: str, step: bool) -> None:
    g = Graph()
    g.feature("a", 4, "onehot", token_input=True)
    g.feature("b", 3, "onehot", token_input=True)
    g.feature("c", 6, "bits")
    rng = random.Random(0)
    lookup(g, "f", ["a", "b"], "c", {
        (i, j): tuple(rng.sample(range(6), rng.randrange(4))) for i in range(4) for j in range(3)
        if (i, j) != (3, 2)})  # one combination left out: its output stays 0
    tokens = [{"a": onehot(4, i), "b": onehot(3, j)} for i in range(4) for j in range(3)]
    tokens.append({"a": onehot(4, None), "b": onehot(3, 1)})  # an absent input: nothing fires
    assert_exact(g, tokens, dtype, step)


@pytest.mark.parametrize("dtype,step", MODES)
def test_rules_with_negative_literals_and_signed_deltas(dtype: str, step: bool) -> None:
    """x AND NOT y, and a two-level chain (layer 2 reads layer 1's output): every 0/1 input."""
    g = Graph()
    g.feature("x", 3, "bits", token_input=True)
    g.feature("y", 2, "bits")
    g.feature("z", 2, "bits")
    g.rule_group("l1", [
        Rule(((("x", 0), 1), (("x", 1), 0)), ((("y", 0), 1),)),
        Rule(((("x", 2), 1),), ((("y", 1), 1),)),
    ])
    g.rule_group("l2", [
        Rule(((("y", 0), 1), (("y", 1), 1)), ((("z", 0), 1), (("z", 1), 1))),
        Rule(((("y", 0), 0), (("x", 2), 1)), ((("z", 1), 1),)),
    ])
    tokens = [{"x": list(bits)} for bits in itertools.product((0, 1), repeat=3)]
    assert_exact(g, tokens, dtype, step)


def memory_graph(rows: int) -> Graph:
    g = Graph()
    g.feature("waddr", rows, "onehot", token_input=True)
    g.feature("wval", 128, "word", token_input=True)
    g.feature("raddr", rows, "onehot", token_input=True)
    g.feature("r", 128, "word")
    g.feature("r2", 128, "bits")
    g.bank("m", rows)
    g.write("m", "waddr", "wval")
    g.read("m", "raddr", "r")
    copy_bits(g, "cp", "r", "r2")  # a rule reading the carrier dims of a memory read
    return g


@pytest.mark.parametrize("dtype,step", MODES)
def test_memory_bank_write_then_read(dtype: str, step: bool) -> None:
    rows = 128
    rng = random.Random(1)
    tokens = []
    for row in range(rows):  # every row written, read back, overwritten, read in the same token
        tokens.append({"waddr": onehot(rows, row), "wval": word(rng.getrandbits(64)),
                       "raddr": onehot(rows, (row * 37) % rows)})
    for _ in range(60):
        w = rng.random() < 0.5
        tokens.append({"waddr": onehot(rows, rng.randrange(rows) if w else None),
                       "wval": word(rng.getrandbits(64)) if w else [0] * 128,
                       "raddr": onehot(rows, rng.randrange(rows) if rng.random() < 0.8 else None)})
    row = 5
    tokens.append({"waddr": onehot(rows, row), "wval": word(0xFFFF_FFFF_FFFF_FFFF),
                   "raddr": onehot(rows, row)})
    assert_exact(memory_graph(rows), tokens, dtype, step)


def test_evaluator_rejects_broken_exactness_conditions() -> None:
    g = memory_graph(4)
    with pytest.raises(CircuitError, match="not one-hot"):
        evaluate(g, [{"waddr": [1, 1, 0, 0], "wval": word(3), "raddr": [0] * 4}])
    with pytest.raises(CircuitError, match="not a valid word"):
        evaluate(g, [{"waddr": [1, 0, 0, 0], "wval": [1] * 128, "raddr": [0] * 4}])


def test_scheduler_packs_by_dependency_and_capacity() -> None:
    g = Graph()
    g.feature("a", 2, "onehot", token_input=True)
    for i in range(3):
        g.feature(f"o{i}", 1)
    lookup(g, "first", ["a"], "o0", {(0,): (0,)})
    g.rule_group("second", [Rule(((("o0", 0), 1),), ((("o1", 0), 1),))])
    lookup(g, "parallel", ["a"], "o2", {(1,): (0,)})
    sched = schedule(g, SHAPE)
    assert sched.neurons["first"][0] == sched.neurons["parallel"][0] == 0
    assert sched.neurons["second"][0] == 1 and sched.layers == 2
    small = schedule(g, LayerShape(16, 128, 1))  # one neuron per layer
    assert small.layers == 3
    assert "rules second" in sched.table() and "clear a" in sched.table()
    # o0 and o2 take the dims of the input a: its clear and their writers share sublayer 1
    assert sched.dims["o0"] + sched.dims["o2"] == sched.dims["a"]
    assert sched.allocation_map()["k_used"] == 6


def staggered_graph() -> Graph:
    """Two 64-bit features, each made from s and reduced to one bit, both ready at once and
    needed only at the end of a chain: placed as soon as possible they are live together."""
    g = Graph()
    g.feature("s", 1, "bits", token_input=True)
    for k in range(4):
        g.feature(f"b{k}", 1)
        g.rule_group(f"b{k}", [Rule((((f"b{k - 1}" if k else "s", 0), 1),),
                                    (((f"b{k}", 0), 1),))])
    for name in ("aw", "cw"):
        g.feature(name, 64)
        g.rule_group(name, [Rule(((("s", 0), 1),), (((name, i), 1),)) for i in range(64)])
        g.feature(f"{name}.all", 1)
        g.rule_group(f"{name}.all", [Rule(tuple(((name, i), 1) for i in range(64)),
                                          (((f"{name}.all", 0), 1),))])
    g.feature("out", 1)
    g.rule_group("out", [Rule(((("b3", 0), 1), (("aw.all", 0), 1), (("cw.all", 0), 1)),
                              ((("out", 0), 1),))])
    return g


def test_the_scheduler_staggers_work_to_lower_the_peak() -> None:
    """The peak of live dims sets K: one of the two wide features moves (with its reader) so
    that the second takes the first's dims (as soon as possible: 3 + 2 x 64 + 3), in as many
    layers."""
    sched = schedule(staggered_graph(), SHAPE, pack=False)
    assert sched.k_used <= 3 + 64 + 3 and sched.layers == 5


@pytest.mark.parametrize("dtype,step", MODES)
def test_staggered_work_is_exact(dtype: str, step: bool) -> None:
    assert_exact(staggered_graph(), [{"s": [t % 2]} for t in range(4)], dtype, step)


@pytest.mark.parametrize("dtype,step", MODES)
def test_a_selection_waits_for_every_reader_of_the_input_it_shares(dtype: str,
                                                                    step: bool) -> None:
    """An alias adds to the dims of a token input: its writer could be placed as soon as its
    own input is ready, but a later reader of the shared input would then see the sum. The
    scheduler puts alias writers after every other node; the compiled model then matches the
    evaluator, which keeps the two apart."""
    g = Graph()
    g.feature("a", 2, "onehot", token_input=True)
    g.feature("sel", 2, "onehot", accumulate=True, alias="a")
    lookup(g, "choose", ["a"], "sel", {(0,): (1,), (1,): (0,)})  # ready at once
    chain = "a"
    for i in range(3):  # a reader of `a` three layers later
        g.feature(f"c{i}", 2, "onehot")
        lookup(g, f"c{i}", [chain], f"c{i}", {(0,): (0,), (1,): (1,)})
        chain = f"c{i}"
    g.feature("late", 1)
    g.rule_group("late", [Rule(((("a", 1), 1), (("c2", 1), 1)), ((("late", 0), 1),))])
    sched = schedule(g, SHAPE)
    assert sched.neurons["choose"][0] >= sched.neurons["late"][0]
    assert_exact(g, [{"a": onehot(2, i)} for i in (0, 1, 1, 0)], dtype, step)


@pytest.mark.parametrize("dtype,step", MODES)
def test_a_layer_budget_stretches_the_schedule_to_its_last_layer(dtype: str, step: bool) -> None:
    """schedule(layers=N): a circuit that needs fewer layers gets N, its output selection in
    the last one (every other node may spread over the room before it); one that needs more
    keeps what it needs."""
    g = lending_graph()
    need = schedule(g, SHAPE).layers
    stretched = schedule(g, SHAPE, layers=need + 2)
    assert stretched.layers == need + 2 and stretched.neurons["sel"][0] == need + 1
    assert schedule(g, SHAPE, layers=need - 1).layers == need
    rng = random.Random(3)
    assert_exact(g, [{"z": [rng.getrandbits(1) for _ in range(16)],
                      "e": [rng.getrandbits(1) for _ in range(16)]} for _ in range(4)],
                 dtype, step, layers=need + 2)


def lending_graph() -> Graph:
    """`z`: a token input only the selection's alias uses; `w` (a copy of the input `e`) and
    `v` (a copy of `w`) both read two layers later by `x`, which the selection and `keep` read
    at the end."""
    g = Graph()
    for name in ("e", "z"):
        g.feature(name, 16, token_input=True)
    g.feature("sel", 16, accumulate=True, alias="z")
    for name, src in (("w", "e"), ("v", "w")):
        g.feature(name, 16)
        g.rule_group(name, [Rule((((src, j), 1),), (((name, j), 1),)) for j in range(16)])
    g.feature("x", 1)
    g.rule_group("x", [Rule(((("w", 0), 1), (("v", 5), 1)), ((("x", 0), 1),))])
    g.feature("keep", 4)
    g.rule_group("keep", [Rule(((("x", 0), 1),), tuple((("keep", j), 1) for j in range(4)))])
    g.rule_group("sel", [Rule(((("x", 0), 1),), tuple((("sel", j), 1) for j in range(16)))])
    return g


@pytest.mark.parametrize("dtype,step", MODES)
def test_aliased_inputs_lend_their_dims_until_the_selection(dtype: str, step: bool) -> None:
    """A token input that the output selection aliases is cleared after its last reader (at
    once here: nothing reads it) and its dims go to features that are cleared before the
    selection adds there (`v`), never to one that lives to the end (`x`, `keep`)."""
    g = lending_graph()
    sched = schedule(g, SHAPE)
    assert "z" in sched.clears and sched.live("x") and sched.live("keep")
    lent = set(sched.dims["z"])
    assert set(sched.dims["v"]) == lent
    assert not lent & set(sched.dims["x"] + sched.dims["keep"])
    assert sched.k_used == 3 + 2 * 16  # w and v; without lending z would hold 16 more
    rng = random.Random(2)
    assert_exact(g, [{"z": [rng.getrandbits(1) for _ in range(16)],
                      "e": [rng.getrandbits(1) for _ in range(16)]} for _ in range(8)],
                 dtype, step)


@pytest.mark.parametrize("dtype,step", MODES)
def test_narrow_words_store_missing_digits_as_zero(dtype: str, step: bool) -> None:
    g = Graph()
    g.feature("waddr", 4, "onehot", token_input=True)
    g.feature("wval", 8, "word", token_input=True)  # two digits: values 0..15
    g.feature("raddr", 4, "onehot", token_input=True)
    g.feature("r", 8, "word")
    g.bank("m", 4)
    g.write("m", "waddr", "wval")
    g.read("m", "raddr", "r")
    tokens = []
    for v in range(16):
        tokens.append({"waddr": onehot(4, v % 4), "wval": word(v)[:8],
                       "raddr": onehot(4, 3 - v % 4)})
    assert_exact(g, tokens, dtype, step)


@pytest.mark.parametrize("dtype,step", MODES)
def test_dead_features_are_cleared_and_their_dims_reused(dtype: str, step: bool) -> None:
    """A 4-stage chain of one-hot lookups: each stage's input dies, is cleared by extra rules in
    the MLP that last reads it, and a later stage's output takes its dims."""
    g = Graph()
    g.feature("s0", 6, "onehot", token_input=True)
    for i in range(1, 5):
        g.feature(f"s{i}", 6, "onehot")
        lookup(g, f"f{i}", [f"s{i - 1}"], f"s{i}", {(v,): ((v * 5 + i) % 6,) for v in range(6)})
    sched = schedule(g, SHAPE)
    assert set(sched.clears) == {"s0", "s1", "s2"}
    assert sched.dims["s2"] == sched.dims["s0"] and sched.dims["s3"] == sched.dims["s1"]
    assert sched.k_used == 3 + 2 * 6  # two stages' dims, handed on down the chain
    tokens = [{"s0": onehot(6, v)} for v in range(6)]
    assert_exact(g, tokens, dtype, step)
