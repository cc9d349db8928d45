"""div, sqrt and rcp on float32 lowered to machine instructions (select/float_divide.py): every
result bit for bit what qgpu/machine/float32.py's divide/sqrt/reciprocal give, in every rounding
mode with and without .ftz — special values, random words, operands in and out of the fast
path's box, quotients near the subnormal and overflow boundaries, near-midpoint and exact
quotients, the seed's worst significands. The selector runs on one-instruction kernels built
here (no parser needed) and its IR is evaluated per input by a small evaluator: one that runs
each instruction with the machine interpreter's own ``alu`` and compare, and a compiled one
(the same semantics as Python source, checked against the first) for the large random runs.
One kernel goes through the whole lowering and runs on the machine interpreter, lanes of one
warp taking the fast and the slow path.

``QGPU_FDIV_RANDOM`` scales the random runs; the default keeps the file near a minute (12.5 runs
a million div.rn pairs and 100,000 cases of every other form)."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator

import pytest

from qgpu.machine import approx
from qgpu.machine import float32 as F
from qgpu.machine.float32 import Round
from qgpu.machine.interp import alu, compare, run_program
from qgpu.machine.isa import FLOAT_OPS, FLOAT_SLOTS, Cmp, Op, TermKind
from qgpu.toolchain.lower import lower_kernel
from qgpu.toolchain.lower.ir import IRFunction
from qgpu.toolchain.lower.select import Selector
from qgpu.toolchain.ptx import ast

M32 = 0xFFFF_FFFF
SCALE = float(os.environ.get("QGPU_FDIV_RANDOM", "1"))
RANDOM_DIV_RN = int(80_000 * SCALE)  # div.rn (QGPU_FDIV_RANDOM=12.5: a million)
RANDOM_OTHER = int(8_000 * SCALE)  # every other (op, rounding, ftz)
MODES = [pytest.param(rnd, ftz, id=f"{rnd.name.lower()}{'.ftz' if ftz else ''}")
         for rnd in Round for ftz in (False, True)]
REFERENCE: dict[str, Callable[..., int]] = {
    "div": F.divide, "sqrt": F.sqrt, "rcp": F.reciprocal}


# --- one instruction, selected --------------------------------------------------------------
def selected(op: str, mods: tuple[str, ...], operands: tuple[object, ...] | None = None,
             guard: tuple[str, bool] | None = None, before: tuple[ast.Instr, ...] = (),
             ) -> tuple[IRFunction, Selector]:
    """The IR of a kernel whose body is ``op.mods %f3, %f1[, %f2]`` (or the given operands),
    after the instructions ``before``."""
    if operands is None:
        srcs = (ast.Reg("%f1"), ast.Reg("%f2")) if op == "div" else (ast.Reg("%f1"),)
        operands = (ast.Reg("%f3"), *srcs)
    text = f"{op}.{'.'.join(mods)}"
    ins = ast.Instr(1, text, guard, op, mods, operands)
    regs = (ast.RegDecl("f32", "%f", 6, 1), ast.RegDecl("pred", "%p", 2, 1))
    kernel = ast.Kernel("k", (), regs, (), (*before, ins), 1)
    selector = Selector(kernel, ast.Module("7.0", "sm_75", 64, (kernel,), ()))
    return selector.run(), selector


def mods_of(rnd: Round, ftz: bool) -> tuple[str, ...]:
    return (rnd.name.lower(), *(("ftz",) if ftz else ()), "f32")


def evaluate(fn: IRFunction, regs: dict[int, int], preds: dict[int, bool] | None = None,
             ) -> list[int]:
    """Run the IR on one thread: instructions through the machine interpreter's ``alu`` and
    compare, SEL, PLOP, guards, and the blocks' jumps and branches. Returns the registers."""
    r = [0] * fn.num_vregs
    p = [False] * max(fn.num_vpreds, 1)
    for k, v in regs.items():
        r[k] = v
    for k, v in (preds or {}).items():
        p[k] = v
    block, steps = 0, 0
    while True:
        steps += 1
        assert steps < 1000, "the lowering loops"
        blk = fn.blocks[block]
        for ins in blk.instrs:
            if ins.guard is not None and p[ins.guard[0]] == ins.guard[1]:
                continue
            a, b = r[ins.a], ins.imm & M32 if ins.bi else r[ins.b]
            if ins.op in (Op.SETP, Op.FSETP):
                p[ins.d] = compare(ins, a, b)
            elif ins.op == Op.PLOP:
                x, y = p[ins.a] != bool(ins.mod & 4), p[ins.b] != bool(ins.mod & 8)
                p[ins.d] = (x and y, x or y, x != y)[ins.mod & 3]
            elif ins.op == Op.SEL:
                r[ins.d] = a if p[ins.c] != bool(ins.mod & 1) else b
            else:
                r[ins.d] = alu(ins.op, a, b, r[ins.c], ins.mod)
            r[0] = 0
        term = blk.term
        if term.kind == TermKind.EXIT:
            return r
        if term.kind == TermKind.JMP:
            block = term.target
        else:
            block = term.target if p[term.pred] != term.negated else term.other


