"""Measure the approximate float32 instructions (qgpu/machine/approx.py) against the exact
functions, over at least a million inputs each, in the terms the PTX ISA states its bounds in.

Inputs per instruction: random words of the whole domain (every exponent, subnormals included),
uniform values over the ranges the bounds name, dense sampling of the reduced ranges (where the
polynomials work), and the boundaries (overflow, underflow, the subnormal results). The exact
value is the float64 function (math library of the host, within 1 ulp of double: 2^-29 ulp of
float32), the correctly rounded result its rounding to float32. The macros run on numpy arrays
(tests/machine/approx_numpy.py, held bit for bit against the reference evaluator).

    python -m tests.machine.approx_errors       # the table of docs/ISA.md "Float"
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from qgpu.machine import approx
from tests.machine import approx_numpy as N

U32 = np.uint32
SAMPLES = 1_000_000
MIN_NORMAL = 2.0 ** -126


@dataclass(frozen=True)
class Measure:
    """One error measure of one instruction: where it applies and its PTX bound."""

    label: str  # e.g. "abs, |x| <= 2pi"
    kind: str  # "ulp" (from the correctly rounded result), "ulp-exact", "abs" or "rel"
    bound: float
    select: Callable[[np.ndarray, np.ndarray], np.ndarray]  # (inputs..., exact) -> mask


@dataclass
class Result:
    label: str
    kind: str
    bound: float
    worst: float
    where: tuple[float, ...]
    count: int


def words(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float32).view(U32)


def floats(w: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return w.view(np.float32).astype(np.float64)


def ordinal(w: np.ndarray) -> np.ndarray:
    """Words as integers in value order (-0 and +0 one apart; infinity one past the largest)."""
    w = w.astype(np.int64)
    return np.where(w >> 31 == 1, -(w & 0x7FFF_FFFF), w)


def ulp(v: np.ndarray) -> np.ndarray:
    """The float32 unit in the last place at each exact value (2^-149 in the subnormals)."""
    a = np.abs(v)
    with np.errstate(all="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    return np.ldexp(1.0, (np.maximum(e, -126) - 23).astype(np.int64))


def flush(w: np.ndarray) -> np.ndarray:
    return np.where(w & U32(0x7F80_0000) == 0, w & U32(0x8000_0000), w)


class _Rng:
    def __init__(self, seed: int) -> None:
        self.g = np.random.default_rng(seed)

    def bits(self, n: int, lo: int = 0, hi: int = 1 << 32) -> np.ndarray:
        return self.g.integers(lo, hi, n, dtype=np.uint64).astype(U32)

    def uniform(self, n: int, a: float, b: float) -> np.ndarray:
        return words(self.g.uniform(a, b, n))

    def log_uniform(self, n: int, lo: float, hi: float, signs: bool = False) -> np.ndarray:
        x = np.exp2(self.g.uniform(np.log2(lo), np.log2(hi), n))
        if signs:
            x *= self.g.choice([-1.0, 1.0], n)
        return words(x)


POSITIVE_FINITE = (1, 0x7F80_0000)


def _inputs(key: str, rng: _Rng, n: int) -> list[np.ndarray]:
    """n inputs (per operand) for an instruction."""
    part = n // 8
    if key == "ex2":
        xs = [rng.uniform(2 * part, -160, 130), rng.uniform(part, -0.5, 0.5),
              rng.uniform(part, -1, 1), rng.uniform(part, -151, -125),
              rng.uniform(part, 126, 128.5), rng.log_uniform(part, 1e-30, 1.0, signs=True)]
    elif key == "lg2":
        xs = [rng.bits(3 * part, *POSITIVE_FINITE), rng.uniform(2 * part, 0.5, 2),
              rng.uniform(part, 1 - 1e-3, 1 + 1e-3), rng.bits(part, 1, 0x0080_0000)]
    elif key in ("sin", "cos"):
        xs = [rng.uniform(3 * part, -2 * np.pi, 2 * np.pi),
              rng.uniform(2 * part, -100 * np.pi, 100 * np.pi),
              rng.uniform(part, -np.pi / 2, np.pi / 2),
              rng.log_uniform(part, 1e-30, 2 * np.pi, signs=True)]
    elif key == "tanh":
        xs = [rng.bits(2 * part), rng.uniform(3 * part, -5, 5), rng.uniform(part, -0.6, 0.6),
              rng.log_uniform(part, 1e-30, 10.0, signs=True)]
    elif key in ("rsqrt", "sqrt", "rcp"):
        xs = [rng.bits(3 * part, *POSITIVE_FINITE), rng.uniform(2 * part, 1, 4),
              rng.bits(part, 1, 0x0080_0000), rng.bits(part, 0x7E00_0000, 0x7F80_0000)]
        if key == "rcp":  # the sign does not matter to rcp's steps: half negative
            xs = [x ^ (rng.bits(len(x)) & U32(0x8000_0000)) for x in xs]
    else:  # div.approx, div.full
        a = np.concatenate([rng.bits(3 * part), rng.uniform(2 * part, -4, 4),
                            rng.log_uniform(2 * part, 1e-37, 1e37, signs=True)])
        b = np.concatenate([rng.bits(3 * part), rng.uniform(2 * part, -4, 4),
                            rng.log_uniform(2 * part, 1e-37, 1e37, signs=True)])
        rest = n - len(a)
        a = np.concatenate([a, rng.bits(rest)])
        b = np.concatenate([b, rng.bits(rest, 0x7E80_0000, 0x7F80_0000) | (rng.bits(rest) &
                                                                           U32(0x8000_0000))])
        return [a, rng.g.permutation(b)]
    x = np.concatenate(xs)
    return [np.concatenate([x, rng.bits(n - len(x))])]


def exact(key: str, *x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        if key == "ex2":
            return np.exp2(x[0])
        if key == "lg2":
            return np.log2(x[0])
        if key == "sin":
            return np.sin(x[0])
        if key == "cos":
            return np.cos(x[0])
        if key == "tanh":
            return np.tanh(x[0])
        if key == "rsqrt":
            return 1 / np.sqrt(x[0])
        if key == "sqrt":
            return np.sqrt(x[0])
        if key == "rcp":
            return 1 / x[0]
        return x[0] / x[1]


def _finite(*v: np.ndarray) -> np.ndarray:
    return np.logical_and.reduce([np.isfinite(a) for a in v])


def _normal(*v: np.ndarray) -> np.ndarray:
    return np.logical_and.reduce([np.abs(a) >= MIN_NORMAL for a in v])


REPRESENTABLE = 2.0 ** 128 * (1 - 2.0 ** -25)  # the exact values that round below infinity


def measures(key: str, ftz: bool) -> list[Measure]:
    """The PTX ISA's bounds (docs.nvidia.com/cuda/parallel-thread-execution, 9.7.3), as measures
    over the inputs they cover; with .ftz, inputs and results that are flushed are left out (the
    special-value tests hold those)."""
    def nz(x: np.ndarray, e: np.ndarray) -> np.ndarray:  # a normal (or nonzero) input
        return _normal(x) if ftz else x != 0

    if key == "ex2":
        return [Measure("ulp from the correctly rounded result, all x", "ulp", 2,
                        lambda x, e: np.isfinite(x))]
    if key == "lg2":
        return [Measure("abs, x in (0.5, 2)", "abs", 2 ** -22, lambda x, e: (x > 0.5) & (x < 2)),
                Measure("rel, other positive finite x", "rel", 2 ** -22,
                        lambda x, e: nz(x, e) & (x > 0) & np.isfinite(x) & ((x <= 0.5) | (x >= 2)))]
    if key in ("sin", "cos"):
        return [Measure("abs, |x| <= 2pi", "abs", 2 ** -20.5, lambda x, e: np.abs(x) <= 2 * np.pi),
                Measure("abs, |x| <= 100pi", "abs", 2 ** -14.7,
                        lambda x, e: np.abs(x) <= 100 * np.pi)]
    if key == "tanh":
        return [Measure("rel, all finite nonzero x", "rel", 2 ** -11,
                        lambda x, e: np.isfinite(x) & (x != 0))]
    if key in ("rsqrt", "sqrt"):
        bound = 2 ** -22.9 if key == "rsqrt" else 2 ** -23
        return [Measure("rel, positive finite x", "rel", bound,
                        lambda x, e: nz(x, e) & (x > 0) & np.isfinite(x))]
    if key == "rcp":
        return [Measure("ulp from the exact result, all finite x", "ulp-exact", 1,
                        lambda x, e: nz(x, e) & np.isfinite(x) & (np.abs(e) < REPRESENTABLE)
                        & (_normal(e) if ftz else True))]
    if key == "div.approx":
        return [Measure("ulp from the exact result, |b| in [2^-126, 2^126]", "ulp-exact", 2,
                        lambda a, b, e: _finite(a, e) & (np.abs(b) >= MIN_NORMAL)
                        & (np.abs(b) <= 2.0 ** 126) & (np.abs(e) < REPRESENTABLE)
                        & ((_normal(a) | (a == 0)) & (_normal(e) | (e == 0)) if ftz else True))]
    return [Measure("ulp from the exact result, all finite a, b", "ulp-exact", 2,
                    lambda a, b, e: _finite(a, b, e) & (np.abs(e) < REPRESENTABLE) & (b != 0)
                    & ((_normal(a) | (a == 0)) & _normal(b) & (_normal(e) | (e == 0))
                       if ftz else True))]


def measure(key: str, ftz: bool, n: int = SAMPLES, seed: int = 0) -> list[Result]:
    """Run the macro on n inputs and return each measure's worst error."""
    m = approx.macro(key, ftz)
    ins = _inputs(key, _Rng(seed + zlib.crc32(f"{key}{ftz}".encode())), n)
    got = N.run(m, *ins)
    xs = [floats(w) for w in ins]
    want = exact(key, *xs)
    r = floats(got)
    out = []
    for ms in measures(key, ftz):
        mask = ms.select(*xs, want)
        with np.errstate(all="ignore"):
            if ms.kind == "ulp":
                cr = words(want)
                if ftz:
                    cr = flush(cr)
                err = np.abs(ordinal(got) - ordinal(cr)).astype(np.float64)
            elif ms.kind == "ulp-exact":
                err = np.abs(np.where(np.isinf(r), np.sign(r) * 2.0 ** 128, r) - want) / ulp(want)
            elif ms.kind == "abs":
                err = np.abs(r - want)
            else:
                err = np.abs(r - want) / np.abs(want)
        err = np.where(mask, err, 0.0)
        err = np.where(np.isnan(err), np.inf, err)
        i = int(np.argmax(err))
        out.append(Result(ms.label, ms.kind, ms.bound, float(err[i]),
                          tuple(float(x[i]) for x in xs), int(mask.sum())))
    return out


INSTRUCTIONS = [("ex2", False), ("ex2", True), ("lg2", False), ("lg2", True), ("sin", False),
                ("sin", True), ("cos", False), ("cos", True), ("tanh", False), ("rsqrt", False),
                ("rsqrt", True), ("sqrt", False), ("sqrt", True), ("rcp", False), ("rcp", True),
                ("div.approx", False), ("div.approx", True), ("div.full", False),
                ("div.full", True)]


def describe(err: float, kind: str) -> str:
    if kind in ("ulp", "ulp-exact"):
        return f"{err:.3f} ulp"
    return f"2^{np.log2(err):.2f}" if err > 0 else "0"


def main() -> None:
    for key, ftz in INSTRUCTIONS:
        m = approx.macro(key, ftz)
        for res in measure(key, ftz):
            print(f"{m.name:16s} {len(m.steps):3d} steps ({m.float_steps:2d} float)  "
                  f"{res.label}: {describe(res.worst, res.kind)} "
                  f"(bound {describe(res.bound, res.kind)}; n={res.count})")


if __name__ == "__main__":
    main()
