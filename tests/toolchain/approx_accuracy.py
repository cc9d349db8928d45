"""Measure CUDA's float math functions as they compile onto the approximate instructions (and
the exact ones around them), on the PTX interpreter: at least 100,000 inputs per function, each
result against the correctly rounded one (float64 math rounded to float32).

Each launch computes 112 results (7 blocks of 16 threads: the output array fills the machine's
memory); thread i's input is made in the kernel from the launch's parameters, either a float
word (``base + i·stride``: every float of a range equally likely, so every binade is sampled) or
a value (``lo + (i + offset)·step`` with separate rounded operations, which the host repeats
exactly), so no input array takes memory. Two compilations: NVRTC's default (the project's
route) and nvcc's ``-use_fast_math`` (the approximate forms everywhere, subnormals flushed:
results are compared with the flushed correctly rounded value, subnormal inputs left out).

    python -m tests.toolchain.approx_accuracy [N]   # the table of docs/FLOAT.md
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qgpu.driver import CompiledModule, compile_source, load_ptx

THREADS = 112
GRID, BLOCK = (7,), (16,)
U32 = np.uint32


@dataclass(frozen=True)
class Segment:
    """Inputs of one kind: "bits" (words lo..hi) or "values" (lo..hi evenly), a share of N."""

    kind: str
    lo: float
    hi: float
    share: float


@dataclass(frozen=True)
class Function:
    name: str
    expr: str  # C, of x (and y)
    x: tuple[Segment, ...]
    y: tuple[Segment, ...] = ()
    abs_error: bool = False  # report the absolute error (a bound PTX states absolutely)


PI = float(np.pi)
POSITIVE = Segment("bits", 1.4e-45, 3.4028235e38, 0.6)
FUNCTIONS = [
    Function("expf", "expf(x)", (Segment("values", -104, 89, 0.7), Segment("bits", 1e-30, 89, 0.15),
                                 Segment("bits", -1e-30, -104, 0.15))),
    Function("exp2f", "exp2f(x)", (Segment("values", -150, 128, 0.7),
                                   Segment("bits", 1e-30, 128, 0.15),
                                   Segment("bits", -1e-30, -150, 0.15))),
    Function("logf", "logf(x)", (POSITIVE, Segment("values", 0.5, 2, 0.4))),
    Function("log2f", "log2f(x)", (POSITIVE, Segment("values", 0.5, 2, 0.4))),
    Function("sinf", "sinf(x)", (Segment("values", -100 * PI, 100 * PI, 0.5),
                                 Segment("values", -2 * PI, 2 * PI, 0.5)), abs_error=True),
    Function("cosf", "cosf(x)", (Segment("values", -100 * PI, 100 * PI, 0.5),
                                 Segment("values", -2 * PI, 2 * PI, 0.5)), abs_error=True),
    Function("tanhf", "tanhf(x)", (Segment("values", -10, 10, 0.7),
                                   Segment("bits", 1e-30, 10, 0.15),
                                   Segment("bits", -1e-30, -10, 0.15))),
    Function("powf", "powf(x, y)", (Segment("values", 0, 10, 0.5),
                                    Segment("bits", 1e-30, 1e30, 0.5)),
             (Segment("values", -30, 30, 1.0),)),
    Function("rsqrtf", "rsqrtf(x)", (POSITIVE, Segment("values", 1, 4, 0.4))),
    Function("__expf", "__expf(x)", (Segment("values", -104, 89, 0.7),
                                     Segment("bits", 1e-30, 89, 0.15),
                                     Segment("bits", -1e-30, -104, 0.15))),
    Function("__logf", "__logf(x)", (POSITIVE, Segment("values", 0.5, 2, 0.4)), abs_error=True),
    Function("__fdividef", "__fdividef(x, y)", (Segment("values", -100, 100, 0.5),
                                                Segment("bits", 1e-30, 1e30, 0.5)),
             (Segment("values", -100, 100, 0.5), Segment("bits", -1e-30, -1e30, 0.5))),
    Function("__sinf", "__sinf(x)", (Segment("values", -100 * PI, 100 * PI, 0.5),
                                     Segment("values", -2 * PI, 2 * PI, 0.5)), abs_error=True),
    Function("__cosf", "__cosf(x)", (Segment("values", -100 * PI, 100 * PI, 0.5),
                                     Segment("values", -2 * PI, 2 * PI, 0.5)), abs_error=True),
    Function("sqrtf", "sqrtf(x)", (POSITIVE, Segment("values", 1, 4, 0.4))),
    Function("x / y", "x / y", (Segment("values", -100, 100, 0.5),
                                Segment("bits", 1e-30, 1e30, 0.5)),
             (Segment("values", -100, 100, 0.5), Segment("bits", -1e-30, -1e30, 0.5))),
    Function("__saturatef", "__saturatef(x)", (Segment("values", -2, 3, 0.6),
                                               Segment("bits", 1e-30, 3e38, 0.2),
                                               Segment("bits", -1e-30, -3e38, 0.2))),
]


def kernel_source(f: Function) -> str:
    def make(v: str, n: int) -> str:
        p = f"p{n}"
        return (f"  float {v} = {p}kind ? __fadd_rn(__fmul_rn((float)(i + {p}off), "
                f"__uint_as_float({p}b)), __uint_as_float({p}a))\n"
                f"                  : __uint_as_float({p}a + (i + {p}off) * {p}b);\n")
    params = ", ".join(f"unsigned p{n}kind, unsigned p{n}a, unsigned p{n}b, unsigned p{n}off"
                       for n in (0, 1))
    return (f'extern "C" __global__ void f({params}, float *o) {{\n'
            f"  unsigned i = threadIdx.x + blockIdx.x * blockDim.x;\n"
            + make("x", 0) + make("y", 1) + f"  o[i] = {f.expr};\n  (void)y;\n}}\n")


def _word(x: float) -> int:
    return int(np.float32(x).view(U32))


def plan(seg: Segment, n: int) -> tuple[int, int, int]:
    """(kind, a, b) for a segment of n inputs: a word base and stride (the words from lo's to
    hi's, which must ascend: one sign), or lo and the step of the values."""
    if seg.kind == "bits":
        lo, hi = _word(seg.lo), _word(seg.hi)
        assert hi > lo, seg
        return 0, lo, max(1, (hi - lo) // n)
    return 1, _word(seg.lo), _word((seg.hi - seg.lo) / n)


def inputs(kind: int, a: int, b: int, idx: np.ndarray) -> np.ndarray:
    """The words the kernel makes for input indices idx (i + offset)."""
    if kind == 0:
        return (np.uint64(a) + idx.astype(np.uint64) * np.uint64(b & 0xFFFF_FFFF)).astype(U32)
    step, lo = np.array([b], U32).view(np.float32)[0], np.array([a], U32).view(np.float32)[0]
    x = (idx.astype(np.float32) * step).astype(np.float32) + lo
    return x.astype(np.float32).view(U32)


def reference(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return {
            "expf": lambda: np.exp(x), "__expf": lambda: np.exp(x), "exp2f": lambda: np.exp2(x),
            "logf": lambda: np.log(x), "__logf": lambda: np.log(x),
            "log2f": lambda: np.log2(x), "sinf": lambda: np.sin(x), "cosf": lambda: np.cos(x),
            "tanhf": lambda: np.tanh(x), "powf": lambda: np.power(x, y),
            "rsqrtf": lambda: 1 / np.sqrt(x), "__fdividef": lambda: x / y, "x / y": lambda: x / y,
            "__sinf": lambda: np.sin(x), "__cosf": lambda: np.cos(x), "sqrtf": lambda: np.sqrt(x),
            "__saturatef": lambda: np.clip(np.nan_to_num(x, nan=0.0), 0, 1),
        }[name]()


def ordinal(w: np.ndarray) -> np.ndarray:
    w = w.astype(np.int64)
    return np.where(w >> 31 == 1, -(w & 0x7FFF_FFFF), w)


def run(module: CompiledModule, f: Function, total: int, ftz: bool) -> dict:
    """Launch the function's kernel over `total` inputs; its worst errors."""
    k = module.kernel("f")
    xs_all, ys_all, got_all = [], [], []
    ysegs = f.y or (Segment("values", 0, 1, 1.0),)
    for s, seg in enumerate(f.x):
        n = max(THREADS, -(-int(total * seg.share) // THREADS) * THREADS)
        xk, xa, xb = plan(seg, n)
        yk, ya, yb = plan(ysegs[s % len(ysegs)], n)
        for off in range(0, n, THREADS):
            yoff = (off * 7919) % n  # another order of the y segment, so pairs spread
            args = [xk, xa, xb, off, yk, ya, yb, yoff,
                    {"f32": [0.0] * THREADS}]
            res = k.launch(grid=GRID, block=BLOCK, args=args, backend="ptx")
            got_all.append(np.array([v.bits for v in res.args[-1]], U32))
            idx = np.arange(THREADS, dtype=np.int64)
            xs_all.append(inputs(xk, xa, xb, idx + off))
            ys_all.append(inputs(yk, ya, yb, idx + yoff))
    xw, yw, got = np.concatenate(xs_all), np.concatenate(ys_all), np.concatenate(got_all)
    with np.errstate(all="ignore"):
        x, y = xw.view(np.float32).astype(np.float64), yw.view(np.float32).astype(np.float64)
    exact = reference(f.name, x, y)
    with np.errstate(all="ignore"):
        cr = exact.astype(np.float32).view(U32)
    keep = np.isfinite(x) & np.isfinite(y) & ~np.isnan(exact)
    if ftz:
        sub = lambda w: (w & U32(0x7F80_0000) == 0) & (w & U32(0x7FFF_FFFF) != 0)  # noqa: E731
        keep &= ~sub(xw) & ~sub(yw)
        cr = np.where(sub(cr), cr & U32(0x8000_0000), cr)
    r = got.view(np.float32).astype(np.float64)
    ulp_keep = keep & (np.abs(exact) >= 0.25) if f.abs_error else keep  # not near a zero
    ulps = np.where(ulp_keep, np.abs(ordinal(got) - ordinal(cr)), 0)
    with np.errstate(all="ignore"):
        absolute = np.where(keep & (np.abs(exact) <= 4), np.abs(r - exact), 0)
    i, j = int(np.argmax(ulps)), int(np.argmax(absolute))
    return {"n": int(keep.sum()), "ulp": int(ulps[i]), "ulp_at": (float(x[i]), float(y[i])),
            "abs": float(absolute[j]), "abs_at": (float(x[j]), float(y[j])),
            "share_exact": float(np.mean(got[keep] == cr[keep]))}


@functools.cache
def module(f: Function, fast: bool) -> CompiledModule | None:
    src = kernel_source(f)
    if not fast:
        return compile_source(src)
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    from qgpu.toolchain.cuda import NVCC_OPTIONS

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "f.cu").write_text(src, encoding="utf-8")
        subprocess.run([nvcc, *NVCC_OPTIONS, "-use_fast_math", "-o", str(Path(tmp, "f.ptx")),
                        str(Path(tmp, "f.cu"))], check=True, capture_output=True, timeout=300)
        return load_ptx(Path(tmp, "f.ptx").read_text(encoding="utf-8"))


def approx_mnemonics(m: CompiledModule) -> list[str]:
    words = {ln.split()[0] for ln in m.ptx.splitlines() if ln.strip()
             and ln.split()[0].split(".")[0] in ("ex2", "lg2", "sin", "cos", "tanh", "rsqrt",
                                                  "rcp", "sqrt", "div")}
    return sorted(words)


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    names = sys.argv[2:] or [f.name for f in FUNCTIONS]
    for f in FUNCTIONS:
        if f.name not in names:
            continue
        for fast in (False, True):
            try:
                m = module(f, fast)
                if m is None:
                    continue
                m.kernel("f")
            except Exception as e:  # noqa: BLE001 - a function outside the subset: say why
                print(f"{f.name:12s} {'fast' if fast else 'nvrtc':5s} not run: "
                      f"{str(e).splitlines()[0][:100]}", flush=True)
                continue
            r = run(m, f, total, fast)
            print(f"{f.name:12s} {'fast' if fast else 'nvrtc':5s} n={r['n']} max {r['ulp']} ulp "
                  f"at {r['ulp_at']}, abs {r['abs']:.3g} at {r['abs_at']}, exact "
                  f"{100 * r['share_exact']:.1f}%  via {' '.join(approx_mnemonics(m))}",
                  flush=True)


if __name__ == "__main__":
    main()
