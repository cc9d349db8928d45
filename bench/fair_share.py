"""A short launch's latency while long launches run on the same model (the app's fair share).

    python bench/fair_share.py --model BUILD [--long 4] [--short 20]

In one run: the dot product alone (`--short` times), then the same while `--long` runaway
launches (a loop that never ends, stopped at a token limit) run beside it, each from its own
thread as the app's users' launches do; prints p50/p95 of both and their ratio. The steps of
all running launches take turns on the model (runtime.Turns), so the short launch's latency
grows with the number of launches running, not with the long launches' length.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qgpu.app.examples import EXAMPLES  # noqa: E402
from qgpu.app.launches import Request, execute, prepare  # noqa: E402
from qgpu.errors import LaunchError  # noqa: E402
from qgpu.runtime import GpuModel  # noqa: E402

DOT = Path(__file__).resolve().parents[1] / "kernels" / "dot.cu"


def percentiles(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--long", type=int, default=4)
    ap.add_argument("--short", type=int, default=20)
    ap.add_argument("--long-tokens", type=int, default=200_000)
    ns = ap.parse_args()
    gm = GpuModel.load(ns.model)
    slots = threading.BoundedSemaphore(ns.long + 1)
    short = prepare(Request.parse(DOT.read_text(), "dot", "1", "4",
                                  '[[1,2,3],[4,5,6],{"zeros":1},3]'))
    spin = next(e for e in EXAMPLES if e.kernel == "spin").fields()
    long = prepare(Request.parse(spin["source"], spin["kernel"], spin["grid"], spin["block"],
                                 spin["args"]))

    def shorts() -> list[float]:
        out = []
        for _ in range(ns.short):
            t0 = time.perf_counter()
            run = execute(gm, slots, short.launch, 1000)
            out.append(time.perf_counter() - t0)
            assert run.memory is not None
        return out

    execute(gm, slots, short.launch, 1000)  # warm: the engine's form, the native step
    alone = shorts()
    stop = threading.Event()
    tokens = [0] * ns.long

    def runaway(i: int) -> None:
        while not stop.is_set():
            try:
                execute(gm, slots, long.launch, ns.long_tokens)
            except LaunchError:
                pass
            tokens[i] += 1

    threads = [threading.Thread(target=runaway, args=(i,), daemon=True) for i in range(ns.long)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    beside = shorts()
    stop.set()
    a50, a95 = percentiles(alone)
    b50, b95 = percentiles(beside)
    print(f"dot product launch ({len(short.launch.program.blocks)} ROM blocks), "
          f"{ns.short} runs each, decode step {gm.decode_step}")
    print(f"  alone:                    p50 {a50:.3f} s   p95 {a95:.3f} s")
    print(f"  beside {ns.long} long launches:   p50 {b50:.3f} s   p95 {b95:.3f} s")
    print(f"  ratio:                    p50 {b50 / a50:.1f}x   p95 {b95 / a95:.1f}x "
          f"(a fair share of {ns.long + 1} launches: ~{ns.long + 1}x the decode part)")


if __name__ == "__main__":
    main()