def compiled(fn: IRFunction, inputs: list[int], output: int) -> Callable[..., int]:
    """The same evaluation as Python source (float ops straight to float32.py): about five
    times faster, checked against ``evaluate`` below."""
    signed = "(({0}) - ((({0}) >> 31) << 32))"
    infix = {Op.ADD: "({a} + {b}) & M32", Op.SUB: "({a} - {b}) & M32",
             Op.AND: "{a} & {b}", Op.OR: "{a} | {b}", Op.XOR: "{a} ^ {b}",
             Op.MINU: "min({a}, {b})", Op.MAXU: "max({a}, {b})",
             Op.MIN: f"min({signed.format('{a}')}, {signed.format('{b}')}) & M32",
             Op.MAX: f"max({signed.format('{a}')}, {signed.format('{b}')}) & M32",
             Op.SHL: "(({a} << {b}) & M32 if {b} < 32 else 0)",
             Op.SHR: "({a} >> {b} if {b} < 32 else 0)",
             Op.SRA: f"({signed.format('{a}')} >> min({{b}}, 31)) & M32",
             Op.NOT: "~{a} & M32", Op.CLZ: "32 - {a}.bit_length()",
             Op.FADD: "F.add({a}, {b}, {rnd}, {ftz})", Op.FSUB: "F.sub({a}, {b}, {rnd}, {ftz})",
             Op.FMUL: "F.mul({a}, {b}, {rnd}, {ftz})",
             Op.FFMA: "F.fma({a}, {b}, {c}, {rnd}, {ftz})",
             Op.FRND: "F.round_integral({a}, {rnd}, {ftz})",
             Op.F2I: "F.to_int({a}, {signed_int}, {rnd}, {f2i_ftz})"}
    compare = {Cmp.EQ: "==", Cmp.NE: "!=", Cmp.LT: "<", Cmp.LE: "<=", Cmp.GT: ">",
               Cmp.GE: ">=", Cmp.LO: "<", Cmp.LS: "<=", Cmp.HI: ">", Cmp.HS: ">="}
    names = {f"r{k}" for blk in fn.blocks for i in blk.instrs for k in (i.d, i.a, i.b, i.c)
             if k} - {f"r{k}" for k in inputs}
    lines = [f"def run({', '.join(f'r{k}' for k in inputs)}):",
             f"    r0 = {' = '.join(sorted(names))} = 0" if names else "    r0 = 0",
             "    block = 0", "    while True:"]
    for n, blk in enumerate(fn.blocks):
        lines.append(f"        {'el' if n else ''}if block == {n}:")
        body = []
        for i in blk.instrs:
            a, b, c = f"r{i.a}", str(i.imm & M32) if i.bi else f"r{i.b}", f"r{i.c}"
            if i.op == Op.SETP:
                x, y = (a, b) if Cmp(i.mod) in (Cmp.EQ, Cmp.NE, Cmp.LO, Cmp.LS, Cmp.HI,
                                                 Cmp.HS) else (signed.format(a),
                                                               signed.format(b))
                line = f"p{i.d} = {x} {compare[Cmp(i.mod)]} {y}"
            elif i.op == Op.PLOP:
                x = f"(not p{i.a})" if i.mod & 4 else f"p{i.a}"
                y = f"(not p{i.b})" if i.mod & 8 else f"p{i.b}"
                line = f"p{i.d} = ({x} {('and', 'or', '!=')[i.mod & 3]} {y})"
            elif i.op == Op.SEL:
                line = f"r{i.d} = {a} if {'not ' if i.mod & 1 else ''}p{i.c} else {b}"
            else:
                assert i.op in infix, f"{i.op.name}: not in the compiled evaluator"
                line = f"r{i.d} = " + infix[i.op].format(
                    a=a, b=b, c=c, rnd=f"F.Round({i.mod & 3})", ftz=bool(i.mod & 4),
                    signed_int=bool(i.mod & 4), f2i_ftz=bool(i.mod & 8))
            if i.guard is not None:
                line = f"if {'not ' if i.guard[1] else ''}p{i.guard[0]}: {line}"
            if not line.startswith("r0 ="):
                body.append(line)
        term = blk.term
        if term.kind == TermKind.EXIT:
            body.append(f"return r{output}")
        elif term.kind == TermKind.JMP:
            body.append(f"block = {term.target}")
        else:
            cond = f"{'not ' if term.negated else ''}p{term.pred}"
            body.append(f"block = {term.target} if {cond} else {term.other}")
        lines += [f"            {x}" for x in body]
    namespace = {"F": F, "M32": M32}
    exec(compile("\n".join(lines), f"<{fn.name}>", "exec"), namespace)  # noqa: S102
    return namespace["run"]


