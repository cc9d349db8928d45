"""The approximate float32 instructions' macros (qgpu/machine/approx.py): their form (machine
instructions the lowering can emit as they are), the PTX ISA's special values, and their error
over a million inputs each against the exact functions, within the PTX ISA's bounds
(tests/machine/approx_errors.py measures; docs/ISA.md "Float" tabulates)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qgpu.machine import approx
from qgpu.machine import float32 as F
from qgpu.machine.isa import FLOAT_OPS, PRED_DEST_OPS, Op, slot_allows
from qgpu.machine.isa import Instr as MachineInstr
from tests.machine import approx_errors as E
from tests.machine import approx_numpy as N

VARIANTS = E.INSTRUCTIONS
NAN, INF, NINF = F.CANONICAL_NAN, F.INF, F.SIGN | F.INF
PZ, NZ, ONE = 0, F.SIGN, F.ONE
SUB, NSUB = 0x0000_1234, 0x8000_1234  # subnormals
OTHER_NAN, NEG_NAN = 0x7FC0_0000, 0xFFC0_0001


def w(x: float) -> int:
    return F.from_decimal(x)


def ids(v: tuple[str, bool]) -> str:
    return v[0] + (".ftz" if v[1] else "")


@pytest.mark.parametrize("variant", VARIANTS, ids=ids)
def test_a_macro_is_machine_instructions(variant):
    """Registers only in a and c (FFMA's addend a register), immediates only as B, every
    step an instruction some slot runs, the output written once and last, no input written."""
    m = approx.macro(*variant)
    assert m.steps[-1].d == approx.OUTPUT
    assert [s.d for s in m.steps].count(approx.OUTPUT) == 1
    for s in m.steps:
        assert isinstance(s.a, str) and s.d not in m.inputs
        assert s.op != Op.FFMA or (isinstance(s.c, str) and s.c)
        ins = MachineInstr(s.op, mod=s.mod, bi=isinstance(s.b, int),
                           imm=s.b - (1 << 32) if isinstance(s.b, int) and s.b >> 31 else
                           s.b if isinstance(s.b, int) else 0)
        assert any(slot_allows(slot, ins) for slot in range(4))
        assert s.op not in (Op.LD, Op.ST, Op.ATOMG, Op.ATOMS, Op.SHFL, Op.S2R, Op.PLOP)
    names = [s.d for s in m.steps]
    assert len(names) == len(set(names))  # one name per step: fresh vregs in the lowering
    assert sum(s.op in PRED_DEST_OPS for s in m.steps) <= 4  # at most the machine's predicates
    assert m.float_steps == sum(s.op in FLOAT_OPS for s in m.steps)


def test_the_orders_name_every_step():
    """approx.ORDER (a search's result) still fits every macro its builder writes."""
    for key, ftz in VARIANTS:
        m = approx.macro(key, ftz)
        assert sorted(s.d for s in m.steps) == sorted(s.d for s in approx._build(key, ftz).steps)
    assert set(approx.ORDER) <= {approx.macro(k, f).name for k, f in VARIANTS}


def test_which_instructions_are_approximate():
    assert approx.kind("div", ("approx", "ftz", "f32")) == "div.approx"
    assert approx.kind("div", ("full", "f32")) == "div.full"
    assert approx.kind("div", ("rn", "f32")) is None
    assert approx.kind("sqrt", ("rz", "ftz", "f32")) is None
    assert approx.kind("ex2", ("approx", "f32")) == "ex2"
    assert approx.for_instruction("tanh", ("approx", "f32")) is approx.macro("tanh", False)
    assert approx.for_instruction("lg2", ("approx", "ftz", "f32")).name == "lg2.approx.ftz"


def _inputs(n_in: int) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    special = np.array([PZ, NZ, SUB, NSUB, 1, 0x8000_0001, 0x007F_FFFF, 0x0080_0000, INF, NINF,
                        NAN, OTHER_NAN, NEG_NAN, ONE, w(-1), w(0.5), w(2), w(128), w(-150),
                        w(-149.5), w(3.1415927), w(1e30), w(-1e30), w(8388608), w(4.5),
                        0x7F7F_FFFF, 0xFF7F_FFFF, w(2.0 ** 126), w(2.0 ** 127), w(2 ** -126)],
                       np.uint32)
    cols = []
    for k in range(n_in):
        vals = np.concatenate([
            np.roll(special, 5 * k),
            rng.integers(0, 2 ** 32, 4000, dtype=np.uint64).astype(np.uint32),
            np.float32(rng.uniform(-10, 10, 2000)).view(np.uint32),
            np.float32(rng.uniform(-200, 200, 1000)).view(np.uint32)])
        cols.append(vals)
    if n_in == 2:  # every pair of specials too
        a, b = np.meshgrid(special, special)
        cols = [np.concatenate([cols[0], a.ravel()]), np.concatenate([cols[1], b.ravel()])]
    return cols


@pytest.mark.parametrize("variant", VARIANTS, ids=ids)
def test_the_vector_evaluator_is_the_reference_bit_for_bit(variant):
    """tests/machine/approx_numpy.py (which the error measures use) gives approx.evaluate's
    words (the interpreter's alu, one value at a time) on specials and 7000 other inputs."""
    m = approx.macro(*variant)
    cols = _inputs(len(m.inputs))
    got = N.run(m, *cols)
    want = [approx.evaluate(m, *(int(c[i]) for c in cols)) for i in range(len(cols[0]))]
    bad = [i for i in range(len(want)) if int(got[i]) != want[i]]
    assert not bad, [(tuple(hex(int(c[i])) for c in cols), hex(int(got[i])), hex(want[i]))
                     for i in bad[:5]]


@pytest.mark.parametrize("variant", VARIANTS, ids=ids)
def test_error_within_the_ptx_bound(variant):
    """A million inputs per instruction (random words of the domain, the bounds' ranges,
    dense reduced ranges, the overflow and underflow edges): the worst error is within the PTX
    ISA's bound."""
    for res in E.measure(*variant):
        assert res.count > 200_000, res
        assert res.worst <= res.bound, (res.label, E.describe(res.worst, res.kind), res.where)


def value(word: int) -> float:
    return F.to_float(word)


# The PTX ISA's tables of special inputs (9.7.3.13-22), and .ftz's flushing to signed zeros.
SPECIALS = {
    "ex2": [(NINF, PZ), (NZ, ONE), (PZ, ONE), (INF, INF), (NAN, NAN), (NEG_NAN, NAN),
            (w(128), INF), (w(-151), PZ), (w(-149), 1), (w(-126), 0x0080_0000),
            (w(10), w(1024)), (w(-3), w(0.125)), (SUB, ONE), (NSUB, ONE)],
    "lg2": [(NINF, NAN), (w(-1), NAN), (NZ, NINF), (PZ, NINF), (INF, INF), (NAN, NAN),
            (NEG_NAN, NAN), (ONE, PZ), (w(2), ONE), (w(0.25), w(-2)), (1, w(-149)),
            (w(2.0 ** 127), w(127)), (NSUB, NAN)],
    "sin": [(NINF, NAN), (NZ, NZ), (PZ, PZ), (INF, NAN), (NAN, NAN), (SUB, SUB), (NSUB, NSUB),
            (w(1e30), PZ)],
    "cos": [(NINF, NAN), (NZ, ONE), (PZ, ONE), (INF, NAN), (NAN, NAN), (SUB, ONE), (w(1e30), ONE)],
    "tanh": [(NINF, w(-1)), (NZ, NZ), (PZ, PZ), (INF, ONE), (NAN, NAN), (NEG_NAN, NAN),
             (SUB, SUB), (NSUB, NSUB), (w(20), ONE)],
    "rsqrt": [(NINF, NAN), (w(-2), NAN), (NZ, NINF), (PZ, INF), (INF, PZ), (NAN, NAN),
              (w(4), w(0.5)), (w(0.25), w(2)), (0x0020_0000, w(2.0 ** 64)), (NSUB, NAN)],
    "sqrt": [(NINF, NAN), (w(-2), NAN), (NZ, NZ), (PZ, PZ), (INF, INF), (NAN, NAN),
             (w(4), w(2)), (w(2.0 ** -148), w(2.0 ** -74)), (NSUB, NAN)],
    "rcp": [(NINF, NZ), (NZ, NINF), (PZ, INF), (INF, PZ), (NAN, NAN), (w(4), w(0.25)),
            (w(-0.5), w(-2)), (w(2.0 ** 127), 0x0040_0000), (1, INF), (0x0040_0000, w(2.0 ** 127))],
}
FTZ_SPECIALS = {  # flushed inputs and results
    "ex2": [(w(-127), PZ), (w(-149), PZ), (SUB, ONE)],
    "lg2": [(SUB, NINF), (NSUB, NINF)],
    "sin": [(SUB, PZ), (NSUB, NZ)],
    "cos": [(SUB, ONE), (NSUB, ONE)],
    "rsqrt": [(SUB, INF), (NSUB, NINF)],
    "sqrt": [(SUB, PZ), (NSUB, NZ)],
    "rcp": [(SUB, INF), (NSUB, NINF), (w(2.0 ** 127), PZ), (w(-(2.0 ** 127)), NZ)],
}


@pytest.mark.parametrize("variant", [v for v in VARIANTS if not v[0].startswith("div")],
                         ids=ids)
def test_special_values(variant):
    key, ftz = variant
    m = approx.macro(key, ftz)
    cases = [c for c in SPECIALS[key] if not ftz or not (F.is_subnormal(c[0])
                                                          or F.is_subnormal(c[1]))]
    if ftz:
        cases += FTZ_SPECIALS.get(key, [])
    for x, want in cases:
        got = m(x)
        assert got == want, (m.name, hex(x), hex(got), hex(want))


@pytest.mark.parametrize("kind", ["div.approx", "div.full"])
@pytest.mark.parametrize("ftz", [False, True])
def test_division_special_values(kind, ftz):
    """IEEE's specials (0/0, inf/inf NaN; x/0 inf; x/inf 0; NaN), and div.approx's documented
    behaviour for 2^126 < |b| < 2^128: a signed zero, NaN for an infinite a."""
    m = approx.macro(kind, ftz)
    two, big = w(2), w(2.0 ** 127)
    cases = [((PZ, PZ), NAN), ((INF, NINF), NAN), ((two, PZ), INF), ((two, NZ), NINF),
             ((NZ, two), NZ), ((two, INF), PZ), ((NINF, two), NINF), ((NAN, two), NAN),
             ((two, NAN), NAN), ((PZ, NAN), NAN), ((w(6), w(-3)), w(-2)), ((ONE, ONE), ONE)]
    if kind == "div.approx":  # a·(1/b): 1/b is a signed zero above 2^126, infinite below 2^-128
        cases += [((w(1e38), big), PZ), ((w(-1e38), big), NZ), ((INF, big), NAN)]
        if not ftz:
            cases += [((SUB, SUB), INF), ((w(2.0 ** -140), 0x0040_0000), w(2.0 ** -13))]
    elif not ftz:  # div.full scales both operands: the quotient is right over the whole range
        cases += [((INF, big), INF), ((SUB, SUB), ONE), ((1, w(2)), 0),
                  ((w(2.0 ** -140), 0x0000_0400), w(2.0 ** -140 / 2.0 ** -139))]
    if ftz:
        cases += [((SUB, ONE), PZ), ((ONE, SUB), INF), ((NSUB, NSUB), NAN)]
    for (a, b), want in cases:
        got = m(a, b)
        assert got == want, (m.name, hex(a), hex(b), hex(got), hex(want))
    # near the ends of the range: within 2 ulp
    pairs = [(w(2e-38), w(1.5e-38)), (0x7F7F_FFFF, w(1.5)), (w(1.5), 0x7E7F_FFFF),
             (w(-3e-38), w(-7e37))]
    if kind == "div.full":
        pairs += [(w(2.0 ** 127), 0x7F7F_FFFF), (w(3e38), w(2.0 ** 127))]
    for a, b in pairs:
        got, want = value(m(a, b)), value(a) / value(b)
        assert abs(got - want) <= 2 * E.ulp(np.array([want]))[0], (m.name, hex(a), hex(b), got)


def test_ex2_is_exact_on_integers_and_monotone_near_them():
    m = approx.macro("ex2", False)
    for n in range(-149, 128):
        assert value(m(w(n))) == 2.0 ** n
    xs = np.float32(np.linspace(-3, 3, 20001)).view(np.uint32)
    ys = N.f32(N.run(m, xs)).astype(np.float64)
    assert np.all(np.diff(ys) >= 0)


def test_lg2_and_ex2_round_trip():
    """lg2(ex2(x)) stays within a few ulp of x's neighbourhood (both macros, their errors)."""
    ex2, lg2 = approx.macro("ex2", False), approx.macro("lg2", False)
    for x in np.float32(np.linspace(-100, 100, 997)):
        y = value(lg2(ex2(w(float(x)))))
        assert abs(y - float(x)) <= 2e-6 * max(1.0, abs(float(x))), (x, y)


def test_trig_identities():
    """sin² + cos² = 1 and the quadrant symmetries hold to the instructions' accuracy."""
    s, c = approx.macro("sin", False), approx.macro("cos", False)
    for x in np.float32(np.linspace(-20, 20, 1601)):
        sx, cx = value(s(w(float(x)))), value(c(w(float(x))))
        assert abs(sx * sx + cx * cx - 1) < 1e-6
        assert abs(sx - math.sin(float(x))) < 2 ** -20.5
        assert value(s(w(float(-x)))) == -sx  # odd, bit for bit
        assert value(c(w(float(-x)))) == cx  # even, bit for bit
