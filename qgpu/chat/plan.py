"""The calculator's planner: each operation of an expression becomes one launch of a kernel
from ``kernels/``, with its launch shape and its arguments placed in the driver's JSON form.

The host only places data: operands are flattened row-major into argument arrays, a scalar
operand of an elementwise operation is broadcast by the kernel (a mask of 0 makes it read
element 0 for every i), ``-x`` is ``0 - x`` on ``calc_sub``, ``norm2(x)`` is ``x @ x`` on
``calc_dot``, and a matrix-vector product is ``calc_matmul`` with a one-column (or one-row)
matrix. Every arithmetic kernel is a checked one (``calc_*``): it reports in flag words a
result that leaves int32 or a division by zero, and ``evaluate`` (calc.py) turns a raised flag
into an error instead of a value. ``check`` plans every step of an expression from the shapes
alone (with zeros for values), so shape and memory errors come before any launch.

Semantics (docs/CHAT.md): ``//`` and ``%`` are Python's floor division and modulo (the
quotient rounds toward minus infinity and a nonzero remainder takes the divisor's sign), not
C's truncation; ``@`` is numpy's matmul for 1-D and 2-D operands; ``sum``, ``min``, ``max``
and ``norm2`` (the squared length) take every element of a vector or matrix; ``argmin`` and
``argmax`` return the first index of the extreme; ``sort`` is ascending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from qgpu.chat.errors import ShapeError
from qgpu.chat.expression import Array, BinOp, Call, Neg, Node, Num, format_expression, pieces
from qgpu.errors import ResourceError
from qgpu.machine import limits

Value = int | list[int] | list[list[int]]
Shape = tuple[int, ...]
T = TypeVar("T")

MEMORY_WORDS = limits.GLOBAL_WORDS - limits.GLOBAL_FIRST_WORD
SORT_MAX = 16  # odd_even_sort holds the vector in one thread block's shared memory

ELEMENTWISE = {"+": "calc_add", "-": "calc_sub", "*": "calc_mul", "//": "calc_floordiv",
               "%": "calc_mod"}
_REDUCTIONS = {"sum": "calc_sum", "min": "calc_min", "max": "calc_max",
               "argmin": "calc_argmin", "argmax": "calc_argmax"}
_WARP_CUTOFF = {"calc_sum": 8, "calc_min": 8, "calc_max": 8, "calc_argmin": 8,
                "calc_argmax": 8, "calc_dot": 5}
"""Up to this many elements one lane reduces alone; beyond, the warp's four lanes share the
elements and meet by shuffles (fewer generated tokens either way; measured on the suite)."""


def shape(value: Value) -> Shape:
    if isinstance(value, int):
        return ()
    if value and isinstance(value[0], list):
        return (len(value), len(value[0]))
    return (len(value),)


def flat(value: Value) -> list[int]:
    if isinstance(value, int):
        return [value]
    if value and isinstance(value[0], list):
        return [v for row in value for v in row]
    return list(value)


def reshape(words: list[int], shp: Shape) -> Value:
    if shp == ():
        return words[0]
    if len(shp) == 1:
        return list(words)
    return [list(words[r * shp[1]:(r + 1) * shp[1]]) for r in range(shp[0])]


def describe(shp: Shape) -> str:
    if shp == ():
        return "a scalar"
    if len(shp) == 1:
        return f"a vector of {shp[0]}"
    return f"a {shp[0]}x{shp[1]} matrix"


@dataclass(frozen=True)
class Step:
    """One launch: a kernel of ``kernels/``, its launch shape and arguments (driver JSON form);
    the result is argument `out` reshaped to `shape`, and argument `flag` (if any) holds the
    flag words (overflow, and for // and % division by zero)."""

    what: str  # the operation, as expression text
    kernel: str
    grid: tuple[int, int]
    block: tuple[int, int]
    args: list[Any]
    out: int
    shape: Shape
    flag: int | None

    @property
    def words(self) -> int:
        """Global memory words its arrays take, with a guard word between arrays."""
        arrays = [len(a) if isinstance(a, list) else a["zeros"] for a in self.args
                  if isinstance(a, list | dict)]
        return sum(arrays) + len(arrays) - 1

    def result(self, final_args: list[Any]) -> Value:
        return reshape(final_args[self.out], self.shape)


def _lanes(kernel: str, n: int) -> tuple[int, int]:
    return (1 if n <= _WARP_CUTOFF[kernel] else limits.WARP_LANES, 1)


def _rows(n: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Grid and block of a one-thread-per-element launch over n elements."""
    block = min(n, limits.MAX_THREADS)
    return (-(-n // block), 1), (block, 1)


def _elementwise(what: str, kernel: str, a: Value, b: Value) -> Step:
    sa, sb = shape(a), shape(b)
    if sa and sb and sa != sb:
        raise ShapeError(f"{what}: the operands are {describe(sa)} and {describe(sb)}; "
                         "elementwise operations need equal shapes, or a scalar on one side")
    out = sa or sb
    n = len(flat(a)) if sa else len(flat(b))
    grid, block = _rows(n)
    flags = 2 if kernel in ("calc_floordiv", "calc_mod") else 1
    return Step(what, kernel, grid, block,
                [flat(a), flat(b), {"zeros": n}, {"zeros": flags}, n, -1 if sa else 0,
                 -1 if sb else 0], 2, out, 3)


def _matmul(what: str, a: Value, b: Value) -> Step:
    sa, sb = shape(a), shape(b)
    if not sa or not sb:
        raise ShapeError(f"{what}: @ multiplies vectors and matrices, not {describe(sa)} and "
                         f"{describe(sb)} (use * for a scalar)")
    if len(sa) == 1 and len(sb) == 1:
        if sa != sb:
            raise ShapeError(f"{what}: a dot product needs vectors of equal length, not "
                             f"{sa[0]} and {sb[0]}")
        return Step(what, "calc_dot", (1, 1), _lanes("calc_dot", sa[0]),
                    [flat(a), flat(b), {"zeros": 1}, {"zeros": 1}, sa[0]], 2, (), 3)
    m, k = (1, sa[0]) if len(sa) == 1 else sa
    k2, n = (sb[0], 1) if len(sb) == 1 else sb
    if k != k2:
        raise ShapeError(f"{what}: {describe(sa)} @ {describe(sb)}: the inner sizes differ "
                         f"({k} and {k2})")
    out: Shape = (m,) if len(sb) == 1 else (n,) if len(sa) == 1 else (m, n)
    bx = min(n, limits.MAX_THREADS)
    by = min(m, limits.MAX_THREADS // bx)
    grid = (-(-n // bx), -(-m // by))
    return Step(what, "calc_matmul", grid, (bx, by),
                [flat(a), flat(b), {"zeros": m * n}, {"zeros": 1}, m, k, n], 2, out, 3)


def _call(what: str, name: str, args: list[Value]) -> Step:
    if name in ("dot", "matmul"):
        return _matmul(what, *args)
    (x,) = args
    sx = shape(x)
    words = flat(x)
    n = len(words)
    if name == "transpose":
        if len(sx) != 2:
            raise ShapeError(f"{what}: transpose takes a matrix, not {describe(sx)}")
        r, c = sx
        bx, by = min(c, 4), min(r, 4)
        return Step(what, "transpose", (-(-c // bx), -(-r // by)), (bx, by),
                    [words, {"zeros": n}, r, c], 1, (c, r), None)
    if name == "abs":
        grid, block = _rows(n)
        return Step(what, "calc_abs", grid, block, [words, {"zeros": n}, {"zeros": 1}, n], 1,
                    sx, 2)
    if not sx:
        raise ShapeError(f"{what}: {name} takes a vector{' or a matrix' * (name in _WHOLE)}, "
                         f"not a scalar")
    if name in ("argmin", "argmax", "sort", "cumsum") and len(sx) != 1:
        raise ShapeError(f"{what}: {name} takes a vector, not {describe(sx)}")
    if name == "norm2":
        return Step(what, "calc_dot", (1, 1), _lanes("calc_dot", n),
                    [words, list(words), {"zeros": 1}, {"zeros": 1}, n], 2, (), 3)
    if name == "cumsum":
        return Step(what, "calc_cumsum", (1, 1), (1, 1),
                    [words, {"zeros": n}, {"zeros": 1}, n], 1, sx, 2)
    if name == "sort":
        if n > SORT_MAX:
            raise ResourceError(f"{what}: sort handles vectors of at most {SORT_MAX} elements "
                                f"(odd_even_sort keeps them in one thread block's shared "
                                f"memory), not {n}")
        return Step(what, "odd_even_sort", (1, 1), (-(-n // 2), 1), [words, n], 0, sx, None)
    kernel = _REDUCTIONS[name]
    flag = kernel == "calc_sum"
    args = [words, {"zeros": 1}, *([{"zeros": 1}] if flag else []), n]
    return Step(what, kernel, (1, 1), _lanes(kernel, n), args, 1, (), 2 if flag else None)


_WHOLE = ("sum", "min", "max", "norm2")


WHAT_MAX = 120
"""A step's `what` is its expression text, cut to this many characters (with "...")."""


def _cut(text: str, length: int) -> str:
    """`what` for a text of `length` characters that begins with `text` (at least
    WHAT_MAX + 1 of them, or all)."""
    return text if length <= WHAT_MAX else text[:WHAT_MAX - 3] + "..."


def plan_step(node: Node, operands: list[Value], what: str | None = None) -> Step | None:
    """The launch for one node given its operands' values; None for a node that is data
    (a literal, or a bracket the host fills with computed items). `what` (from ``labelled``)
    saves formatting the node's text again."""
    if what is None:
        text = format_expression(node)
        what = _cut(text, len(text))
    if isinstance(node, Num):
        return None
    if isinstance(node, Array):
        shapes = [shape(v) for v in operands]
        if any(len(s) > 1 for s in shapes) or len(set(shapes)) > 1:
            kinds = sorted({describe(s) for s in shapes})
            raise ShapeError(f"{what}: a bracket holds scalars (a vector) or vectors of one "
                             f"length (a matrix), not {' and '.join(kinds)}")
        return None
    if isinstance(node, Neg):
        step = _elementwise(what, "calc_sub", 0, operands[0])
    elif isinstance(node, BinOp) and node.op == "@":
        step = _matmul(what, *operands)
    elif isinstance(node, BinOp):
        step = _elementwise(what, ELEMENTWISE[node.op], *operands)
    else:
        step = _call(what, node.name, operands)
    if step.words > MEMORY_WORDS:
        raise ResourceError(
            f"{what} needs {step.words} words of global memory on {step.kernel} (its arrays, "
            f"with a guard word between them); the machine has {MEMORY_WORDS} words")
    return step


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Array):
        return node.items
    if isinstance(node, Call):
        return node.args
    if isinstance(node, BinOp):
        return (node.left, node.right)
    if isinstance(node, Neg):
        return (node.operand,)
    return ()


def postorder(node: Node) -> list[Node]:
    """Every node of a tree, children first (left to right), then the node: the order of the
    launches. Iterative (an explicit stack), so a chain of any length needs no recursion; a
    walk keeps its values on a stack, each node taking its ``len(children(n))`` topmost."""
    out: list[Node] = []
    todo: list[tuple[Node, bool]] = [(node, False)]
    while todo:
        n, expanded = todo.pop()
        if expanded:
            out.append(n)
            continue
        todo.append((n, True))
        todo.extend((c, False) for c in reversed(children(n)))
    return out


def labelled(node: Node) -> list[tuple[Node, str]]:
    """``postorder(node)`` with each node's `what` (its text cut to WHAT_MAX characters),
    built bottom-up from the children's first characters: linear in the tree's size, where
    formatting every node's subtree anew would be quadratic in a chain's length."""
    out: list[tuple[Node, str]] = []
    texts: list[tuple[str, int]] = []  # value stack: (first WHAT_MAX + 1 characters, length)
    for n in postorder(node):
        kids = iter(operands_of(n, texts))
        if isinstance(n, Num):
            head = str(n.value)
            length = len(head)
        else:
            parts, length = [], 0
            for piece in pieces(n):
                part, size = (piece, len(piece)) if isinstance(piece, str) else next(kids)
                if length <= WHAT_MAX:
                    parts.append(part)
                length += size
            head = "".join(parts)[:WHAT_MAX + 1]
        texts.append((head, length))
        out.append((n, _cut(head, length)))
    return out


def operands_of(node: Node, values: list[T]) -> list[T]:
    """The values of a node's children, taken off the top of a postorder walk's value stack."""
    k = len(children(node))
    if not k:
        return []
    operands = values[-k:]
    del values[-k:]
    return operands


def data(node: Node, operands: list[Value]) -> Value:
    """The value of a data node: a literal, or a bracket of its items' values."""
    if isinstance(node, Num):
        return node.value
    return list(operands)  # type: ignore[return-value]


def _zeros(shp: Shape) -> Value:
    n = 1
    for d in shp:
        n *= d
    return reshape([0] * n, shp)


def check(node: Node) -> tuple[Shape, int]:
    """The shape of an expression's value and the number of launches it takes, planning every
    step from shapes alone: ShapeError or ResourceError before anything runs."""
    launches = 0
    shapes: list[Shape] = []  # the value stack of the walk
    for n, what in labelled(node):
        operands = [_zeros(s) for s in operands_of(n, shapes)]
        step = plan_step(n, operands, what)
        if step is None:
            shapes.append(shape(data(n, operands)))
        else:
            launches += 1
            shapes.append(step.shape)
    (result,) = shapes
    return result, launches