def lowered(op: str, rnd: Round, ftz: bool) -> Callable[..., int]:
    fn, selector = selected(op, mods_of(rnd, ftz))
    inputs = [selector.vregs["%f1"]] + ([selector.vregs["%f2"]] if op == "div" else [])
    return compiled(fn, inputs, selector.vregs["%f3"])


# --- inputs -------------------------------------------------------------------------------
def _signed(words: set[int]) -> list[int]:
    return sorted(words | {w ^ F.SIGN for w in words})


SPECIALS = _signed({
    0, 1, 0x007F_FFFF, 0x0080_0000, F.ONE, F.MAX_FINITE, F.INF,  # 0, subnormals, 1, max, inf
    0x7FC0_0000, 0x7F80_0001, F.CANONICAL_NAN,  # NaNs
    0x0000_0003, 0x0040_0000, 0x0080_0001, 0x00FF_FFFF, 0x3F80_0001, 0x3F7F_FFFF,
    0x3FFF_FFFF, 0x4040_0000, 0x7F7F_FFFE, 0x7F00_0000, 0x0100_0000,  # all ones, 2^k, near
    0x2000_0000, 0x1FFF_FFFF, 0x5EFF_FFFF, 0x5F00_0000, 0x5F7F_FFFF,  # the division's box
    0x7C00_0000, 0x7C7F_FFFF, 0x0C80_0000, 0x187F_FFFF, 0x1880_0000,  # rcp's, sqrt's box
})


def _normal(rng: random.Random, lo: int = 1, hi: int = 254) -> int:
    return rng.getrandbits(1) << 31 | rng.randint(lo, hi) << 23 | rng.getrandbits(23)


def _worst_seed(rng: random.Random) -> int:
    """Significands where the reciprocal seed is least accurate (|1 - b*y0| near 0.0505) or
    at the ends of the binade."""
    frac = rng.choice((0, 1, 0x7F_FFFF, 0x7F_FFFE, 0x3B_3F00 + rng.randint(-4096, 4096),
                       0x6A_0000 + rng.randint(-4096, 4096), rng.getrandbits(8)))
    return rng.getrandbits(1) << 31 | rng.randint(1, 254) << 23 | frac


