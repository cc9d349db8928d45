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
from qgpu.runtime import GpuModel, run_launch  # noqa: E402

DOT = Path(__file__).resolve().parents[1] / "kernels" / "dot.cu"


def percentiles(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--long", type=int, default=4)
    ap.add_argument("--short", type=int, default=20)
    ap.add_argument("--long-tokens", type=int, default=200_000,
                    help="each long launch's token limit (then it starts again)")
    ns = ap.parse_args()
    gm = GpuModel.load(ns.model)
    slots = threading.BoundedSemaphore(ns.long + 1)
    short = prepare(Request.parse(DOT.read_text(), "dot", "1", "4",
                                  '[[1,2,3],[4,5,6],{"zeros":1},3]'))
    spin = next(e for e in EXAMPLES if e.kernel == "spin").fields()
    long = prepare(Request.parse(spin["source"], spin["kernel"], spin["grid"], spin["block"],
                                 spin["args"]))

    def shorts() -> tuple[list[float], list[float]]:
        """Each run's wall time and its decode part."""
        wall, decode = [], []
        for _ in range(ns.short):
            t0 = time.perf_counter()
            run = execute(gm, slots, short.launch, 1000)
            wall.append(time.perf_counter() - t0)
            decode.append(run.seconds["decode"])
            assert run.memory is not None
        return wall, decode

    run_tokens = execute(gm, slots, short.launch, 1000).generated  # warm: engine, native step
    alone = shorts()
    stop = threading.Event()
    tokens = [0] * ns.long

    def count(i: int, *_: object) -> None:
        tokens[i] += 1

    def runaway(i: int) -> None:
        while not stop.is_set():
            with slots:
                try:
                    run_launch(gm, long.launch, token_limit=ns.long_tokens,
                               on_token=lambda *a: count(i))
                except LaunchError:  # the token limit
                    pass

    threads = [threading.Thread(target=runaway, args=(i,), daemon=True) for i in range(ns.long)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    t0, before = time.perf_counter(), sum(tokens)
    beside = shorts()
    long_rate = (sum(tokens) - before) / (time.perf_counter() - t0)
    stop.set()
    print(f"dot product launch ({len(short.launch.program.blocks)} ROM blocks, "
          f"{len(run_tokens)} generated tokens), {ns.short} runs each, decode step "
          f"{gm.decode_step}; seconds, p50 / p95")
    for part, k in (("whole launch", 0), ("decode part", 1)):
        a50, a95 = percentiles(alone[k])
        b50, b95 = percentiles(beside[k])
        print(f"  {part:12}  alone {a50:.3f} / {a95:.3f}   beside {ns.long} long launches "
              f"{b50:.3f} / {b95:.3f}   ratio {b50 / a50:.1f}x / {b95 / a95:.1f}x")
    print(f"  the long launches meanwhile: {long_rate:.0f} generated tokens/s together")


if __name__ == "__main__":
    main()
