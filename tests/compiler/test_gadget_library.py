"""The gadget library (qgpu/compiler/gadgets.py) is exact in real Qwen3.5 layers (2B layer
shapes), float32 and bfloat16, whole-sequence and token by token.

Every gadget is checked on every input of its domain — adders, subtractors, compares and
increments exhaustively up to 6 bits (3 digits); 32-bit adders and compares on random samples
plus edge cases: the weight-free evaluator must give the Python reference, and the compiled layers
must give the evaluator's value of every live feature.

To keep the runtime low, all gadgets are compiled side by side into one model per dtype: each
case's gadget is instantiated ``copies`` times on its own features (nothing is shared between
cases or copies), and a batch of ``B`` sequences of ``T`` tokens feeds every copy a different
input, so the copies together cover the domain. The clear gadget needs a hand-placed group (its
rules read and write the same feature) and has its own small model.
"""

from __future__ import annotations

import functools
import math
import operator
import random
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

from qgpu.compiler import gadgets as gd
from qgpu.compiler import numerics as nx
from qgpu.compiler.circuit_model import build_circuit_model, run_layers
from qgpu.compiler.evaluate import evaluate
from qgpu.compiler.graph import Graph
from qgpu.compiler.schedule import schedule
from qgpu.compiler.weights import embed
from tests.compiler.helpers import MODES, SHAPE, bits, live_values, onehot, word

B, T = 32, 16  # sequences per batch, tokens per sequence
ROWS = B * T

Inputs = dict[str, list[int]]
Namer = Callable[[str], str]


@dataclass(eq=False)
class Case:
    """A gadget on its own input features. `build(g, p)` declares every feature (names through
    p, which prefixes them per copy) and adds the gadget; `reference` gives the expected
    output features of one input."""

    name: str
    build: Callable[[Graph, Namer], None]
    domain: list[Inputs]
    reference: Callable[[Inputs], Inputs]

    @property
    def copies(self) -> int:
        return math.ceil(len(self.domain) / ROWS)


def val(code: list[int]) -> int:
    """The value of a bits list, LSB first."""
    return sum(b << i for i, b in enumerate(code))