def division_pairs(rng: random.Random, n: int) -> Iterator[tuple[int, int]]:
    for i in range(n):
        kind = i % 8
        if kind == 0:  # random words (mostly far-apart exponents: the slow path)
            yield rng.getrandbits(32), rng.getrandbits(32)
        elif kind == 1:  # nearby exponents
            e = rng.randint(1, 254)
            yield _normal(rng, e, e), _normal(rng, max(1, e - 3), min(254, e + 3))
        elif kind in (2, 3):  # quotients near 2^-126 (subnormal results) or 2^128
            b = _normal(rng)
            e = rng.randint(-152, -120) if kind == 2 else rng.randint(122, 128)
            q = F.round_value(rng.getrandbits(1), rng.getrandbits(24) | 1 << 23, e - 23)
            yield F.mul(q, b & F.MAGNITUDE, Round(rng.randint(0, 3))), b
        elif kind == 4:  # a = round(b (q +- ulp/2)): quotients next to a midpoint
            b = _normal(rng, 40, 214)
            s, mb, eb = F._parts(b)
            mid = 2 * (rng.getrandbits(24) | 1 << 23) + rng.choice((-1, 1))
            yield F.round_value(s, mid * mb, rng.randint(-60, 60) - 24 + eb,
                                Round(rng.randint(0, 3))), b
        elif kind == 5:  # exact quotients and their neighbours
            b = _normal(rng, 40, 214)
            _, mb, eb = F._parts(b)
            q = rng.getrandbits(rng.randint(1, 24)) | 1
            a = F.round_value(rng.getrandbits(1), q * mb, eb + rng.randint(-30, 30))
            yield (a + rng.choice((0, 0, 1, -1))) & M32, b
        elif kind == 6:  # subnormal operands
            sub = rng.getrandbits(1) << 31 | rng.getrandbits(rng.randint(1, 23))
            other = _normal(rng) if rng.random() < 0.5 else \
                rng.getrandbits(1) << 31 | rng.getrandbits(23)
            yield (sub, other) if rng.random() < 0.5 else (other, sub)
        else:
            yield _normal(rng), _worst_seed(rng)


def sqrt_words(rng: random.Random, n: int) -> Iterator[int]:
    for i in range(n):
        kind = i % 5
        if kind == 0:
            yield rng.getrandbits(32)
        elif kind == 1:
            yield _normal(rng) & F.MAGNITUDE
        elif kind == 2:  # a = round(m^2) for a midpoint m: roots next to a midpoint
            m = 2 * (rng.getrandbits(24) | 1 << 23) + 1
            yield F.round_value(0, m * m, 2 * rng.randint(-75, 60), Round(rng.randint(0, 3)))
        elif kind == 3:  # exact squares and their neighbours
            s = rng.getrandbits(rng.randint(1, 24)) | 1
            w = F.round_value(0, s * s, 2 * rng.randint(-80, 60))
            yield (w + rng.randint(-2, 2)) & M32
        else:  # subnormal
            yield rng.getrandbits(1) << 31 | rng.getrandbits(rng.randint(1, 23))


def reciprocal_words(rng: random.Random, n: int) -> Iterator[int]:
    for i in range(n):
        kind = i % 4
        if kind == 0:
            yield rng.getrandbits(32)
        elif kind == 1:
            yield _normal(rng)
        elif kind == 2:  # results near the subnormal and overflow boundaries
            e = rng.choice((rng.randint(240, 254), rng.randint(0, 3)))
            yield rng.getrandbits(1) << 31 | e << 23 | rng.getrandbits(23)
        else:
            yield _worst_seed(rng)


def inputs_for(op: str, rng: random.Random, n: int) -> list[tuple[int, ...]]:
    if op == "div":
        return list(division_pairs(rng, n))
    return [(w,) for w in (sqrt_words if op == "sqrt" else reciprocal_words)(rng, n)]


def check(op: str, rnd: Round, ftz: bool, cases: list[tuple[int, ...]]) -> None:
    run = lowered(op, rnd, ftz)
    ref = REFERENCE[op]
    bad = [(args, run(*args), ref(*args, rnd, ftz)) for args in cases
           if run(*args) != ref(*args, rnd, ftz)]
    if bad:
        args, got, want = bad[0]
        pytest.fail(f"{op}.{rnd.name.lower()}{'.ftz' if ftz else ''}: {len(bad)} of "
                    f"{len(cases)} differ; first ({', '.join(f'{w:#010x}' for w in args)}) "
                    f"gives {got:#010x}, float32.py {want:#010x}")


