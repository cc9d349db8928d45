"""The calculator on the reference machine: every operation equals Python (an independent
reference below, on Python ints, floor division as Python's), one launch of a kernels/ kernel
per operation, shapes and memory checked before anything runs, int32 overflow and division by
zero reported by the GPU's flag words, and ``python -m qgpu calc``."""

import json
import random
import re

import numpy as np
import pytest

from qgpu.chat.calc import Launcher, calc, suite_kernel
from qgpu.chat.errors import ArithmeticFault, ShapeError
from qgpu.chat.expression import Array, BinOp, Call, Neg, Num, parse
from qgpu.chat.plan import check
from qgpu.cli import main
from qgpu.driver import SUITE_DIR
from qgpu.errors import ResourceError

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1


class Fault(Exception):
    def __init__(self, kind: str) -> None:
        self.kind = kind


def _fits(v):
    for x in np.ravel(np.array(v, dtype=object)):
        if not INT_MIN <= x <= INT_MAX:
            raise Fault("overflow")
    return v


def _elementwise(op, a, b):
    if op in ("//", "%") and 0 in np.ravel(np.array(b, dtype=object)):
        raise Fault("division_by_zero")
    fn = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
          "//": lambda x, y: x // y, "%": lambda x, y: x % y}[op]
    out = np.vectorize(fn, otypes=[object])(np.array(a, dtype=object), np.array(b, dtype=object))
    return _fits(out.tolist() if out.ndim else int(out))


def _matmul(a, b):
    out = np.array(a, dtype=object) @ np.array(b, dtype=object)
    return _fits(out.tolist() if isinstance(out, np.ndarray) else int(out))


