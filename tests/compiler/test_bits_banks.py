"""``bits`` banks: anchored binary rows (one residual dim per bit) and writes whose value comes
in frames over up to four tokens through the conv1d — exact in real 2B-shaped layers, float32
and bfloat16, whole-sequence and token by token, against the weight-free evaluator."""

import random

import pytest

from qgpu.compiler import numerics as nx
from qgpu.compiler.evaluate import CircuitError, evaluate
from qgpu.compiler.graph import Address, Graph, Part, Rule
from tests.compiler.graphs import ROWS, frame, frame_graph, read
from tests.compiler.helpers import MODES, assert_exact, bits, onehot


@pytest.mark.parametrize("dtype,step", MODES)
def test_frames_write_whole_rows_and_reads_return_bits(dtype: str, step: bool) -> None:
    rng = random.Random(3)
    tokens = frame(7, 0xDEADBEEF) + [read(7)]  # the first frame's taps reach before the start
    for row in range(ROWS):  # every row: a frame, then a read of a row written earlier
        value = rng.choice([rng.randrange(256), rng.randrange(1 << 16), rng.getrandbits(32)])
        tokens += frame(row, value) + [read(rng.randrange(row + 1))]
    for _ in range(40):  # overwrite, read in the same token as a write, unwritten rows read 0
        tokens += frame(rng.randrange(ROWS), rng.getrandbits(32), read=rng.randrange(ROWS))
    tokens += frame(3, 0xFFFFFFFF) + frame(3, 5, read=3) + [read(None)]
    got = evaluate(frame_graph(), tokens)
    assert got[4]["r"] == bits(0xDEADBEEF, 32)
    assert got[-2]["r"] == bits(5, 32) and got[-1]["r"] == [0] * 32
    assert_exact(frame_graph(), tokens, dtype, step)


@pytest.mark.parametrize("dtype,step", MODES)
def test_full_rows_of_126_bits(dtype: str, step: bool) -> None:
    g = Graph()
    g.feature("waddr", 4, "onehot", token_input=True)
    g.feature("v", nx.ROW_BITS, token_input=True)
    g.feature("raddr", 4, "onehot", token_input=True)
    g.feature("r", nx.ROW_BITS)
    g.bank("m", 4, "bits")
    g.write("m", "waddr", "v")
    g.read("m", "raddr", "r")
    rng = random.Random(4)
    patterns = [[1] * nx.ROW_BITS, [0] * nx.ROW_BITS] + \
        [bits(rng.getrandbits(nx.ROW_BITS), nx.ROW_BITS) for _ in range(6)]
    tokens = [{"waddr": onehot(4, i % 4), "v": p, "raddr": onehot(4, (i + 3) % 4)}
              for i, p in enumerate(patterns)]
    assert_exact(g, tokens, dtype, step)


def test_bits_bank_contract() -> None:
    g = frame_graph()
    with pytest.raises(CircuitError, match="not 0/1"):
        evaluate(g, [{"waddr": onehot(ROWS, 0), "b0": [2] + [0] * 7}])
    g.feature("x", 8, token_input=True)
    g.bank("other", 4, "bits")
    g.feature("a4", 4, "onehot", token_input=True)
    with pytest.raises(ValueError, match="overlaps"):
        g.write("other", "a4", parts=[Part("x"), Part("d1", 1, 4)])
    with pytest.raises(ValueError, match="reach"):
        g.write("other", "a4", parts=[Part("x", 4)])
    with pytest.raises(ValueError, match="cannot be tapped"):
        g.write("other", "a4", parts=[Part("r", 1)])
    g.bank("words", 4)
    g.feature("w", 8, "word", token_input=True)
    with pytest.raises(ValueError, match="word bank"):
        g.write("words", "a4", parts=[Part("w", 1)])