# --- tests --------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["div", "sqrt", "rcp"])
def test_the_compiled_evaluator_is_the_interpreters(op: str) -> None:
    rng = random.Random(7)
    for rnd, ftz in ((rnd, ftz) for rnd in Round for ftz in (False, True)):
        fn, selector = selected(op, mods_of(rnd, ftz))
        names = ["%f1", "%f2"] if op == "div" else ["%f1"]
        inputs = [selector.vregs[n] for n in names]
        fast = compiled(fn, inputs, selector.vregs["%f3"])
        for args in inputs_for(op, rng, 150):
            regs = evaluate(fn, dict(zip(inputs, args, strict=True)))
            assert regs[selector.vregs["%f3"]] == fast(*args) == \
                REFERENCE[op](*args, rnd, ftz)


@pytest.mark.parametrize(("rnd", "ftz"), MODES)
def test_division_of_every_special_pair(rnd: Round, ftz: bool) -> None:
    check("div", rnd, ftz, [(a, b) for a in SPECIALS for b in SPECIALS])


@pytest.mark.parametrize("op", ["sqrt", "rcp"])
@pytest.mark.parametrize(("rnd", "ftz"), MODES)
def test_every_special_word(op: str, rnd: Round, ftz: bool) -> None:
    check(op, rnd, ftz, [(w,) for w in SPECIALS])


def test_division_to_nearest_random() -> None:
    check("div", Round.RN, False, inputs_for("div", random.Random(1), RANDOM_DIV_RN))


@pytest.mark.parametrize(("op", "rnd", "ftz"), [
    pytest.param(op, *m.values, id=f"{op}.{m.id}") for op in ("div", "sqrt", "rcp") for m in MODES
    if (op, *m.values) != ("div", Round.RN, False)])  # (that one: the test above)
def test_random(op: str, rnd: Round, ftz: bool) -> None:
    seed = 100 * int(rnd) + 10 * ftz + ["div", "sqrt", "rcp"].index(op)
    check(op, rnd, ftz, inputs_for(op, random.Random(seed), RANDOM_OTHER))


def test_guarded_forms_write_only_where_the_guard_holds() -> None:
    x, y, old = 0x4080_0000, 0x4040_0000, 0x1234_5678
    for op in ("div", "sqrt", "rcp"):
        args = (x, y) if op == "div" else (x,)
        want = REFERENCE[op](*args, Round.RZ, False)
        for negated in (False, True):
            fn, sel = selected(op, ("rz", "f32"), guard=("%p1", negated))
            regs = dict(zip([sel.vregs["%f1"], sel.vregs.get("%f2")], args, strict=False))
            regs[sel.vregs["%f3"]] = old
            for holds in (False, True):
                out = evaluate(fn, regs, {sel.vpreds["%p1"]: holds})[sel.vregs["%f3"]]
                assert out == (want if holds != negated else old), (op, negated, holds)


def test_the_destination_may_be_an_operand_and_operands_immediates() -> None:
    a, b = 0x4049_0FDB, 0xC02D_F854  # pi, -e
    fn, sel = selected("div", ("rn", "f32"), (ast.Reg("%f1"), ast.Reg("%f1"), ast.Reg("%f2")))
    out = evaluate(fn, {sel.vregs["%f1"]: a, sel.vregs["%f2"]: b})
    assert out[sel.vregs["%f1"]] == F.divide(a, b)
    fn, sel = selected("div", ("rp", "f32"), (ast.Reg("%f2"), ast.Imm(a), ast.Reg("%f2")))
    assert evaluate(fn, {sel.vregs["%f2"]: b})[sel.vregs["%f2"]] == F.divide(a, b, Round.RP)
    fn, sel = selected("sqrt", ("rm", "f32"), (ast.Reg("%f1"), ast.Reg("%f1")))
    assert evaluate(fn, {sel.vregs["%f1"]: a})[sel.vregs["%f1"]] == F.sqrt(a, Round.RM)
    fn, sel = selected("div", ("rz", "ftz", "f32"), (ast.Reg("%f3"), ast.Reg("%f1"),
                                                     ast.Reg("%f1")))  # x / x
    for x in (a, b, 0, 1, F.SIGN | 0x0040_0000, F.INF, F.CANONICAL_NAN, 0x7F7F_FFFF):
        out = evaluate(fn, {sel.vregs["%f1"]: x})[sel.vregs["%f3"]]
        assert out == F.divide(x, x, Round.RZ, True), hex(x)