def wval(code: list[int]) -> int:
    """The value of a valid word."""
    return sum(code[4 * k:4 * k + 4].index(1) << 2 * k for k in range(len(code) // 4))


def hot(code: list[int]) -> int | None:
    return code.index(1) if 1 in code else None


def sgn(v: int, n: int) -> int:
    """An n-bit value read as two's complement."""
    return v - (1 << n) if v >> (n - 1) & 1 else v


def rel(x: int, y: int) -> list[int]:
    """lt, le, eq, ne, gt, ge."""
    return [int(x < y), int(x <= y), int(x == y), int(x != y), int(x > y), int(x >= y)]


RELS = ("lt", "le", "eq", "ne", "gt", "ge")
BITOPS = {"and": operator.and_, "or": operator.or_, "xor": operator.xor}

# --- gates, selection, copy -------------------------------------------------------------------


def gates(g: Graph, p: Namer) -> None:
    x, o = p("x"), p("o")
    g.feature(x, 5, "bits", token_input=True)
    g.feature(o, 9, "bits")
    lits = [((x, i), 1) for i in range(5)]
    rules = gd.and_gate(g, p("and"), [((x, 0), 1), ((x, 1), 0), ((x, 3), 1)], (o, 0), group=False)
    rules += gd.or_gate(g, p("or"), [((x, 0), 0), ((x, 2), 1), ((x, 4), 1)], (o, 1), group=False)
    for k in range(7):  # k = 0, 1, 2 complemented, 3, 4, 5 direct, 6 empty
        rules += gd.threshold(g, p(f"t{k}"), lits, k, (o, 2 + k), group=False)
    g.rule_group(p("gates"), rules)


def gates_ref(t: Inputs) -> Inputs:
    x = t["x"]
    return {"o": [int(x[0] and not x[1] and x[3]), int(not x[0] or x[2] or x[4])]
            + [int(sum(x) >= k) for k in range(7)]}


def mux(g: Graph, p: Namer) -> None:
    g.feature(p("sel"), 3, "onehot", token_input=True)
    for i in range(3):
        g.feature(p(f"i{i}"), 2, "bits", token_input=True)
    g.feature(p("o"), 2, "bits")
    gd.mux(g, p("mux"), p("sel"), [p(f"i{i}") for i in range(3)], p("o"))


def mux_ref(t: Inputs) -> Inputs:
    s = hot(t["sel"])
    return {"o": [0, 0] if s is None else t[f"i{s}"]}


def choose(g: Graph, p: Namer) -> None:
    g.feature(p("c"), 2, "bits", token_input=True)  # condition, enable
    g.feature(p("a"), 2, "bits", token_input=True)
    g.feature(p("b"), 2, "bits", token_input=True)
    g.feature(p("o"), 2, "bits")
    gd.choose(g, p("choose"), ((p("c"), 0), 1), p("a"), p("b"), p("o"), when=(((p("c"), 1), 1),))


def choose_ref(t: Inputs) -> Inputs:
    return {"o": (t["a"] if t["c"][0] else t["b"]) if t["c"][1] else [0, 0]}


def copy(g: Graph, p: Namer) -> None:
    g.feature(p("s"), 4, "bits", token_input=True)
    g.feature(p("d"), 4, "bits")
    g.feature(p("n"), 4, "bits")
    gd.copy(g, p("copy"), p("s"), p("d"))
    gd.copy(g, p("not"), p("s"), p("n"), invert=True)


def copy_ref(t: Inputs) -> Inputs:
    return {"d": t["s"], "n": [1 - b for b in t["s"]]}


# --- conversions ------------------------------------------------------------------------------


def onehot_to_bits(g: Graph, p: Namer) -> None:
    g.feature(p("h"), 11, "onehot", token_input=True)
    g.feature(p("o"), 4, "bits")
    gd.onehot_to_bits(g, p("oh2b"), p("h"), p("o"))


def bits_to_onehot(g: Graph, p: Namer) -> None:
    g.feature(p("x"), 4, "bits", token_input=True)
    g.feature(p("o"), 16, "onehot")
    g.feature(p("o11"), 11, "onehot")
    gd.bits_to_onehot(g, p("b2oh"), p("x"), p("o"))
    gd.bits_to_onehot(g, p("b2oh11"), p("x"), p("o11"))


def word_to_onehot(g: Graph, p: Namer) -> None:
    g.feature(p("w"), 8, "word", token_input=True)
    g.feature(p("o"), 16, "onehot")
    g.feature(p("o11"), 11, "onehot")
    gd.word_to_onehot(g, p("w2oh"), p("w"), p("o"))
    gd.word_to_onehot(g, p("w2oh11"), p("w"), p("o11"))


def onehot_to_word(g: Graph, p: Namer) -> None:
    g.feature(p("h"), 16, "onehot", token_input=True)
    g.feature(p("o"), 8, "word")
    gd.onehot_to_word(g, p("oh2w"), p("h"), p("o"))


def word_bits(g: Graph, p: Namer) -> None:
    """word -> 6 and 5 bits; 6 and 5 bits -> word (the 5-bit one has a one-bit digit)."""
    g.feature(p("w"), 12, "word", token_input=True)
    g.feature(p("x"), 6, "bits", token_input=True)
    g.feature(p("x5"), 5, "bits", token_input=True)
    g.feature(p("b6"), 6, "bits")
    g.feature(p("b5"), 5, "bits")
    g.feature(p("w6"), 12, "word")
    g.feature(p("w5"), 16, "word")  # a digit above the bits
    gd.word_to_bits(g, p("w2b6"), p("w"), p("b6"))
    gd.word_to_bits(g, p("w2b5"), p("w"), p("b5"))
    gd.bits_to_word(g, p("b2w6"), p("x"), p("w6"))
    gd.bits_to_word(g, p("b2w5"), p("x5"), p("w5"))


def word_bits_ref(t: Inputs) -> Inputs:
    v = wval(t["w"])
    return {"b6": bits(v, 6), "b5": bits(v % 32, 5), "w6": word(val(t["x"]), 3),
            "w5": word(val(t["x5"]), 4)}


# --- arithmetic -------------------------------------------------------------------------------


def add_sub(n: int, *, words: bool = False, carry: bool = False) -> Callable[[Graph, Namer], None]:
    """a + b (+ carry in) and a - b (- borrow in) on n bits or n digits, with carry out and
    "no borrow"; both gadgets' last layers share the one group that writes c. With a carry in,
    the results are also gated by an enable bit (`when`)."""
    def build(g: Graph, p: Namer) -> None:
        code, size = ("word", 4 * n) if words else ("bits", n)
        for f in ("a", "b"):
            g.feature(p(f), size, code, token_input=True)
        for f in ("s", "d"):
            g.feature(p(f), size, code)
        g.feature(p("c"), 2, "bits")  # carry out of the sum, a >= b (+ borrow in)
        ci, en = ((p("ci"), 0), 1), ((p("ci"), 1), 1)
        if carry:
            g.feature(p("ci"), 2, "bits", token_input=True)  # carry/borrow in, enable
        add = gd.add_words if words else gd.add_bits
        when = (en,) if carry else ()
        rules = add(g, p("add"), p("a"), p("b"), p("s"), carry_in=ci if carry else False,
                    carry_out=(p("c"), 0), when=when, group=False)
        rules += add(g, p("sub"), p("a"), p("b"), p("d"), invert_b=True,
                     carry_in=gd.negate(ci) if carry else True, carry_out=(p("c"), 1),
                     when=when, group=False)
        g.rule_group(p("add+sub"), rules)
    return build


def add_sub_ref(n: int, *, words: bool = False) -> Callable[[Inputs], Inputs]:
    width, enc, dec = (2 * n, _word(n), wval) if words else (n, _bits(n), val)

    def ref(t: Inputs) -> Inputs:
        a, b, (ci, en) = dec(t["a"]), dec(t["b"]), t.get("ci", [0, 1])
        m = 1 << width
        if not en:
            return {"s": [0] * len(t["a"]), "d": [0] * len(t["a"]), "c": [0, 0]}
        return {"s": enc((a + b + ci) % m), "d": enc((a - b - ci) % m),
                "c": [int(a + b + ci >= m), int(a >= b + ci)]}
    return ref


def add_or_sub(n: int) -> Callable[[Graph, Namer], None]:
    """One adder that adds or subtracts as a token's `m` bit says (invert_b a literal), with
    carry out and the all-propagate flag (for a subtraction: a == b)."""
    def build(g: Graph, p: Namer) -> None:
        for f in ("a", "b"):
            g.feature(p(f), n, "bits", token_input=True)
        g.feature(p("m"), 1, "bits", token_input=True)
        g.feature(p("s"), n, "bits")
        g.feature(p("c"), 2, "bits")
        m = ((p("m"), 0), 1)
        gd.add_bits(g, p("as"), p("a"), p("b"), p("s"), invert_b=m, carry_in=m,
                    carry_out=(p("c"), 0), all_propagate=(p("c"), 1))
    return build


def add_or_sub_ref(n: int) -> Callable[[Inputs], Inputs]:
    def ref(t: Inputs) -> Inputs:
        a, b, sub, m = val(t["a"]), val(t["b"]), t["m"][0], 1 << n
        b_eff = (m - 1) ^ b if sub else b
        total = a + b_eff + sub
        return {"s": bits(total % m, n), "c": [int(total >= m), int(a ^ b_eff == m - 1)]}
    return ref


def mul(n: int) -> Callable[[Graph, Namer], None]:
    """a * b and a * b + c (low halves)."""
    def build(g: Graph, p: Namer) -> None:
        for f in ("a", "b", "c"):
            g.feature(p(f), n, "bits", token_input=True)
        for f in ("m", "mad"):
            g.feature(p(f), n, "bits")
        gd.mul_bits(g, p("mul"), p("a"), p("b"), p("m"))
        gd.mul_bits(g, p("madd"), p("a"), p("b"), p("mad"), addend=p("c"))
    return build


def mul_ref(n: int) -> Callable[[Inputs], Inputs]:
    def ref(t: Inputs) -> Inputs:
        a, b, c, m = val(t["a"]), val(t["b"]), val(t["c"]), 1 << n
        return {"m": bits(a * b % m, n), "mad": bits((a * b + c) % m, n)}
    return ref


def mul_high(n: int) -> Callable[[Graph, Namer], None]:
    """The low half, or on request (flag hi) the high half, unsigned or (flag sg) signed."""
    def build(g: Graph, p: Namer) -> None:
        for f, size in (("a", n), ("b", n), ("hi", 1), ("sg", 1)):
            g.feature(p(f), size, "bits", token_input=True)
        for f in ("x", "y", "m"):
            g.feature(p(f), n, "bits")
        carry = gd.mul_columns(g, p("mul"), p("a"), p("b"), p("x"), p("y"),
                               high=gd.HighHalf(p("hi"), p("sg")))
        gd.add_bits(g, p("add"), p("x"), p("y"), p("m"), carry_in=carry)
    return build


def mul_high_ref(n: int) -> Callable[[Inputs], Inputs]:
    def ref(t: Inputs) -> Inputs:
        a, b, m = val(t["a"]), val(t["b"]), 1 << n
        if t["sg"][0]:
            a, b = a - (a >> (n - 1)) * m, b - (b >> (n - 1)) * m
        return {"m": bits((a * b >> n if t["hi"][0] else a * b) % m, n)}
    return ref


def with_modes(inputs: list[Inputs]) -> list[Inputs]:
    """Each input as a low product, an unsigned and a signed high one."""
    return [t | {"hi": [int(mode > 0)], "sg": [int(mode > 1)]} for t in inputs
            for mode in range(3)]


def with_addend(n: int, inputs: list[Inputs]) -> list[Inputs]:
    return [t | {"c": bits((val(t["a"]) * 7 + val(t["b"])) % (1 << n), n)} for t in inputs]


def pairs(n: int, enc: Callable[[int], list[int]], carry: bool = False) -> list[Inputs]:
    """Every pair of n-bit values (with carry: every carry-in and enable bit too)."""
    return [{"a": enc(a), "b": enc(b)} | ({"ci": bits(c, 2)} if carry else {})
            for a in range(1 << n) for b in range(1 << n) for c in (range(4) if carry else [0])]


def samples(n: int, enc: Callable[[int], list[int]], count: int, seed: int) -> list[Inputs]:
    """Random pairs of n-bit values plus edge cases (zero, all ones, the sign bit, long carry
    chains, equal values)."""
    rng = random.Random(seed)
    m = (1 << n) - 1
    edges = [0, 1, m, m - 1, 1 << (n - 1), (1 << (n - 1)) - 1, 0x5555_5555_5555_5555 & m]
    out = [(a, b) for a in edges for b in edges]
    while len(out) < count:
        a = rng.getrandbits(n)
        out.append((a, rng.choice([a, rng.getrandbits(n), a ^ (1 << rng.randrange(n))])))
    return [{"a": enc(a), "b": enc(b)} for a, b in out[:count]]


def add_onehot(g: Graph, p: Namer) -> None:
    g.feature(p("a"), 5, "onehot", token_input=True)
    g.feature(p("b"), 4, "onehot", token_input=True)
    g.feature(p("o"), 6, "onehot")
    gd.add_onehot(g, p("add"), p("a"), p("b"), p("o"))


def add_onehot_ref(t: Inputs) -> Inputs:
    a, b = hot(t["a"]), hot(t["b"])
    return {"o": onehot(6, None if a is None or b is None else (a + b) % 6)}


def increment(g: Graph, p: Namer) -> None:
    g.feature(p("a"), 6, "bits", token_input=True)
    g.feature(p("w"), 12, "word", token_input=True)
    g.feature(p("o"), 6, "bits")
    g.feature(p("ow"), 12, "word")
    g.feature(p("c"), 2, "bits")
    rules = gd.increment(g, p("inc"), p("a"), p("o"), carry_out=(p("c"), 0), group=False)
    g.rule_group(p("inc"), rules + gd.increment_word(g, p("incw"), p("w"), p("ow"),
                                                      carry_out=(p("c"), 1), group=False))


def increment_ref(t: Inputs) -> Inputs:
    a, w = val(t["a"]), wval(t["w"])
    return {"o": bits(a + 1, 6), "ow": word((w + 1) % 64, 3), "c": [int(a == 63), int(w == 63)]}


def compare(n: int, *, words: bool = False) -> Callable[[Graph, Namer], None]:
    """All six relations, unsigned (u) and signed (s), of n bits or n digits."""
    def build(g: Graph, p: Namer) -> None:
        code, size = ("word", 4 * n) if words else ("bits", n)
        for f in ("a", "b"):
            g.feature(p(f), size, code, token_input=True)
        for f, sign in (("u", False), ("s", True)):
            g.feature(p(f), 6, "bits")
            gd.compare(g, p(f"cmp{f}"), p("a"), p("b"), signed=sign,
                       **{r: (p(f), i) for i, r in enumerate(RELS)})
    return build


def compare_ref(n: int, *, words: bool = False) -> Callable[[Inputs], Inputs]:
    width, dec = (2 * n, wval) if words else (n, val)

    def ref(t: Inputs) -> Inputs:
        a, b = dec(t["a"]), dec(t["b"])
        return {"u": rel(a, b), "s": rel(sgn(a, width), sgn(b, width))}
    return ref


def equals(g: Graph, p: Namer) -> None:
    g.feature(p("a"), 4, "bits", token_input=True)
    g.feature(p("b"), 4, "bits", token_input=True)
    g.feature(p("aw"), 8, "word", token_input=True)
    g.feature(p("bw"), 8, "word", token_input=True)
    g.feature(p("e"), 1, "bits")
    g.feature(p("ew"), 1, "bits")
    gd.equals(g, p("eq"), p("a"), p("b"), (p("e"), 0))
    gd.equals(g, p("eqw"), p("aw"), p("bw"), (p("ew"), 0))


def bitwise(g: Graph, p: Namer) -> None:
    g.feature(p("a"), 4, "bits", token_input=True)
    g.feature(p("b"), 4, "bits", token_input=True)
    g.feature(p("aw"), 8, "word", token_input=True)
    g.feature(p("bw"), 8, "word", token_input=True)
    for op, f in BITOPS.items():
        g.feature(p(op), 4, "bits")
        g.feature(p(op + "w"), 8, "word")
        gd.bitwise(g, p(op), p("a"), p("b"), p(op), f)
        gd.bitwise(g, p(op + "w"), p("aw"), p("bw"), p(op + "w"), f)


def bitwise_ref(t: Inputs) -> Inputs:
    a, b, aw, bw = val(t["a"]), val(t["b"]), wval(t["aw"]), wval(t["bw"])
    out: Inputs = {}
    for op, f in BITOPS.items():
        out[op], out[op + "w"] = bits(f(a, b), 4), word(f(aw, bw), 2)
    return out


def shift(g: Graph, p: Namer) -> None:
    g.feature(p("a"), 5, "bits", token_input=True)
    g.feature(p("s"), 7, "onehot", token_input=True)  # amounts 0..6, or none
    for f, right, arith in (("shl", False, False), ("shr", True, False), ("sra", True, True)):
        g.feature(p(f), 5, "bits")
        gd.shift(g, p(f), p("a"), p("s"), p(f), right=right, arithmetic=arith)


def shift_ref(t: Inputs) -> Inputs:
    a, s = val(t["a"]), hot(t["s"])
    if s is None:
        return {"shl": [0] * 5, "shr": [0] * 5, "sra": [0] * 5}
    return {"shl": bits(a << s, 5), "shr": bits(a >> s, 5), "sra": bits(sgn(a, 5) >> s, 5)}


def popcount(g: Graph, p: Namer) -> None:
    g.feature(p("a"), 7, "bits", token_input=True)
    g.feature(p("on"), 1, "bits", token_input=True)
    g.feature(p("n"), 3, "bits")
    gd.popcount(g, p("pc"), p("a"), p("n"), when=(((p("on"), 0), 1),))


def pack_when(g: Graph, p: Namer) -> None:
    """A value packed to base-16 digits only when `on` holds (``pack_rules``), then unpacked."""
    g.feature(p("a"), 7, "bits", token_input=True)
    g.feature(p("on"), 1, "bits", token_input=True)
    g.feature(p("pk"), 2)
    g.feature(p("out"), 7, "bits")
    g.rule_group(p("pack"), gd.pack_rules(g, p("a"), p("pk"), when=(((p("on"), 0), 1),)))
    gd.unpack(g, p("unpack"), p("pk"), p("out"))


def pack_when_ref(t: Inputs) -> dict[str, list[int]]:
    return {"out": bits(t["on"][0] * val(t["a"]), 7)}  # the digits are cleared once unpacked


def _word(n: int) -> Callable[[int], list[int]]:
    return lambda v: word(v, n)


def _bits(n: int) -> Callable[[int], list[int]]:
    return lambda v: bits(v, n)


CASES = [
    Case("gates", gates, [{"x": bits(v, 5)} for v in range(32)], gates_ref),
    Case("mux", mux, [{"sel": onehot(3, s), "i0": bits(v, 2), "i1": bits(v >> 2, 2),
                       "i2": bits(v >> 4, 2)} for s in (None, 0, 1, 2) for v in range(64)],
         mux_ref),
    Case("choose", choose, [{"c": bits(c, 2), "a": bits(v, 2), "b": bits(v >> 2, 2)}
                            for c in range(4) for v in range(16)], choose_ref),
    Case("copy", copy, [{"s": bits(v, 4)} for v in range(16)], copy_ref),
    Case("onehot_to_bits", onehot_to_bits, [{"h": onehot(11, v)} for v in [None, *range(11)]],
         lambda t: {"o": bits(hot(t["h"]) or 0, 4)}),
    Case("bits_to_onehot", bits_to_onehot, [{"x": bits(v, 4)} for v in range(16)],
         lambda t: {"o": onehot(16, val(t["x"])), "o11": onehot(11, val(t["x"]))}),
    Case("word_to_onehot", word_to_onehot, [{"w": word(v, 2)} for v in [None, *range(16)]],
         lambda t: {"o": onehot(16, wval(t["w"]) if 1 in t["w"] else None),
                    "o11": onehot(11, wval(t["w"]) if 1 in t["w"] else None)}),
    Case("onehot_to_word", onehot_to_word, [{"h": onehot(16, v)} for v in [None, *range(16)]],
         lambda t: {"o": word(hot(t["h"]), 2)}),
    Case("word_bits", word_bits, [{"w": word(v, 3), "x": bits(v, 6), "x5": bits(v, 5)}
                                  for v in range(64)], word_bits_ref),
    Case("add_sub_bits6", add_sub(6), pairs(6, _bits(6)), add_sub_ref(6)),
    Case("add_sub_bits4_carry", add_sub(4, carry=True), pairs(4, _bits(4), True),
         add_sub_ref(4)),
    Case("add_sub_bits32_random", add_sub(32), samples(32, _bits(32), ROWS, 1), add_sub_ref(32)),
    Case("popcount7", popcount, [{"a": bits(v, 7), "on": [on]} for v in range(128)
                                 for on in (0, 1)],
         lambda t: {"n": bits(t["on"][0] * bin(val(t["a"])).count("1"), 3)}),
    Case("pack_when7", pack_when, [{"a": bits(v, 7), "on": [on]} for v in range(128)
                                   for on in (0, 1)], pack_when_ref),
    Case("mul_bits5", mul(5), with_addend(5, pairs(5, _bits(5))), mul_ref(5)),
    Case("mul_bits32_random", mul(32), with_addend(32, samples(32, _bits(32), ROWS, 3)),
         mul_ref(32)),
    Case("mul_high_bits5", mul_high(5), with_modes(pairs(5, _bits(5))), mul_high_ref(5)),
    Case("mul_high_bits32_random", mul_high(32), with_modes(samples(32, _bits(32), ROWS // 3, 4)),
         mul_high_ref(32)),
    Case("add_or_sub_bits5", add_or_sub(5), [t | {"m": [m]} for t in pairs(5, _bits(5))
                                             for m in (0, 1)], add_or_sub_ref(5)),
    Case("add_sub_words3", add_sub(3, words=True), pairs(6, _word(3)), add_sub_ref(3, words=True)),
    Case("add_sub_words2_carry", add_sub(2, words=True, carry=True), pairs(4, _word(2), True),
         add_sub_ref(2, words=True)),
    Case("add_sub_words16_random", add_sub(16, words=True), samples(32, _word(16), ROWS, 2),
         add_sub_ref(16, words=True)),
    Case("add_onehot", add_onehot, [{"a": onehot(5, a), "b": onehot(4, b)}
                                    for a in [None, *range(5)] for b in [None, *range(4)]],
         add_onehot_ref),
    Case("increment", increment, [{"a": bits(v, 6), "w": word(v, 3)} for v in range(64)],
         increment_ref),
    Case("compare_bits6", compare(6), pairs(6, _bits(6)), compare_ref(6)),
    Case("compare_words3", compare(3, words=True), pairs(6, _word(3)),
         compare_ref(3, words=True)),
    Case("compare_bits32_random", compare(32), samples(32, _bits(32), ROWS, 3), compare_ref(32)),
    Case("equals", equals, [{"a": bits(v, 4), "b": bits(v >> 4, 4), "aw": word(v, 2),
                             "bw": word(v >> 4, 2)} for v in range(256)],
         lambda t: {"e": [int(t["a"] == t["b"])], "ew": [int(t["aw"] == t["bw"])]}),
    Case("bitwise", bitwise, [{"a": bits(v, 4), "b": bits(v >> 4, 4), "aw": word(v, 2),
                               "bw": word(v >> 4, 2)} for v in range(256)], bitwise_ref),
    Case("shift", shift, [{"a": bits(v, 5), "s": onehot(7, s)}
                          for v in range(32) for s in [None, *range(7)]], shift_ref),
]


# --- the combined model -----------------------------------------------------------------------


def _prefix(case: str, copy: int) -> Namer:
    return lambda name: f"{case}#{copy}/{name}"


@functools.cache
def expected(case: Case) -> list[dict[str, list[int]]]:
    """The evaluator's values of the case's own graph over its domain, checked against the
    reference."""
    g = Graph()
    case.build(g, lambda name: name)
    values = evaluate(g, case.domain)
    for t, got in zip(case.domain, values, strict=True):
        for name, want in case.reference(t).items():
            assert got[name] == want, (case.name, t, name)
    return values


@functools.cache
def combined():
    """Every case's copies in one graph; each row's token inputs, and for every (case, copy)
    the domain index each row feeds it."""
    g = Graph()
    for case in CASES:
        for c in range(case.copies):
            case.build(g, _prefix(case.name, c))
    sched = schedule(g, SHAPE)
    tokens: list[Inputs] = [{} for _ in range(ROWS)]
    index = {}
    for case in CASES:
        for c in range(case.copies):
            p = _prefix(case.name, c)
            index[case.name, c] = [(r * case.copies + c) % len(case.domain) for r in range(ROWS)]
            for r, i in enumerate(index[case.name, c]):
                tokens[r].update({p(name): v for name, v in case.domain[i].items()})
    return g, sched, tokens, index


@functools.cache
def embeddings() -> torch.Tensor:
    g, sched, tokens, _ = combined()
    k = nx.pad_k(0, sched.k_used)
    return torch.stack([embed(sched, k, k, t) for t in tokens])


@functools.cache
def model(dtype: str) -> torch.nn.Module:
    return build_circuit_model(combined()[1], dtype)[0]


@functools.cache
def outputs(dtype: str, step: bool) -> dict[str, torch.Tensor]:
    residual = run_layers(model(dtype), embeddings().view(B, T, -1), step=step)
    return live_values(combined()[1], residual.reshape(ROWS, -1))


@pytest.fixture(scope="module", autouse=True)
def _free_models():
    """The two models are shared by every case; drop them when the module is done."""
    yield
    for cached in (expected, combined, embeddings, model, outputs):
        cached.cache_clear()


@pytest.mark.parametrize("dtype,step", MODES)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gadget_exact_on_its_whole_domain(case: Case, dtype: str, step: bool) -> None:
    values = expected(case)
    got = outputs(dtype, step)
    index = combined()[3]
    fed = {i for c in range(case.copies) for i in index[case.name, c]}
    assert fed == set(range(len(case.domain)))  # the copies together see every input
    for c in range(case.copies):
        p = _prefix(case.name, c)
        assert all(p(name) in got for name in case.reference(case.domain[0]))  # outputs live
        for name in values[0]:
            if p(name) in got:  # else dead after the last layer: its dims were handed on
                want = torch.tensor([values[i][name] for i in index[case.name, c]])
                assert torch.equal(got[p(name)], want.float()), (case.name, c, name)


@pytest.mark.parametrize("dtype,step", MODES)
def test_clear_zeroes_features_and_frees_their_dims(dtype: str, step: bool) -> None:
    """``clear`` rules for a one-hot, a bits and a word token input and for a memory read (a
    carrier word) leave every dim at exactly 0; one cleared feature is then written anew by a
    second group. Both groups read and write the same feature, which the dependency order cannot
    express (a cycle), so they are placed by hand at the end of layers 0 and 1."""
    g = Graph()
    g.feature("h", 5, "onehot", token_input=True, accumulate=True)
    g.feature("x", 4, "bits", token_input=True, accumulate=True)
    g.feature("w", 12, "word", token_input=True, accumulate=True)
    g.feature("src", 4, "bits", token_input=True)
    for f in ("waddr", "raddr"):
        g.feature(f, 2, "onehot", token_input=True)
    g.feature("wval", 12, "word", token_input=True)
    g.feature("r", 12, "word", accumulate=True)
    g.bank("m", 2)
    g.write("m", "waddr", "wval")
    g.read("m", "raddr", "r")
    tokens = [{"h": onehot(5, i % 6 if i % 6 < 5 else None), "x": bits(i, 4),
               "w": word(i * 7 % 64, 3), "src": bits(11 * i % 16, 4),
               "waddr": onehot(2, i % 2 if i < 12 else None), "wval": word(i * 5 % 64, 3),
               "raddr": onehot(2, i // 2 % 2 if i % 3 else None)} for i in range(16)]
    before = evaluate(g, tokens)
    assert all(any(v[f]) for v in before[1:5] for f in ("h", "x", "w")) and \
        sum(any(v["r"]) for v in before) >= 8  # the clears have something to clear
    sched = schedule(g, SHAPE)
    rules = [r for f in ("h", "x", "w", "r") for r in gd.clear(g.features[f])]
    assert len(rules) == 5 + 4 + 12 + 12  # one neuron per dim, whatever the code
    g.rule_group("clear", rules)
    gd.copy(g, "reuse", "src", "x")  # x's dims, now 0, take a new value
    sched.neurons["clear"] = (0, SHAPE.intermediate - len(rules))
    sched.neurons["reuse"] = (1, SHAPE.intermediate - 4)
    sched.layers = 2
    model, k = build_circuit_model(sched, dtype)
    embeds = torch.stack([embed(sched, k, k, t) for t in tokens])
    got = live_values(sched, run_layers(model, embeds.unsqueeze(0), step=step)[0])
    zero = torch.zeros(len(tokens), 12)
    assert torch.equal(got["h"], zero[:, :5]) and torch.equal(got["w"], zero)
    assert torch.equal(got["r"], zero)  # the carrier stays, the read is gone
    assert torch.equal(got["x"], torch.tensor([t["src"] for t in tokens], dtype=torch.float32))


def test_documented_costs() -> None:
    """The neuron counts the docstrings state (per group = per layer), at 32 bits / 16 digits."""
    g = Graph()
    for f, size, code in (("a", 32, "bits"), ("b", 32, "bits"), ("s", 32, "bits"),
                          ("aw", 64, "word"), ("bw", 64, "word"), ("sw", 64, "word"),
                          ("c", 8, "bits"), ("sel", 4, "onehot"), ("amt", 32, "onehot")):
        g.feature(f, size, code, token_input=code != "bits" or f in ("a", "b"))
    lits = [(("a", i), 1) for i in range(10)]
    for k in range(12):
        assert len(gd.threshold(g, "t", lits, k, ("c", 0), group=False)) == \
            gd.threshold_cost(10, k) == (1 if k == 0 else 0 if k > 10 else
                                         min(math.comb(10, k), 1 + math.comb(10, k - 1)))
    assert len(gd.and_gate(g, "and", lits, ("c", 0), group=False)) == 1
    assert len(gd.or_gate(g, "or", lits, ("c", 0), group=False)) == 2

    def cost(fn, *args, **kw) -> list[int]:
        before = set(g.rules)
        last = fn(g, f"x{len(g.rules)}", *args, group=False, **kw)
        return [len(g.rules[n]) for n in g.rules if n not in before] + [len(last)]

    assert cost(gd.add_bits, "a", "b", "s") == [64, 1024]
    assert cost(gd.add_bits, "a", "b", "s", carry_in=True, carry_out=("c", 0)) == \
        [64, 1024 + 64 + 33]
    assert cost(gd.add_words, "aw", "bw", "sw") == [256, 544]
    assert cost(gd.add_words, "aw", "bw", "sw", carry_in=True) == [256, 544 + 64]
    assert cost(gd.compare, "a", "b", lt=("c", 0), eq=("c", 1)) == [64, 32 + 1]
    assert cost(gd.compare, "a", "b", signed=True, ne=("c", 0), ge=("c", 1)) == [64, 32 + 32 + 1]
    assert cost(gd.compare, "aw", "bw", gt=("c", 0)) == [16 * 12, 16]
    assert cost(gd.equals, "a", "b", ("c", 0)) == [64, 1]
    assert cost(gd.increment, "a", "s", carry_out=("c", 0)) == [3 * 32 - 2 + 1]
    assert cost(gd.increment_word, "aw", "sw") == [8 * 16 - 4]
    assert cost(gd.shift, "a", "amt", "s") == [32 * 33 // 2]
    assert cost(gd.shift, "a", "amt", "s", right=True, arithmetic=True) == [32 * 33 // 2]
    assert cost(gd.bitwise, "a", "b", "s", operator.and_) == [32]
    assert cost(gd.bitwise, "a", "b", "s", operator.or_) == [64]
    assert cost(gd.bitwise, "aw", "bw", "sw", operator.xor) == [256]
    assert cost(gd.mux, "sel", ["a", "b", "s", "a"], "s") == [4 * 32]
    assert cost(gd.word_to_bits, "aw", "s") == [3 * 16]
    assert cost(gd.bits_to_word, "a", "sw") == [4 * 16]
    assert [len(gd.clear(g.features[f])) for f in ("sel", "c", "aw")] == [4, 8, 64]
