"""The calculator's expression language: integers, vectors and matrices, parsed to a tree.

    expr   := term (("+" | "-") term)*
    term   := unary (("*" | "//" | "%" | "@") unary)*
    unary  := "-" unary | atom
    atom   := INT | "[" [expr ("," expr)*] "]" | NAME "(" [expr ("," expr)*] ")" | "(" expr ")"

Precedence and associativity are Python's (``@`` binds like ``*``; unary minus binds tighter
than both). ``[1, 2, 3]`` is a vector and ``[[1, 2], [3, 4]]`` a matrix (rows of equal
length); a bracket may hold computed items (``[sum(x), 2]``), which the host places into a
new array. A minus sign directly before an integer is part of the literal (``-5`` is data, not
a launch); every other minus is arithmetic. Integers are the machine's: int32, so a literal
outside -2147483648..2147483647 is rejected. ``FUNCTIONS`` lists the names and their
argument counts; the planner (plan.py) gives them and the operators their meaning.

Limits (docs/CHAT.md): at most ``MAX_LENGTH`` characters, ``MAX_DEPTH`` levels of nesting
(brackets, calls, parentheses, minus signs: the parser recurses on these only) and
``MAX_OPERATIONS`` operations, each of which is one GPU launch. A chain such as ``1 + 1 + ... + 1``
is read in a loop, and every walk over the tree (``format_expression``, the planner, the
evaluator) keeps its own stack, so a long chain needs no Python recursion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from qgpu.chat.errors import ParseError

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
MAX_LENGTH = 4000  # characters
MAX_DEPTH = 40  # nesting of brackets, calls, parentheses and minus signs
MAX_OPERATIONS = 1000  # operators, minus signs and calls: each is one GPU launch

FUNCTIONS = {
    "sum": 1, "min": 1, "max": 1, "argmin": 1, "argmax": 1, "sort": 1, "cumsum": 1,
    "abs": 1, "transpose": 1, "norm2": 1, "dot": 2, "matmul": 2,
}  # fmt: skip
"""Function name -> number of arguments (``dot(a, b)`` and ``matmul(a, b)`` are ``a @ b``)."""

BINARY = ("+", "-", "*", "//", "%", "@")


@dataclass(frozen=True)
class Num:
    value: int
    pos: int


@dataclass(frozen=True)
class Array:
    """``[item, ...]``: a vector of scalars or a matrix of equal-length vectors."""

    items: tuple[Node, ...]
    pos: int


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Node, ...]
    pos: int


@dataclass(frozen=True)
class BinOp:
    op: str
    left: Node
    right: Node
    pos: int


@dataclass(frozen=True)
class Neg:
    operand: Node
    pos: int


Node = Num | Array | Call | BinOp | Neg

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z_0-9]*)|(//|\*\*|[-+*/%@()\[\],]))")


@dataclass(frozen=True)
class _Tok:
    kind: str  # "int", "name", "op", "end"
    text: str
    pos: int


def _tokens(text: str) -> list[_Tok]:
    out, i = [], 0
    while True:
        m = _TOKEN.match(text, i)
        if m is None:
            rest = text[i:]
            if not rest.strip():
                return [*out, _Tok("end", "", len(text))]
            at = i + len(rest) - len(rest.lstrip())
            raise _error(text, at, f"unexpected character {text[at]!r}")
        kind = "int" if m.group(1) else "name" if m.group(2) else "op"
        tok = _Tok(kind, m.group(m.lastindex), m.start(m.lastindex))
        if tok.text == "/":
            raise _error(text, tok.pos, "the machine has integers only: use // for floor "
                                        "division")
        if tok.text == "**":
            raise _error(text, tok.pos, "there is no power operator (** is not supported)")
        out.append(tok)
        i = m.end()


def _error(text: str, pos: int, message: str) -> ParseError:
    """A parse error with the place shown: the expression, and a caret under column pos."""
    line = text.replace("\n", " ")
    return ParseError(f"{message} at column {pos + 1}:\n  {line}\n  {' ' * pos}^")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0
        self.operations = 0  # BinOp, Neg and Call nodes: the launches the expression takes

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def take(self, text: str | None = None) -> _Tok:
        tok = self.tok
        if text is not None and tok.text != text:
            found = "the end" if tok.kind == "end" else repr(tok.text)
            raise _error(self.text, tok.pos, f"expected {text!r}, found {found}")
        self.i += 1
        return tok

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _error(self.text, self.tok.pos, f"nested more than {MAX_DEPTH} deep")

    def expr(self) -> Node:
        self.nest()
        node = self.term()
        while self.tok.text in ("+", "-"):
            op = self.take()
            node = BinOp(op.text, node, self.term(), op.pos)
            self.operations += 1
        self.depth -= 1
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.tok.text in ("*", "//", "%", "@"):
            op = self.take()
            node = BinOp(op.text, node, self.unary(), op.pos)
            self.operations += 1
        return node

    def unary(self) -> Node:
        if self.tok.text == "+":
            raise _error(self.text, self.tok.pos, "unary + is not supported")
        if self.tok.text != "-":
            return self.atom()
        minus = self.take()
        if self.tok.kind == "int":
            return self.integer(self.take(), -1, minus.pos)
        self.nest()
        node = Neg(self.unary(), minus.pos)
        self.operations += 1
        self.depth -= 1
        return node

    def integer(self, tok: _Tok, sign: int, pos: int) -> Num:
        value = sign * int(tok.text)
        if not INT32_MIN <= value <= INT32_MAX:
            raise _error(self.text, pos, f"the integer {value} is outside int32 (the machine's "
                                         f"words hold {INT32_MIN}..{INT32_MAX})")
        return Num(value, pos)

    def items(self, close: str) -> tuple[Node, ...]:
        out: list[Node] = []
        if self.tok.text != close:
            out.append(self.expr())
            while self.tok.text == ",":
                self.take()
                if self.tok.text == close:  # a trailing comma
                    break
                out.append(self.expr())
        self.take(close)
        return tuple(out)

    def atom(self) -> Node:
        tok = self.tok
        if tok.kind == "int":
            return self.integer(self.take(), 1, tok.pos)
        if tok.text == "(":
            self.take()
            node = self.expr()
            self.take(")")
            return node
        if tok.text == "[":
            self.take()
            self.nest()
            items = self.items("]")
            self.depth -= 1
            if not items:
                raise _error(self.text, tok.pos, "an empty vector has no value here")
            return Array(items, tok.pos)
        if tok.kind == "name":
            self.take()
            name = tok.text
            if name not in FUNCTIONS:
                raise _error(self.text, tok.pos, f"unknown name {name!r}; the functions are "
                                                 f"{', '.join(FUNCTIONS)}")
            self.take("(")
            self.nest()
            args = self.items(")")
            self.depth -= 1
            want = FUNCTIONS[name]
            if len(args) != want:
                raise _error(self.text, tok.pos, f"{name} takes {want} argument"
                                                 f"{'s' if want > 1 else ''}, not {len(args)}")
            self.operations += 1
            return Call(name, args, tok.pos)
        found = "the end of the expression" if tok.kind == "end" else repr(tok.text)
        raise _error(self.text, tok.pos, f"expected a number, a vector, a function or '(', "
                                         f"found {found}")


def parse(text: str) -> Node:
    """The tree of an expression (ParseError, kind "parse", names the place of a mistake, or
    the limit an expression exceeds)."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("the expression is empty")
    if len(text) > MAX_LENGTH:
        raise ParseError(f"the expression has {len(text)} characters; at most {MAX_LENGTH}")
    p = _Parser(text)
    node = p.expr()
    if p.tok.kind != "end":
        raise _error(text, p.tok.pos, f"unexpected {p.tok.text!r} after a complete expression")
    if p.operations > MAX_OPERATIONS:
        raise ParseError(f"the expression has {p.operations} operations; at most "
                         f"{MAX_OPERATIONS} (MAX_OPERATIONS: each operation is one GPU launch)")
    return node