def reference(node):
    """What an expression means, in Python: the same tree, an independent evaluation."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Array):
        return [reference(i) for i in node.items]
    if isinstance(node, Neg):
        return _elementwise("-", 0, reference(node.operand))
    if isinstance(node, BinOp):
        a, b = reference(node.left), reference(node.right)
        return _matmul(a, b) if node.op == "@" else _elementwise(node.op, a, b)
    assert isinstance(node, Call)
    args = [reference(a) for a in node.args]
    if node.name in ("dot", "matmul"):
        return _matmul(*args)
    x = args[0]
    flat = [int(v) for v in np.ravel(np.array(x, dtype=object))]
    return {
        "sum": lambda: _fits(sum(flat)), "min": lambda: min(flat), "max": lambda: max(flat),
        "argmin": lambda: flat.index(min(flat)), "argmax": lambda: flat.index(max(flat)),
        "sort": lambda: sorted(flat), "cumsum": lambda: _fits(list(np.cumsum(flat).tolist())),
        "abs": lambda: _fits(np.abs(np.array(x, dtype=object)).tolist() if isinstance(x, list)
                             else abs(x)),
        "transpose": lambda: np.array(x, dtype=object).T.tolist(),
        "norm2": lambda: _fits(sum(v * v for v in flat)),
    }[node.name]()


def expect(text: str):
    try:
        return reference(parse(text)), None
    except Fault as f:
        return None, f.kind


CASES = [
    # every operator and function, with edges (int32 bounds, signs, broadcasting, 1 element)
    "[1, 2, 3] @ [4, 5, 6]", "[-3] @ [7]", "[[1, 2], [3, 4]] @ [5, 6]", "[5, 6] @ [[1, 2], [3, 4]]",
    "[[1, 2, 3], [4, 5, 6]] @ [[1, 0], [0, 1], [2, -1]]", "[[7]] @ [[-6]]", "dot([1, 2], [3, 4])",
    "matmul([[1, 2]], [[3], [4]])", "[1, 2, 3] + [4, 5, 6]", "[1, 2, 3] - 10", "10 - [1, 2, 3]",
    "[[1, 2], [3, 4]] * [[5, 6], [7, 8]]", "3 * [[1, -1]]", "2 + 3", "2147483646 + 1",
    "-2147483647 - 1", "65535 * 65537", "-65536 * 32768", "[7, -7, 7, -7, 0] // [2, 2, -2, -2, 3]",
    "[7, -7, 7, -7, 0] % [2, 2, -2, -2, 3]", "-2147483648 % -1", "-2147483647 // -1", "17 // 5",
    "-17 % 5", "-[1, -2, 0]", "-(5)", "--5", "-(-2147483647)", "sum([1, 2, 3])",
    "sum([[1, 2], [3, 4]])", "sum([2147483647, 1, -1])", "sum([5])", "min([3, -1, 2])",
    "max([[3, -1], [9, 2]])", "min([-2147483648, 2147483647])", "max([-2147483648])",
    "argmin([4, 1, 1, 0, 0])", "argmax([1, 9, 3, 9])", "argmax([-5, -5])",
    "sort([5, -3, 9, 1, -2, 0, 7])", "sort([1])", "sort([2147483647, -2147483648, 0])",
    "cumsum([1, 2, 3, 4])", "cumsum([2147483647, 1, -2])", "cumsum([-1])", "abs([-3, 4, 0])",
    "abs(-2147483647)", "abs([[1, -2], [-3, 4]])", "transpose([[1, 2, 3], [4, 5, 6]])",
    "transpose([[1], [2]])", "norm2([3, 4])", "norm2([[1, 2], [3, 4]])", "norm2([46341])",
    "sum([1, 2, 3] * [4, 5, 6])", "[sum([1, 2]), max([3, 4])] * 2", "max(cumsum([5, -2, 7]))",
    "transpose([[1, 2], [3, 4]]) @ [1, 1]", "([5, 6, 7] - [1, 2, 3]) @ ([5, 6, 7] - [1, 2, 3])",
    "[[1, 2], [3, 4]] + transpose([[1, 2], [3, 4]])", "sum(abs([-3, 5] * 2)) // 3 % 4",
]
FAULTS = [
    ("2147483647 + 1", "overflow"), ("-2147483648 - 1", "overflow"), ("65536 * 65536", "overflow"),
    ("-2147483648 // -1", "overflow"), ("abs(-2147483648)", "overflow"), ("-(-2147483648)",
    "overflow"), ("sum([2147483647, 1])", "overflow"), ("cumsum([2147483647, 1, -5])", "overflow"),
    ("[100000, 1] @ [100000, 1]", "overflow"), ("norm2([46341])", "overflow"),
    ("[[65536]] @ [[65536]]", "overflow"), ("1 // 0", "division_by_zero"),
    ("[1, 2] % [1, 0]", "division_by_zero"), ("5 // (3 - 3)", "division_by_zero"),
]


@pytest.mark.parametrize("text", CASES)
def test_every_operation_equals_python(text: str) -> None:
    want, fault = expect(text)
    node = parse(text)
    _, launches = check(node)
    if fault is not None:
        with pytest.raises(ArithmeticFault) as info:
            calc(text)
        assert info.value.kind == fault
        return
    result = calc(text)
    assert result.value == want
    assert len(result.launches) == launches  # every operation one launch, nothing else
    for x in result.launches:
        assert x.suite and (SUITE_DIR / f"{x.kernel}.cu").is_file()
        assert x.backend == "interp" and x.generated_tokens > 0 and x.prompt_tokens > 0


@pytest.mark.parametrize("text, kind", FAULTS)
def test_overflow_and_division_by_zero_come_from_the_gpu(text: str, kind: str) -> None:
    assert expect(text) == (None, kind)
    with pytest.raises(ArithmeticFault) as info:
        calc(text)
    assert info.value.kind == kind
    assert "the GPU's calc_" in info.value.message


def test_random_expressions_equal_python() -> None:
    rng = random.Random(5)

    def value(shape):
        big = rng.random() < 0.1
        hi = 1 << 16 if big else 20
        if shape == ():
            return str(rng.randint(-hi, hi))
        if len(shape) == 1:
            return "[" + ", ".join(str(rng.randint(-hi, hi)) for _ in range(shape[0])) + "]"
        return "[" + ", ".join(value(shape[1:]) for _ in range(shape[0])) + "]"

    def expr(shape, depth):
        if depth > 2 or rng.random() < 0.3:
            return value(shape)
        r = rng.random()
        if r < 0.45:
            op = rng.choice(["+", "-", "*", "//", "%"])
            a = expr(shape if rng.random() < 0.8 else (), depth + 1)
            return f"({a} {op} {expr(shape, depth + 1)})"
        if r < 0.6 and shape == ():
            n = rng.randint(1, 5)
            fn = rng.choice(["sum", "min", "max", "argmin", "argmax", "norm2"])
            return f"{fn}({expr((n,), depth + 1)})"
        if r < 0.7 and len(shape) == 1:
            fn = rng.choice(["sort", "cumsum", "abs"])
            return f"{fn}({expr(shape, depth + 1)})"
        if r < 0.85:
            k = rng.randint(1, 3)
            if shape == ():
                return f"({expr((k,), depth + 1)} @ {expr((k,), depth + 1)})"
            if len(shape) == 1:
                return f"({expr((shape[0], k), depth + 1)} @ {expr((k,), depth + 1)})"
            return f"({expr((shape[0], k), depth + 1)} @ {expr((k, shape[1]), depth + 1)})"
        return f"-{expr(shape, depth + 1)}"

    for _ in range(60):
        shape = rng.choice([(), (rng.randint(1, 4),), (rng.randint(1, 3), rng.randint(1, 3))])
        text = expr(shape, 0)
        want, fault = expect(text)
        try:
            got, kind = calc(text).value, None
        except ArithmeticFault as e:
            got, kind = None, e.kind
        assert (got, kind) == (want, fault), text


@pytest.mark.parametrize("text, message", [
    ("[1, 2] + [1, 2, 3]", "a vector of 2 and a vector of 3"),
    ("[1, 2] @ [1]", "vectors of equal length"),
    ("[[1, 2]] @ [[1, 2]]", "the inner sizes differ (2 and 1)"),
    ("3 @ [1]", "use * for a scalar"),
    ("sum(5)", "sum takes a vector or a matrix, not a scalar"),
    ("argmax([[1, 2]])", "argmax takes a vector, not a 1x2 matrix"),
    ("transpose([1, 2])", "transpose takes a matrix"),
    ("[[1, 2], [3]]", "a bracket holds scalars"),
    ("[[1], 2]", "a bracket holds scalars"),
    ("[[[1]]]", "a bracket holds scalars"),
    ("[1, 2] * [[1, 2]]", "equal shapes"),
])
def test_shape_errors_come_before_any_launch(text: str, message: str) -> None:
    launched = []

    class Counting(Launcher):
        def run(self, step):
            launched.append(step)
            return super().run(step)

    with pytest.raises(ShapeError, match=re.escape(message)):
        calc(text, Counting())
    assert launched == []


def test_too_large_for_memory_names_the_limit() -> None:
    vec = "[" + ", ".join(["1"] * 62) + "]"
    with pytest.raises(ResourceError, match="needs 129 words of global memory .* 127 words"):
        calc(f"sum([1, 2]) + {vec} @ {vec}")
    with pytest.raises(ResourceError, match="at most 16 elements"):
        calc("sort([" + ", ".join(map(str, range(17))) + "])")
    fits = "[" + ", ".join(["1"] * 61) + "]"
    assert calc(f"{fits} @ {fits}").value == 61


def test_the_host_only_places_data() -> None:
    """Each launch's inputs are its operands as given, or a previous launch's result."""
    result = calc("sum([1, 2, 3] * [4, 5, 6]) - [7]")
    mul, total, sub = result.launches
    assert mul.args[:2] == [[1, 2, 3], [4, 5, 6]]
    assert total.args[0] == mul.result[2]
    assert sub.args[:2] == [total.result[1], [7]] and sub.result[2] == [25]


def test_kernels_load_from_the_committed_ptx() -> None:
    assert suite_kernel("calc_dot").name == "calc_dot"
    assert suite_kernel("calc_dot") is suite_kernel("calc_dot")


def test_cli_calc(capsys) -> None:
    assert main(["calc", "sum([1, 2, 3] * [4, 5, 6])", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["expression"] == "sum([1, 2, 3] * [4, 5, 6])" and out["value"] == 32
    assert [x["kernel"] for x in out["launches"]] == ["calc_mul", "calc_sum"]
    assert all({"prompt_tokens", "generated_tokens"} <= set(x) for x in out["launches"])
    assert main(["calc", "[[1, 2], [3, 4]] @ [5, 6]"]) == 0
    assert "= [17, 39]" in capsys.readouterr().out
    for text, kind in (("65536 * 65536", "overflow"), ("1 +", "parse"), ("[1] @ [1, 2]", "shape"),
                       ("1 // 0", "division_by_zero")):
        assert main(["calc", text, "--json"]) == 2
        assert json.loads(capsys.readouterr().out)["error"]["kind"] == kind
    assert main(["calc", "1", "--model", "x", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["kind"] == "usage"


TABLE_KERNEL = """
__constant__ int table[4] = {10, 20, 30, 40};
extern "C" __global__ void lookup(const int *idx, int *out) {
    out[threadIdx.x] = table[idx[threadIdx.x] & 3];
}
"""


def test_a_model_written_kernel_is_placed_as_the_driver_places_it() -> None:
    """cuda_launch's kernels go through Kernel.place: module variables (a __constant__ table)
    are laid out, and an integer for a pointer parameter is refused, naming it."""
    from qgpu.driver import compile_source
    from qgpu.errors import UsageError

    kernel = compile_source(TABLE_KERNEL).kernel("lookup")
    record = Launcher().launch(kernel, (1, 1), (4, 1), [[3, 2, 1, 0], {"zeros": 4}], "lookup")
    assert record.result[1] == [40, 30, 20, 10]
    with pytest.raises(UsageError, match="pointer"):
        Launcher().launch(kernel, (1, 1), (4, 1), [[3, 2, 1, 0], 5], "lookup")


@pytest.mark.parametrize("text", [
    "+".join(["1"] * 1000),
    "".join(f"{i % 9 + 1}{('+', '*', '-', '//', '%', '*')[i % 6]}" for i in range(999)) + "7",
], ids=["ones", "mixed"])
def test_a_1000_term_chain_is_999_launches(text: str) -> None:
    """A long chain (a left-deep tree ~1000 deep) is planned and evaluated without recursion:
    every operation still one launch on the GPU kernel, each result the next launch's input
    (nothing folded on the host). ~1000 interp launches take a few seconds."""
    want = eval(text)  # Python's //, % and precedence are the calculator's
    assert INT_MIN <= want <= INT_MAX
    assert check(parse(text)) == ((), 999)
    result = calc(text)
    assert result.value == want and len(result.launches) == 999
    if set(text) == {"1", "+"}:
        assert want == 1000
        assert {x.kernel for x in result.launches} == {"calc_add"}
        for prev, x in zip(result.launches, result.launches[1:], strict=False):
            assert x.args[:2] == [prev.result[2], [1]]
    assert all(len(x.what) <= 120 for x in result.launches)
    assert result.launches[-1].what.endswith("...")


def test_the_planner_is_not_recursive() -> None:
    """check() walks a tree far deeper than any that parses (built by hand) with its own stack."""
    node = Num(1, 0)
    for k in range(5000):
        node = BinOp("-" if k % 2 else "+", Neg(node, 0) if k % 7 == 0 else node, Num(2, 0), 0)
    assert check(node) == ((), 5000 + len(range(0, 5000, 7)))


def test_a_chain_over_the_operations_limit_is_a_parse_error(capsys) -> None:
    from qgpu.chat.errors import ParseError
    from qgpu.chat.expression import MAX_OPERATIONS

    launched = []

    class Counting(Launcher):
        def run(self, step):
            launched.append(step)
            return super().run(step)

    text = "+".join(["1"] * (MAX_OPERATIONS + 2))
    with pytest.raises(ParseError, match=f"{MAX_OPERATIONS + 1} operations; at most "
                                         f"{MAX_OPERATIONS}") as info:
        calc(text, Counting())
    assert info.value.kind == "parse" and launched == []
    assert main(["calc", text, "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["kind"] == "parse" and "MAX_OPERATIONS" in error["message"]
