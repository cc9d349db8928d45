"""The calculator's language: what parses to what, the canonical text, and errors that point at
the place of the mistake."""

import re

import pytest

from qgpu.chat.errors import ParseError
from qgpu.chat.expression import Array, BinOp, Call, Neg, Num, format_expression, parse


@pytest.mark.parametrize("text, canonical", [
    ("[1,2,3]@[4,5,6]", "[1, 2, 3] @ [4, 5, 6]"),
    ("sum( [1, 2, 3] * [4, 5, 6] )", "sum([1, 2, 3] * [4, 5, 6])"),
    ("1 + 2 * 3", "1 + 2 * 3"),
    ("(1 + 2) * 3", "(1 + 2) * 3"),
    ("1 - (2 - 3)", "1 - (2 - 3)"),
    ("1 - 2 - 3", "1 - 2 - 3"),
    ("2 * 3 // 4 % 5 @ 6", "2 * 3 // 4 % 5 @ 6"),
    ("-(1 + 2)", "-(1 + 2)"),
    ("--3", "-(-3)"),
    ("-[1, -2]", "-[1, -2]"),
    ("[[1, 2],\n [3, 4]]", "[[1, 2], [3, 4]]"),
    ("[1, 2,]", "[1, 2]"),
    ("dot([1], [2])", "dot([1], [2])"),
    ("norm2(transpose([[1]]))", "norm2(transpose([[1]]))"),
    ("-2147483648", "-2147483648"),
])
def test_parse_and_canonical_text(text: str, canonical: str) -> None:
    tree = parse(text)
    assert format_expression(tree) == canonical
    assert parse(canonical) == parse(format_expression(parse(canonical)))


def test_precedence_and_literals_follow_python() -> None:
    assert parse("1 + 2 * 3") == BinOp("+", Num(1, 0), BinOp("*", Num(2, 4), Num(3, 8), 6), 2)
    assert parse("-3") == Num(-3, 0)  # a negative literal is data, not a launch
    assert isinstance(parse("-(3)"), Neg) and isinstance(parse("- [1]"), Neg)
    assert isinstance(parse("-2 * 3"), BinOp) and parse("-2 * 3").left == Num(-2, 0)
    assert isinstance(parse("[1, [2]]"), Array)
    assert parse("max([1])") == Call("max", (Array((Num(1, 5),), 4),), 0)


@pytest.mark.parametrize("text, message, column", [
    ("1 +", "expected a number", 4),
    ("[1,,2]", "expected a number", 4),
    ("1 / 2", "use // for floor division", 3),
    ("2 ** 3", "no power operator", 3),
    ("foo(1)", "unknown name 'foo'", 1),
    ("sum(1, 2)", "sum takes 1 argument, not 2", 1),
    ("dot([1])", "dot takes 2 arguments, not 1", 1),
    ("3000000000", "outside int32", 1),
    ("-2147483649", "outside int32", 1),
    ("[]", "empty vector", 1),
    ("(1", "expected ')'", 3),
    ("1 2", "unexpected '2'", 3),
    ("1 $ 2", "unexpected character '$'", 3),
    ("+1", "unary + is not supported", 1),
])
def test_errors_name_the_place(text: str, message: str, column: int) -> None:
    with pytest.raises(ParseError, match=re.escape(message)) as info:
        parse(text)
    assert info.value.kind == "parse"
    assert f"at column {column}:" in info.value.message
    assert info.value.message.endswith("\n  " + " " * (column - 1) + "^")


@pytest.mark.parametrize("text", ["", "   ", "(" * 50 + "1" + ")" * 50, "1+" * 3000 + "1"])
def test_empty_deep_and_long_expressions_are_rejected(text: str) -> None:
    with pytest.raises(ParseError):
        parse(text)
