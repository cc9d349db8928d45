"""A vectorized evaluator of ``qgpu.machine.approx`` macros on numpy arrays of words, for
measuring their error over millions of inputs (the reference evaluator runs the interpreter's
``alu`` one value at a time). It covers the operations and modes the macros use and is held bit
for bit against ``approx.evaluate`` by tests/machine/test_approx.py.

float32 add, subtract and multiply are numpy's (IEEE, round to nearest even, subnormals kept);
a fused multiply-add is the exact product in float64 plus the addend rounded to odd there (the
sum's rounding error from TwoSum), then rounded to float32 once — round to odd at 53 bits and
then to nearest at 24 bits is the single rounding to nearest. Round down refines that result
with the exact double-double sum."""

from __future__ import annotations

import numpy as np

from qgpu.machine.approx import Macro
from qgpu.machine.float32 import Round
from qgpu.machine.isa import FTZ, I2F_SIGNED, SAT, Cmp, Op

U32 = np.uint32
NAN_WORD = U32(0x7FFF_FFFF)


def f32(w: np.ndarray) -> np.ndarray:
    return w.astype(U32, copy=False).view(np.float32)


def words(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32).view(U32)


def _flush(w: np.ndarray) -> np.ndarray:
    return np.where(w & U32(0x7F80_0000) == 0, w & U32(0x8000_0000), w)


def _canonical(w: np.ndarray) -> np.ndarray:
    return np.where(w & U32(0x7FFF_FFFF) > U32(0x7F80_0000), NAN_WORD, w)


def _finish(w: np.ndarray, mod: int) -> np.ndarray:
    w = _canonical(w)
    if mod & FTZ:
        w = _flush(w)
    if mod & SAT:
        v = f32(w)
        w = np.where(np.isnan(v) | (w >> U32(31) == 1), U32(0),
                     np.where(v > 1, U32(0x3F80_0000), w))
    return w


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray, rnd: Round) -> np.ndarray:
    """a·b + c of float32 words, rounded once (round to nearest even or down)."""
    with np.errstate(all="ignore"):
        a64, b64, c64 = (f32(v).astype(np.float64) for v in (a, b, c))
        p = a64 * b64  # exact: 48 significant bits
        s = p + c64
        bv = s - p
        err = (p - (s - bv)) + (c64 - bv)  # s + err = p + c exactly (TwoSum)
        finite = np.isfinite(s) & np.isfinite(err)
        even = (s.view(np.uint64) & np.uint64(1)) == 0
        bump = finite & (err != 0) & even
        odd = np.where(bump, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        r = odd.astype(np.float32)
        if rnd == Round.RM:
            r64 = r.astype(np.float64)
            above = finite & (r64 - s > err)  # r > p + c
            r = np.where(above, np.nextafter(r, np.float32(-np.inf)), r)
            exact_zero = finite & (s == 0) & (err == 0)
            both_zero = (p == 0) & (c64 == 0)
            zero_sign = np.where(both_zero, np.signbit(p) | np.signbit(c64), True)
            r = np.where(exact_zero, np.where(zero_sign, np.float32(-0.0), np.float32(0.0)), r)
        elif rnd != Round.RN:
            raise NotImplementedError(f"FFMA rounding {rnd!r}")
    return words(r)


def _arith(op: Op, a: np.ndarray, b: np.ndarray, mod: int) -> np.ndarray:
    rnd = Round(mod & 3)
    if rnd != Round.RN:
        raise NotImplementedError(f"{op.name} rounding {rnd!r}")
    if mod & FTZ:
        a, b = _flush(a), _flush(b)
    x, y = f32(a), f32(b)
    with np.errstate(all="ignore"):
        r = {Op.FADD: np.add, Op.FSUB: np.subtract, Op.FMUL: np.multiply}[op](x, y)
    return _finish(words(r), mod)


def _setp(cmp: Cmp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if cmp in (Cmp.LT, Cmp.LE, Cmp.GT, Cmp.GE):
        a, b = a.view(np.int32), b.view(np.int32)
    return {Cmp.EQ: a == b, Cmp.NE: a != b, Cmp.LT: a < b, Cmp.LE: a <= b, Cmp.GT: a > b,
            Cmp.GE: a >= b, Cmp.LO: a < b, Cmp.LS: a <= b, Cmp.HI: a > b,
            Cmp.HS: a >= b}[cmp]


def _integer(op: Op, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    s32 = np.int32
    if op == Op.ADD:
        return a + b
    if op == Op.SUB:
        return a - b
    if op == Op.AND:
        return a & b
    if op == Op.OR:
        return a | b
    if op == Op.XOR:
        return a ^ b
    if op == Op.MINU:
        return np.minimum(a, b)
    if op == Op.MAXU:
        return np.maximum(a, b)
    if op == Op.MIN:
        return np.minimum(a.view(s32), b.view(s32)).view(U32)
    if op == Op.MAX:
        return np.maximum(a.view(s32), b.view(s32)).view(U32)
    if op in (Op.SHL, Op.SHR, Op.SRA):
        big = b >= 32
        sh = np.minimum(b, U32(31))
        if op == Op.SHL:
            return np.where(big, U32(0), a << sh)
        if op == Op.SHR:
            return np.where(big, U32(0), a >> sh)
        return (a.view(s32) >> sh.view(s32)).view(U32)
    if op == Op.NEG:
        return U32(0) - a
    if op == Op.NOT:
        return ~a
    raise NotImplementedError(op.name)


def run(macro: Macro, *inputs: np.ndarray) -> np.ndarray:
    """The macro on arrays of input words (uint32), elementwise."""
    n = len(inputs[0])
    regs: dict[str, np.ndarray] = {"": np.zeros(n, U32)}
    for name, arr in zip(macro.inputs, inputs, strict=True):
        regs[name] = np.asarray(arr, dtype=U32)
    preds: dict[str, np.ndarray] = {}
    for s in macro.steps:
        a = regs[s.a]
        b = np.full(n, s.b & 0xFFFF_FFFF, U32) if isinstance(s.b, int) else regs[s.b]
        op = s.op
        if op == Op.SETP:
            preds[s.d] = _setp(Cmp(s.mod), a, b)
            continue
        if op == Op.SEL:
            regs[s.d] = np.where(preds[s.c] != bool(s.mod & 1), a, b)
            continue
        if op == Op.FFMA:
            c = regs[s.c]
            if s.mod & FTZ:
                a, b, c = _flush(a), _flush(b), _flush(c)
            regs[s.d] = _finish(fma(a, b, c, Round(s.mod & 3)), s.mod)
        elif op in (Op.FADD, Op.FSUB, Op.FMUL):
            regs[s.d] = _arith(op, a, b, s.mod)
        elif op == Op.I2F:
            if s.mod & 3 != Round.RN:
                raise NotImplementedError("I2F rounding")
            src = a.view(np.int32) if s.mod & I2F_SIGNED else a
            regs[s.d] = words(src.astype(np.float64).astype(np.float32))
        else:
            regs[s.d] = _integer(op, a, b, regs[s.c] if isinstance(s.c, str) and s.c else a)
    return regs["out"]