@pytest.mark.parametrize("dtype,step", MODES)
def test_banks_share_an_address_and_write_only_when_enabled(dtype: str, step: bool) -> None:
    """Three bits banks and a word bank, one address feature; a selector enables one of them
    (beta exactly 0 for the others), an enable computed by a rule from a memory read too."""
    g = Graph()
    g.feature("waddr", 8, "onehot", token_input=True)
    g.feature("sel", 4, "onehot", token_input=True)
    g.feature("v", 16, token_input=True)
    g.feature("wv", 8, "word", token_input=True)
    g.feature("raddr", 8, "onehot", token_input=True)
    for i in range(3):
        g.feature(f"r{i}", 16)
        g.bank(f"m{i}", 8, "bits")
        g.write(f"m{i}", "waddr", "v", enable=("sel", i))
        g.read(f"m{i}", "raddr", f"r{i}")
    g.bank("w", 8)
    g.write("w", "waddr", "wv", enable=("sel", 3))
    g.feature("rw", 8, "word")
    g.read("w", "raddr", "rw")
    g.feature("bit", 1)  # a later bank enabled by bit 0 of bank m0's read (a carrier dim)
    g.rule_group("bit0", [Rule(((("r0", 0), 1),), ((("bit", 0), 1),))])
    g.feature("out", 16)
    g.bank("late", 8, "bits")
    g.write("late", "waddr", "v", enable=("bit", 0))
    g.read("late", "raddr", "out")
    rng = random.Random(5)
    tokens = []
    for _ in range(80):
        sel = rng.choice([None, 0, 1, 2, 3])
        tokens.append({"waddr": onehot(8, rng.randrange(8)), "sel": onehot(4, sel),
                       "v": bits(rng.getrandbits(16), 16),
                       "wv": onehot(4, rng.randrange(4)) + onehot(4, rng.randrange(4)),
                       "raddr": onehot(8, rng.randrange(8))})
    got = evaluate(g, tokens)
    assert any(t["r0"] != t["r1"] for t in got) and any(t["out"] != [0] * 16 for t in got)
    assert_exact(g, tokens, dtype, step)


@pytest.mark.parametrize("dtype,step", MODES)
def test_binary_addresses_are_decoded_by_the_gdn(dtype: str, step: bool) -> None:
    """Banks addressed by row numbers in binary (``Address``): from token bits with an enable,
    from bits a memory read returned (carrier dims) and from rule outputs; numbers beyond the
    bank's rows and disabled addresses touch nothing."""
    g = Graph()
    g.feature("wa", 7, token_input=True)
    g.feature("wen", 1, token_input=True)
    g.feature("v", 16, token_input=True)
    g.feature("ra", 7, token_input=True)
    g.feature("r", 16)
    g.bank("m", 100, "bits")  # rows 100..127 cannot be named: the address names nothing
    g.write("m", Address(tuple(("wa", i) for i in range(7)), ("wen", 0)), "v")
    g.read("m", Address(tuple(("ra", i) for i in range(7))), "r")
    # the low 3 bits of the read (carrier dims) address a word bank; a rule's bit enables it
    g.feature("on", 1)
    g.rule_group("on", [Rule(((("r", 15), 0),), ((("on", 0), 1),))])
    g.feature("wv", 8, "word", token_input=True)
    g.bank("w", 8)
    g.write("w", Address(tuple(("r", i) for i in range(3)), ("on", 0)), "wv")
    g.feature("rw", 8, "word")
    g.read("w", Address(tuple(("wa", i) for i in range(3))), "rw")
    rng = random.Random(6)
    tokens = []
    for _ in range(120):
        wa, ra = (rng.choice([rng.randrange(12), rng.randrange(128)]) for _ in range(2))
        tokens.append({"wa": bits(wa, 7), "wen": [int(rng.random() < 0.7)],
                       "v": bits(rng.getrandbits(16), 16), "ra": bits(ra, 7),
                       "wv": onehot(4, rng.randrange(4)) + onehot(4, rng.randrange(4))})
    got = evaluate(g, tokens)
    assert sum(t["r"] != [0] * 16 for t in got) > 30 and any(t["rw"] != [0] * 8 for t in got)
    assert_exact(g, tokens, dtype, step)
