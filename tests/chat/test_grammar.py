"""Grammar-constrained decoding: the recogniser accepts exactly the prefixes of what the parser
accepts (less a trailing comma), and the constraint offers only tokens that keep gpu_calc's
expression parameter valid, then lets go after ``</parameter>``."""

import random

from qgpu.chat.errors import ParseError
from qgpu.chat.expression import FUNCTIONS, parse
from qgpu.chat.grammar import MAX_SPACES, ExpressionGrammar, region, state_of

PREFIX = "Sure.\n<tool_call>\n<function=gpu_calc>\n<parameter=expression>\n"


def random_expression(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth > 3 or r < 0.3:
        return str(rng.randint(-50, 50))
    if r < 0.45:
        return "[" + ", ".join(str(rng.randint(-9, 9)) for _ in range(rng.randint(1, 4))) + "]"
    if r < 0.6:
        name = rng.choice(list(FUNCTIONS))
        args = ", ".join(random_expression(rng, depth + 1) for _ in range(FUNCTIONS[name]))
        return f"{name}({args})"
    if r < 0.7:
        return "-(" + random_expression(rng, depth + 1) + ")"
    op = rng.choice([" + ", " - ", " * ", " // ", " % ", " @ ", "*", "//"])
    return random_expression(rng, depth + 1) + op + random_expression(rng, depth + 1)


def test_every_prefix_of_an_expression_is_accepted() -> None:
    rng = random.Random(0)
    for _ in range(500):
        text = random_expression(rng)
        parse(text)
        for i in range(len(text) + 1):
            assert state_of(text[:i]) is not None, text[:i]
        assert state_of(text).complete
        assert state_of(text + "\n</parameter>").done


def test_complete_means_it_parses_and_rejected_means_it_does_not() -> None:
    rng = random.Random(1)
    alphabet = "0123456789 -+*/%@[](),summaxdotnorm2"
    for _ in range(50_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 10)))
        state = state_of(text)
        try:
            parse(text)
            parses = True
        except ParseError as e:
            parses = "outside int32" in e.message
        if state is not None and state.complete:
            assert parses, text
        if state is None and parses:
            assert ",]" in text.replace(" ", "") or ",)" in text.replace(" ", ""), text


def test_the_region_is_gpu_calc_expression_only() -> None:
    assert region(PREFIX + "[1, 2") == "\n[1, 2"
    assert region(PREFIX + "[1]\n</parameter>\n") is None
    assert region("text") is None
    assert region(PREFIX.replace("gpu_calc", "cuda_launch") + "x") is None
    assert state_of(" " * (MAX_SPACES + 1)) is None


def test_constraint_over_a_token_table() -> None:
    table = ["[", "1", "2", ", ", "]", " @ ", "su", "m(", "sum", "(", ")", "\n", "</", "parameter",
             ">", "</parameter>", "hello", "12", "//", "/", "-", "dot", ",", "\n\n\n\n\n"]
    grammar = ExpressionGrammar(texts=dict(enumerate(table)))

    def allowed(text):
        ids = grammar(PREFIX + text)
        return None if ids is None else sorted(table[i] for i in ids)

    ops = [" @ ", "-", "/", "//"]
    assert allowed("") == sorted(["[", "1", "2", "su", "sum", "(", "\n", "12", "-", "dot"])
    assert allowed("[1") == sorted(["1", "2", "12", ", ", ",", "]", "\n", *ops])
    assert allowed("su") == ["m("]
    assert allowed("sum") == ["\n", "("]
    assert allowed("dot([1]") == sorted([", ", ",", "\n", *ops])  # dot takes two arguments
    assert allowed("[1] @ [2]") == sorted(["\n", "</", "</parameter>", *ops])
    assert allowed("3\n</") == ["parameter"]
    assert grammar(PREFIX + "3\n</parameter>") is None
    assert grammar("plain text") is None
