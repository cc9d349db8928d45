"""Interpreter speed on the kernel suite: the machine interpreter vs the PTX interpreter.

Both run the same launches (seed 0 of every suite kernel), interleaved in one process so machine
noise hits both alike; each figure is the best of --repeat runs. Prints per-kernel instruction
rates and the ratio, then the totals. ``--cpu`` times with the process's CPU time instead of
the wall clock: on a machine shared with other work it is the steadier figure (comparing two
versions of the interpreters, e.g. before and after the race detector).

    python bench/interp_speed.py [--repeat 3] [--cpu] [names...]
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qgpu.suite.runner import SUITE, by_name, make_args, suite_module  # noqa: E402


def best_time(fn, repeat: int, clock=time.perf_counter) -> tuple[float, dict]:
    best, stats = float("inf"), {}
    for _ in range(repeat):
        t0 = clock()
        stats = fn()
        best = min(best, clock() - t0)
    return best, stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cpu", action="store_true", help="CPU time, not the wall clock")
    parser.add_argument("names", nargs="*")
    ns = parser.parse_args()
    kernels = [by_name(n) for n in ns.names] if ns.names else list(SUITE)
    print(f"{'kernel':24} {'machine instr':>13} {'instr/s':>10} {'PTX instr':>10} "
          f"{'instr/s':>10} {'time ratio':>10}")
    totals = {"interp": [0, 0.0], "ptx": [0, 0.0]}
    for k in kernels:
        kernel = suite_module(k).kernel(k.name)
        _ = kernel.program  # lower outside the timed region
        args = make_args(k, 0)
        row = {}
        for backend in ("interp", "ptx"):
            launch = functools.partial(kernel.launch, grid=k.grid, block=k.block, args=args,
                                       dynamic_shared=k.dynamic_shared, backend=backend)
            seconds, stats = best_time(lambda launch=launch: launch().stats, ns.repeat,
                                       time.process_time if ns.cpu else time.perf_counter)
            n = stats["warp_instructions"]
            row[backend] = (n, seconds)
            totals[backend][0] += n
            totals[backend][1] += seconds
        (mi, ms), (pi, ps) = row["interp"], row["ptx"]
        print(f"{k.name:24} {mi:>13} {mi / ms:>10.0f} {pi:>10} {pi / ps:>10.0f} "
              f"{ms / ps:>10.2f}")
    (mi, ms), (pi, ps) = totals["interp"], totals["ptx"]
    print(f"{'TOTAL':24} {mi:>13} {mi / ms:>10.0f} {pi:>10} {pi / ps:>10.0f} {ms / ps:>10.2f}")
    print(f"machine interpreter: {mi / ms:,.0f} warp-instructions/s; PTX interpreter: "
          f"{pi / ps:,.0f} warp-instructions/s; machine needs {mi / pi:.2f}x the PTX "
          f"instruction count and {ms / ps:.2f}x the time")


if __name__ == "__main__":
    main()
