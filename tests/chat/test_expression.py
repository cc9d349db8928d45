"""The calculator's language: what parses to what, the canonical text, and errors that point at
the place of the mistake."""

import re

import pytest

from qgpu.chat import expression as E
from qgpu.chat.errors import ParseError
from qgpu.chat.expression import Array, BinOp, Call, Neg, Num, format_expression, parse
from qgpu.chat.plan import check

MAX_DEPTH, MAX_LENGTH, MAX_OPERATIONS = E.MAX_DEPTH, E.MAX_LENGTH, E.MAX_OPERATIONS


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



def _chain(op: str, terms: int, space: str = " ") -> str:
    return f"{space}{op}{space}".join(["1"] * terms)


@pytest.mark.parametrize("text", [
    _chain("+", 1000), _chain("-", 1000), _chain("*", 1000), _chain("//", 1000, ""),
    "+".join(f"{i % 10}*{i % 7}" for i in range(500)),  # 1*2+3*4+...: 999 operations
    "-".join(f"{i % 10}%7*2" for i in range(333)),  # 999 terms, 998 operations
], ids=["add", "sub", "mul", "floordiv", "products", "mixed"])
def test_a_1000_term_chain_parses_and_formats_without_recursion(text: str) -> None:
    """A chain is a left-deep tree ~1000 deep, past Python's recursion limit for a recursive
    walk: the parser reads it in a loop and format_expression keeps its own stack."""
    canonical = re.sub(r"\s*(//|[-+*%])\s*", r" \1 ", text)
    assert format_expression(parse(text)) == canonical
    compact = canonical.replace(" ", "")
    assert format_expression(parse("(" * 39 + compact + ")" * 39)) == canonical


def test_format_expression_is_not_recursive() -> None:
    """A tree far deeper than any that parses (built by hand) still formats."""
    left = right = Num(1, 0)
    for _ in range(5000):
        left = BinOp("+", left, Num(1, 0), 0)
        right = BinOp("-", Num(1, 0), Neg(right, 0), 0)
    assert format_expression(left) == _chain("+", 5001)
    assert format_expression(right) == "1 - -(" * 4999 + "1 - -1" + ")" * 4999


def test_the_operations_limit_names_itself() -> None:
    """At most MAX_OPERATIONS operations (each is one GPU launch): the 1,000-term chain's 999
    pass, one more than the limit is a parse error naming the count and the limit."""
    assert MAX_OPERATIONS >= 1000
    assert check(parse(_chain("+", 1000)))[1] == 999
    assert check(parse(_chain("+", MAX_OPERATIONS + 1, "")))[1] == MAX_OPERATIONS
    too_many = _chain("+", MAX_OPERATIONS + 2, "")
    assert len(too_many) <= MAX_LENGTH  # the operations limit, not the length, rejects it
    with pytest.raises(ParseError) as info:
        parse(too_many)
    assert info.value.kind == "parse"
    assert f"has {MAX_OPERATIONS + 1} operations; at most {MAX_OPERATIONS}" in \
        info.value.message
    assert "MAX_OPERATIONS" in info.value.message and "GPU launch" in info.value.message
    with pytest.raises(ParseError, match=f"characters; at most {MAX_LENGTH}"):
        parse("1+" * (MAX_LENGTH // 2) + "1")  # too long is still a length error


def test_operations_count_the_launches() -> None:
    """The parser counts what the planner launches (operators, minus signs, calls; not
    literals, negative literals or brackets), up to the limit exactly."""
    head = "-(1)+sum([1,2])+abs(-(3))+[1,2]@[3,4]+[sum([1]),2*3]@[1,1]+dot([1],[2])//-2+-5"
    _, launches = check(parse(head))
    assert launches == 16
    at_limit = head + "+1" * (MAX_OPERATIONS - launches)
    assert check(parse(at_limit))[1] == MAX_OPERATIONS
    with pytest.raises(ParseError, match=f"has {MAX_OPERATIONS + 1} operations"):
        parse(at_limit + "+1")


@pytest.mark.parametrize("text", [
    "(" * 40 + "1" + ")" * 40, "[" * 21 + "1" + "]" * 21, "abs(" * 21 + "1" + ")" * 21,
    "-(" * 21 + "1" + ")" * 21, "-" * 40 + "(1)", "1 + " + "(" * 40 + "1" + ")" * 40,
    "(" * 40 + _chain("+", 900, "") + ")" * 40,
])
def test_nesting_beyond_max_depth_is_a_parse_error(text: str) -> None:
    """Nesting stays recursive in the parser, bounded by MAX_DEPTH."""
    with pytest.raises(ParseError, match=f"nested more than {MAX_DEPTH} deep") as info:
        parse(text)
    assert info.value.kind == "parse"
    parse("(" * (MAX_DEPTH - 1) + "1" + ")" * (MAX_DEPTH - 1))
