"""Launch speed: the sparse engine against the stock path on the same merged checkpoint.

For each dtype, in one process, side by side: the dot product's whole launch (prefill, decode,
generated tokens/s), a long kernel (prefix_sum, ~2,500 generated tokens), and a batch of 16 suite
launches run side by side (aggregate generated tokens/s); each on the engine's native decode step
and on its PyTorch step. The stock path (whole merged model in
stock transformers) costs ~1 s a token on a CPU, so it runs each workload's prefill and its first
--stock-tokens generated tokens only; the ratios compare generated tokens/s and prefill seconds.
Every engine run is checked against the reference stream (tokens) and must end exact.

    python -m bench.engine_speed [--base tiny|2b] [--build DIR] [--dtypes float32,bfloat16]
                                 [--device cpu|cuda] [--stock-tokens N] [--threads T]
                                 [--workloads dot,long,batch]

The build (``python -m qgpu build``; for --base 2b a random-weight base with Qwen3.5-2B's text
config, bfloat16) goes to build/bench/engine_<base>/ unless --build names one.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from qgpu import protocol as T
from qgpu.errors import LaunchError
from qgpu.machine.interp import run_program
from qgpu.model import tinybase
from qgpu.runtime import GpuModel, run_batch
from qgpu.suite.manifest import SUITE
from qgpu.suite.runner import by_name, suite_launch

ROOT = Path(__file__).resolve().parent.parent


def launch_of(name: str) -> tuple[T.Launch, list[str]]:
    """A suite kernel's launch (seed 0) and the reference stream it must generate."""
    k = by_name(name)
    launch = suite_launch(k)[2]
    try:
        ref = run_program(launch.program, grid=k.grid, block=k.block, params=launch.params,
                          memory=launch.memory, dynamic_shared=k.dynamic_shared,
                          allocations=launch.allocations)
        return launch, T.expected_tokens(launch, ref.trace)
    except LaunchError as e:
        return launch, T.fault_tokens(launch, e)


def batch_of_16() -> list[str]:
    """16 suite kernels of similar length (sorted by generated tokens, the middle ones)."""
    lengths = sorted((len(launch_of(k.name)[1]), k.name) for k in SUITE)
    middle = len(lengths) // 2
    return [name for _, name in lengths[middle - 8:middle + 8]]


def run(gm: GpuModel, names: list[str], limit: int | None) -> dict:
    """Run launches side by side; seconds, generated tokens, exactness (engine runs only)."""
    pairs = [launch_of(n) for n in names]
    t0 = time.perf_counter()
    outs = run_batch(gm, [lc for lc, _ in pairs], token_limit=limit or 200_000,
                     expected=[ex for _, ex in pairs])
    wall = time.perf_counter() - t0
    generated = sum(len(o.generated) if hasattr(o, "generated") else limit or 0 for o in outs)
    seconds = next((o.seconds for o in outs if hasattr(o, "seconds")), None)
    if limit is None:
        bad = [n for n, o in zip(names, outs, strict=True) if isinstance(o, LaunchError)
               and "fault" not in o.message]
        assert not bad, f"not exact on the {gm.engine} engine: {bad}"
    return {"wall": wall, "generated": generated, "prefill": seconds and seconds["prefill"],
            "decode": seconds and seconds["decode"]}


def timed_stock(gm: GpuModel, names: list[str], tokens: int) -> dict:
    """The stock path on the same launches: its prefill, then `tokens` decode steps of the
    batch, each feeding the model's own choices back (a session, as run_batch drives it)."""
    session = gm.session()
    prompts = [[gm.ids[t] for t in T.prompt_tokens(launch_of(n)[0])] for n in names]
    t0 = time.perf_counter()
    chosen = session.prefill(prompts)
    t1 = time.perf_counter()
    for _ in range(tokens):
        chosen = session.step(chosen)
    return {"prefill": t1 - t0, "decode": time.perf_counter() - t1,
            "generated": len(names) * tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", choices=("tiny", "2b"), default="tiny")
    parser.add_argument("--build", type=Path)
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--stock-tokens", type=int, default=6)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--workloads", default="dot,long,batch",
                        help="which of dot, long (prefix_sum), batch (16 launches) to run")
    ns = parser.parse_args()
    if ns.threads:
        torch.set_num_threads(ns.threads)
    build = ns.build or ROOT / "build" / "bench" / f"engine_{ns.base}"
    if not (build / "merged" / "qgpu_circuit.json").is_file():
        base = "tiny"
        if ns.base == "2b":
            base = str(build / "random_2b_base")
            tinybase.write_tiny_base(Path(base), real_2b_shapes=True, text_only=True)
        dtype = "float32" if ns.base == "tiny" else "bfloat16"
        subprocess.run([sys.executable, "-m", "qgpu", "build", "--base", base, "--out",
                        str(build), "--dtype", dtype], check=True, cwd=ROOT)
    chosen = ns.workloads.split(",")
    workloads = {title: names() for key, title, names in (
        ("dot", "dot", lambda: ["dot"]), ("long", "prefix_sum (long)", lambda: ["prefix_sum"]),
        ("batch", "batch of 16", batch_of_16)) if key in chosen}
    print(f"{build} on {ns.device}, {torch.get_num_threads()} threads; stock path: prefill and "
          f"{ns.stock_tokens} decode steps")
    for dtype in ns.dtypes.split(","):
        gm = GpuModel.load(build, dtype, ns.device)
        stock = gm.with_engine("stock")
        t0 = time.perf_counter()
        stock.model  # noqa: B018 (load it outside the timings)
        print(f"\n{dtype}: engine loaded in {gm.load_seconds:.2f} s, holds "
              f"{gm.sparse.resident_bytes() / 2**20:.0f} MiB; stock model loaded in "
              f"{time.perf_counter() - t0:.1f} s; peak RSS "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MiB")
        print(f"decode step: {gm.decode_step}; 'pytorch' columns: the engine's PyTorch step "
              f"(QGPU_NATIVE=0) on the same launches")
        print(f"{'workload':20} {'launches':>8} {'tokens':>7} {'engine s':>9} {'prefill':>8} "
              f"{'tok/s':>8} | {'pytorch tok/s':>13} | {'stock prefill':>13} "
              f"{'stock tok/s':>11} | {'x tok/s':>7} {'x pytorch':>9} {'x prefill':>9}")
        for name, names in workloads.items():
            run(gm, names[:1], None)  # warm
            e = run(gm, names, None)
            p = run(replace(gm, native=False), names, None)
            s = timed_stock(stock, names, ns.stock_tokens)
            e_rate = e["generated"] / e["decode"]
            p_rate = p["generated"] / p["decode"]
            s_rate = s["generated"] / s["decode"]
            print(f"{name:20} {len(names):>8} {e['generated']:>7} {e['wall']:>9.2f} "
                  f"{e['prefill']:>8.2f} {e_rate:>8.0f} | {p_rate:>13.0f} | "
                  f"{s['prefill']:>13.2f} {s_rate:>11.2f} | {e_rate / s_rate:>7.0f} "
                  f"{e_rate / p_rate:>9.1f} {s['prefill'] / e['prefill']:>9.0f}", flush=True)
        del gm, stock


if __name__ == "__main__":
    main()