@pytest.mark.parametrize(("rnd", "ftz"), MODES)
def test_constant_divisors(rnd: Round, ftz: bool) -> None:
    """A divisor that is an immediate or a register holding one: its reciprocal is computed
    here (14 instructions for .rn when the divisor is in the box, the general code else)."""
    rng = random.Random(int(rnd) + 10 * ftz)
    divisors = [0x4040_0000, 0xC0A0_0000, F.ONE, 0x3DCC_CCCD, 0x3FFF_FFFF, 0x2000_0000,
                0x5EFF_FFFF, 0x1FFF_FFFF, 0x5F00_0000, F.MAX_FINITE, 1, 0, F.INF, 0x7FC0_0000,
                *(_normal(rng, 64, 189) for _ in range(4))]
    numerators = [a for a, _ in division_pairs(rng, 240)] + SPECIALS
    for k, b in enumerate(divisors):
        if k % 3:
            fn, sel = selected("div", mods_of(rnd, ftz), (ast.Reg("%f3"), ast.Reg("%f1"),
                                                          ast.Imm(b)))
        else:
            mov = ast.Instr(0, "mov.f32", None, "mov", ("f32",), (ast.Reg("%f5"), ast.Imm(b)))
            fn, sel = selected("div", mods_of(rnd, ftz), (ast.Reg("%f3"), ast.Reg("%f1"),
                                                          ast.Reg("%f5")), before=(mov,))
        run = compiled(fn, [sel.vregs["%f1"]], sel.vregs["%f3"])
        bad = [a for a in numerators if run(a) != F.divide(a, b, rnd, ftz)]
        assert not bad, f"{len(bad)} wrong for b = {b:#010x}, first a = {bad[0]:#010x}"


def test_constant_operands_are_computed_in_the_selector() -> None:
    for op, args in (("div", (0x4049_0FDB, 0x0000_0003)), ("sqrt", (0x0000_0002,)),
                     ("rcp", (0xFF7F_FFFF,))):
        for rnd, ftz in ((Round.RN, False), (Round.RM, True)):
            operands = (ast.Reg("%f3"), *(ast.Imm(w) for w in args))
            fn, sel = selected(op, mods_of(rnd, ftz), operands)
            assert [len(b.instrs) for b in fn.blocks] == [1]
            assert evaluate(fn, {})[sel.vregs["%f3"]] == REFERENCE[op](*args, rnd, ftz)


@pytest.mark.parametrize("form", [("div", "approx"), ("div", "full"), ("sqrt", "approx"),
                                  ("rcp", "approx")])
def test_approximate_forms_are_their_straight_line_macros(form: tuple[str, str]) -> None:
    """``.approx``/``.full`` never reach the correctly rounded paths: one block, the macro."""
    op, kind = form
    fn, _ = selected(op, (kind, "ftz", "f32"))
    macro = approx.for_instruction(op, (kind, "ftz", "f32"))
    assert [len(b.instrs) for b in fn.blocks] == [len(macro.steps)]


# --- the whole lowering, on the machine interpreter -----------------------------------------
LANES = 16  # four warps