_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2, "@": 2}


def pieces(node: BinOp | Neg | Array | Call) -> list[Node | str]:
    """An operation's or bracket's canonical text as pieces: strings, and its children (in
    the order of ``plan.children``) where their own text goes."""
    if isinstance(node, Array | Call):
        inner = node.items if isinstance(node, Array) else node.args
        out: list[Node | str] = ["[" if isinstance(node, Array) else f"{node.name}("]
        for k, sub in enumerate(inner):
            out += [", ", sub] if k else [sub]
        return [*out, "]" if isinstance(node, Array) else ")"]
    if isinstance(node, Neg):
        bare = isinstance(node.operand, Array | Call) or \
            isinstance(node.operand, Num) and node.operand.value >= 0
        return ["-", node.operand] if bare else ["-(", node.operand, ")"]
    prec = _PRECEDENCE[node.op]
    left: list[Node | str] = [node.left]
    right: list[Node | str] = [node.right]
    if isinstance(node.left, BinOp) and _PRECEDENCE[node.left.op] < prec:
        left = ["(", node.left, ")"]
    if isinstance(node.right, BinOp) and _PRECEDENCE[node.right.op] <= prec:
        right = ["(", node.right, ")"]
    return [*left, f" {node.op} ", *right]


def format_expression(node: Node) -> str:
    """The canonical text of a tree: Python spacing, only the parentheses it needs. Iterative
    (a stack of pieces still to write), so a chain of any length formats in linear time."""
    out: list[str] = []
    todo: list[Node | str] = [node]  # popped from the end: pushed in reverse order
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, Num):
            out.append(str(item.value))
        else:
            todo.extend(reversed(pieces(item)))
    return "".join(out)
