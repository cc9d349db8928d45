"""``python -m qgpu fuzz``: differential fuzzing of the toolchain, the machine and the model.

Random CUDA kernels that are valid, race-free and deterministic by construction (program.py,
generate.py) run on the PTX interpreter, the machine interpreter and, with ``--backend model``,
the model (batched, checked token by token against the machine's stream); every output word is
compared (run.py). The first divergence is shrunk while it persists (minimise.py) and printed
with its source and launch. The last line reads ``N programs, D divergences``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from qgpu.errors import QgpuError, UsageError
from qgpu.suite.fuzz.generate import SIZES, generate
from qgpu.suite.fuzz.minimise import minimise, size
from qgpu.suite.fuzz.program import Program, features, render
from qgpu.suite.fuzz.run import (
    TOKEN_BUDGET,
    Case,
    Outcome,
    Rejections,
    compile_program,
    prepare,
    run_interpreters,
    run_model,
    signature,
)

__all__ = ["Program", "features", "fuzz", "generate", "minimise", "outcomes_of", "render",
           "run_command"]


def run_command(ns: Any) -> int:
    """``python -m qgpu fuzz``: exit status 0 with no divergence, 1 with some (bad arguments
    raise UsageError: status 2)."""
    if ns.backend != "model" and (ns.model or ns.dtype or ns.device):
        raise UsageError("--model, --dtype and --device belong to --backend model")
    gpu = None
    if ns.backend == "model":
        if not ns.model:
            raise UsageError("--backend model needs --model BUILD_DIR (python -m qgpu build)")
        from qgpu.runtime import GpuModel

        gpu = GpuModel.load(ns.model, ns.dtype, ns.device or "cpu")
    return 1 if fuzz(ns.n, ns.seed, gpu=gpu, size=ns.size, batch=ns.batch) else 0


def outcomes_of(programs: list[Program], gpu: Any = None) -> list[dict[str, Outcome] | None]:
    """Each program's outcomes on the interpreters (and the model when `gpu` is given, as one
    batch); None for a program that no longer builds."""
    cases: list[Case | None] = []
    for p in programs:
        try:
            kernel = compile_program(p)
        except QgpuError:
            cases.append(None)
            continue
        cases.append(Case(-1, p, kernel, run_interpreters(p, kernel)))
    if gpu is not None:
        built = [c for c in cases if c is not None]
        if built:
            run_model(gpu, built)
    return [None if c is None else c.outcomes for c in cases]


def _still_fails(want: tuple, gpu: Any) -> Callable[[list[Program]], list[bool]]:
    def test(programs: list[Program]) -> list[bool]:
        return [o is not None and signature(o) == want for o in outcomes_of(programs, gpu)]
    return test


def fuzz(n: int, seed: int, *, gpu: Any = None, size: str | None = None, batch: int = 16,
         minimise_first: bool = True, out: Callable[[str], None] = print) -> int:
    """Run `n` programs of `seed` (on the model too when `gpu` is a loaded runtime.GpuModel,
    `batch` launches side by side, each within TOKEN_BUDGET generated tokens), of `size`
    (normal; small by default on the model), print each divergence, the first one minimised,
    and the summary line; return the number of divergences."""
    if n < 1:
        raise UsageError(f"--n must be at least 1, not {n}")
    if batch < 1:
        raise UsageError(f"--batch must be at least 1, not {batch}")
    size = size or ("small" if gpu is not None else "normal")
    if size not in SIZES:
        raise UsageError(f"--size must be one of {', '.join(SIZES)}, not {size!r}")
    t0 = time.perf_counter()
    backends = "ptx, interp" + (", model" if gpu is not None else "")
    out(f"fuzz: seed {seed}, {n} {size} programs on {backends}")
    rejected = Rejections()
    cases: list[Case] = []
    for i in range(n):
        cases.append(prepare(seed, i, rejected, SIZES[size],
                             TOKEN_BUDGET if gpu is not None else None))
        if (i + 1) % 250 == 0:
            print(f"  {i + 1}/{n} programs on the interpreters "
                  f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    if gpu is not None:
        _run_on_model(gpu, cases, batch, t0)
    bad = [c for c in cases if c.divergent]
    for c in bad:
        out(f"divergence: program {c.index} of seed {seed}: {c.report()}")
    if bad and minimise_first:
        _print_minimised(bad[0], seed, gpu, batch, out)
    out(rejected.summary())
    for reason, message in rejected.first.items():
        out(f"  first {reason}: {message.splitlines()[0]}")
    tokens = sum(c.tokens for c in cases)
    out(f"time: {time.perf_counter() - t0:.0f} s" + (f", {tokens} generated tokens on the model"
                                                      if gpu is not None else ""))
    out(f"{n} programs, {len(bad)} divergences")
    return len(bad)


def _run_on_model(gpu: Any, cases: list[Case], batch: int, t0: float) -> None:
    """Every case on the model, in batches of similar length (a batch runs as long as its
    longest launch)."""
    order = sorted(cases, key=lambda c: c.tokens)
    for i in range(0, len(order), batch):
        run_model(gpu, order[i:i + batch])
        print(f"  {min(i + batch, len(order))}/{len(order)} programs on the model "
              f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)


def _print_minimised(case: Case, seed: int, gpu: Any, batch: int,
                     out: Callable[[str], None]) -> None:
    t = time.perf_counter()
    want = signature(case.outcomes)
    small, tests = minimise(case.program, _still_fails(want, gpu),
                            chunk=batch if gpu is not None else 1)
    (s0, e0), (s1, e1) = size(case.program), size(small)
    out(f"first divergence (program {case.index} of seed {seed}), minimised from {s0} "
        f"statements and {e0} expression nodes to {s1} and {e1} ({tests} candidates tested, "
        f"{time.perf_counter() - t:.0f} s):")
    out(small.source().rstrip())
    out(f"launch (the source above as fuzz.cu): python -m qgpu run fuzz.cu "
        f"{small.launch_text()}")
    outcomes = outcomes_of([small], gpu)[0]
    if outcomes is not None:
        for name, o in outcomes.items():
            args = [list(a) if isinstance(a, tuple) else a for a in o.args or ()]
            out(f"  {name}: {o.describe() if o.error else args}")