def _kernel() -> ast.Kernel:
    """d[i] = a[i] / b[i] (rn), e[i] = sqrt.rz(|a[i]|), f[i] = rcp.rm.ftz(b[i]),
    g[i] = a[i] / 3 (rp)."""
    R, A, Imm = ast.Reg, ast.Addr, ast.Imm
    body: list[ast.Instr] = []

    def ins(text: str, opcode: str, mods: tuple[str, ...], *ops: object) -> None:
        body.append(ast.Instr(len(body) + 10, text, None, opcode, mods, ops))

    for k, name in enumerate("abdefg"):
        ins(f"ld.param.u64 %rd{k + 1}, [p{name}]", "ld", ("param", "u64"), R(f"%rd{k + 1}"),
            A(ast.Sym(f"p{name}"), 0))
    ins("mov.u32 %r1, %tid.x", "mov", ("u32",), R("%r1"), ast.SpecialReg("%tid", "x"))
    ins("mul.wide.u32 %rd7, %r1, 4", "mul", ("wide", "u32"), R("%rd7"), R("%r1"), Imm(4))
    for k in range(1, 7):
        ins(f"add.s64 %rd{k + 7}, %rd{k}, %rd7", "add", ("s64",), R(f"%rd{k + 7}"),
            R(f"%rd{k}"), R("%rd7"))
    ins("ld.global.f32 %f1, [%rd8]", "ld", ("global", "f32"), R("%f1"), A(R("%rd8"), 0))
    ins("ld.global.f32 %f2, [%rd9]", "ld", ("global", "f32"), R("%f2"), A(R("%rd9"), 0))
    ins("div.rn.f32 %f3, %f1, %f2", "div", ("rn", "f32"), R("%f3"), R("%f1"), R("%f2"))
    ins("st.global.f32 [%rd10], %f3", "st", ("global", "f32"), A(R("%rd10"), 0), R("%f3"))
    ins("abs.f32 %f4, %f1", "abs", ("f32",), R("%f4"), R("%f1"))
    ins("sqrt.rz.f32 %f5, %f4", "sqrt", ("rz", "f32"), R("%f5"), R("%f4"))
    ins("st.global.f32 [%rd11], %f5", "st", ("global", "f32"), A(R("%rd11"), 0), R("%f5"))
    ins("rcp.rm.ftz.f32 %f6, %f2", "rcp", ("rm", "ftz", "f32"), R("%f6"), R("%f2"))
    ins("st.global.f32 [%rd12], %f6", "st", ("global", "f32"), A(R("%rd12"), 0), R("%f6"))
    ins("div.rp.f32 %f7, %f1, 0f40400000", "div", ("rp", "f32"), R("%f7"), R("%f1"),
        Imm(0x4040_0000))
    ins("st.global.f32 [%rd13], %f7", "st", ("global", "f32"), A(R("%rd13"), 0), R("%f7"))
    ins("ret", "ret", ())
    params = tuple(ast.Param(f"p{n}", "u64", 1) for n in "abdefg")
    regs = (ast.RegDecl("f32", "%f", 8, 1), ast.RegDecl("b32", "%r", 2, 1),
            ast.RegDecl("b64", "%rd", 14, 1))
    return ast.Kernel("fdiv", params, regs, (), tuple(body), 1)


def test_a_lowered_kernel_runs_on_the_machine() -> None:
    kernel = _kernel()
    program = lower_kernel(kernel, ast.Module("7.0", "sm_75", 64, (kernel,), ()))
    assert len(program.blocks) <= 128
    for blk in program.blocks:  # (Block checks this too)
        assert len(blk.instrs) <= 4
        assert all(slot in FLOAT_SLOTS for slot, i in enumerate(blk.instrs) if i.op in FLOAT_OPS)
    a = [0x4049_0FDB, 0xC02D_F854, 0x0000_0005, 0x7F7F_FFFF, 0x3F80_0000, 0xFF80_0000,
         0x0080_0000, 0x2000_0001, 0x4B80_0000, 0x3EAA_AAAB, 0x8012_3456, 0x4F00_0000,
         0x7FC0_0000, 0x0000_0000, 0x5F7F_FFFF, 0x3F80_0001]
    b = [0x4040_0000, 0x3F80_0000, 0x4000_0000, 0x0000_0001, 0x7F80_0000, 0x4040_0000,
         0x4B00_0000, 0xBF7F_FFFF, 0x0080_0000, 0x3EAA_AAAB, 0x3F80_0000, 0x8000_0000,
         0x3F80_0000, 0x0000_0000, 0x2000_0000, 0x3F7F_FFFF]
    base = [4 + 4 * LANES * k for k in range(6)]
    memory = [0] * 128
    memory[base[0] // 4:base[0] // 4 + LANES] = a
    memory[base[1] // 4:base[1] // 4 + LANES] = b
    run = run_program(program, grid=(1, 1), block=(LANES, 1), params=base, memory=memory)
    words = [[run.memory[base[k] // 4 + i] & M32 for i in range(LANES)] for k in range(2, 6)]
    assert words[0] == [F.divide(x, y) for x, y in zip(a, b, strict=True)]
    assert words[1] == [F.sqrt(x & F.MAGNITUDE, Round.RZ) for x in a]
    assert words[2] == [F.reciprocal(y, Round.RM, True) for y in b]
    assert words[3] == [F.divide(x, 0x4040_0000, Round.RP) for x in a]
