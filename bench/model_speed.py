"""Model speed: what compiling and merging a circuit costs, and what it does to decode speed.

Two parts, per base ("tiny": hidden 64, 4 layers, the 2B's inner shapes; "2b": random weights
with the real Qwen3.5-2B text config):

1. Cost. Writing the base, compiling the circuit (CircuitWeights) and merging it in float32 and
   bfloat16, each in a fresh process: seconds, peak RSS (getrusage) and size on disk.
2. Decode. Per-token time of cached single-token steps in stock transformers, in one process,
   interleaved (the variants take turns in every run, in a rotating order): the base's text step,
   the merged model's text step and circuit-token step (the demo's STEP tokens, or the GPU's
   dot-product launch, chosen greedily as `generate` would), and the circuit-only fast path
   (build_circuit_model + run_layers in step mode; demo only). Configs: float32, bfloat16
   stock, and bfloat16 with every `linear_attn.conv1d` kept in float32. A run's figure is its
   mean time per step; the table gives the median and the best of --repeat runs and their ratios
   to the base's own text step. Base and merged model are loaded side by side when both fit in
   memory, else one after the other (noted).

    python bench/model_speed.py [--base tiny|2b|both] [--circuit demo|gpu|null] [--tokens N]
                                [--repeat R] [--threads T] [--keep]

Checkpoints go to build/bench/model_speed/ and are removed at the end unless --keep (a kept
base is reused by the next run).
"""

from __future__ import annotations

import argparse
import gc
import math
import multiprocessing as mp
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from qgpu import protocol as T  # noqa: E402
from qgpu import tinybase  # noqa: E402
from qgpu.circuits import demo  # noqa: E402
from qgpu.compiler import numerics as nx  # noqa: E402
from qgpu.compiler.circuit_model import build_circuit_model, run_layers  # noqa: E402
from qgpu.compiler.schedule import Schedule  # noqa: E402
from qgpu.compiler.weights import embed  # noqa: E402
from qgpu.driver import compile_file, place_arguments  # noqa: E402
from qgpu.machine.interp import run_program  # noqa: E402
from qgpu.model.build import CIRCUITS, TINY_BASE  # noqa: E402
from qgpu.model.merge import merge, read_text_config  # noqa: E402

WORK = ROOT / "build" / "bench" / "model_speed"
TEXT_PROMPT = "The quick brown fox jumps over the lazy dog, and then it"
LOOP_PROGRAM = [demo.Ins("LI", 0, 1), demo.Ins("ADDI", 1, 1), demo.Ins("ADD", 2, 1),
                demo.Ins("BNZ", 0, 1)]  # fmt: skip
"""A demo program that never halts: r0 = 1, then pc 1..3 forever (ADDI, ADD, BNZ taken)."""
DEFAULT_TOKENS = {"tiny": 10, "2b": 6}
MEM_MARGIN = 1.5 * 2**30
PLACEMENT = {0: "skipped", 1: "side by side", 2: "one after the other"}
CONFIGS = ("float32", "bf16 stock", "bf16 conv1d fp32")
STEPS = ("base: text", "merged: text", "merged: circuit", "circuit-only run_layers")


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def _log(message: str) -> None:
    print(f"[model_speed] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- part 1: children, one per stage


def child_write_base(kind: str, out: str) -> dict:
    """Write the tiny or the 2B-config base into `out` (run in a fresh process)."""
    start_rss = _peak_rss_mib()
    t0 = time.perf_counter()
    if kind == "tiny":
        tinybase.write_tiny_base(Path(out), **TINY_BASE)
    else:
        tinybase.write_tiny_base(Path(out), real_2b_shapes=True, text_only=True)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "start_rss": start_rss, "peak_rss": _peak_rss_mib()}


def child_compile_merge(base_dir: str, circuit: str, dtype: str, out: str) -> dict:
    """Compile `circuit` for the base, then merge it in `dtype` (run in a fresh process, with
    an empty cache: the GPU's schedule is computed, not read from an earlier run's memo)."""
    start_rss = _peak_rss_mib()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["QGPU_CACHE_DIR"] = cache
        weights = CIRCUITS[circuit](read_text_config(Path(base_dir)))
    t1 = time.perf_counter()
    compile_rss = _peak_rss_mib()
    merge(Path(base_dir), weights, Path(out), dtype=dtype)
    return {
        "compile_s": t1 - t0, "compile_rss": compile_rss, "merge_s": time.perf_counter() - t1,
        "peak_rss": _peak_rss_mib(), "start_rss": start_rss, "k": weights.k_dims,
        "layers": len(weights.layers), "tokens": len(weights.token_names),
    }  # fmt: skip


def in_child(fn: Callable[..., dict], *args: str) -> dict:
    """fn(*args) in a fresh spawned process (same torch thread count), so its peak RSS is its
    own."""
    ctx = mp.get_context("spawn")
    threads = (torch.get_num_threads(),)
    with ProcessPoolExecutor(
        1, ctx, initializer=torch.set_num_threads, initargs=threads, max_tasks_per_child=1
    ) as pool:
        return pool.submit(fn, *args).result()


@dataclass
class Costs:
    """Part 1's rows: (stage, seconds, start RSS MiB, peak RSS MiB, on-disk MiB or None)."""

    rows: list[tuple[str, float | None, float | None, float | None, float | None]] = field(
        default_factory=list
    )

    def print(self, title: str) -> None:
        print(f"\n{title}")
        print(f"{'stage':46} {'seconds':>8} {'RSS start':>10} {'RSS peak':>9} {'disk MiB':>9}")
        for stage, sec, start, peak, disk in self.rows:
            cells = [f"{v:>{w}.1f}" if v is not None else f"{'-':>{w}}"
                     for v, w in ((sec, 8), (start, 10), (peak, 9), (disk, 9))]  # fmt: skip
            print(f"{stage:46} {' '.join(cells)}")
        print(
            "(RSS in MiB, getrusage ru_maxrss of the stage's own process; 'start' = after imports)"
        )


def prepare(kind: str, circuit: str) -> tuple[Path, dict[str, Path], Costs]:
    """Write (or reuse) the base, then compile and merge in both dtypes; returns the paths."""
    costs = Costs()
    base_dir = WORK / f"base-{kind}"
    if (base_dir / "config.json").is_file():
        costs.rows.append(("base: reused from an earlier --keep run", None, None, None,
                           _mib(base_dir)))  # fmt: skip
    else:
        tmp = WORK / f".base-{kind}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        _log(f"writing the {kind} base")
        r = in_child(child_write_base, kind, str(tmp))
        tmp.rename(base_dir)
        costs.rows.append(("write base (random weights, bf16)", r["seconds"], r["start_rss"],
                           r["peak_rss"], _mib(base_dir)))  # fmt: skip
    merged = {}
    for dtype in ("float32", "bfloat16"):
        out = WORK / f"merged-{kind}-{circuit}-{dtype}"
        shutil.rmtree(out, ignore_errors=True)
        _log(f"compiling {circuit} and merging in {dtype}")
        r = in_child(child_compile_merge, str(base_dir), circuit, dtype, str(out))
        name = f"compile {circuit} (K={r['k']}, {r['layers']} layers, {r['tokens']} tokens)"
        costs.rows.append((name, r["compile_s"], r["start_rss"], r["compile_rss"], None))
        costs.rows.append((f"merge {dtype} (after the compile above)", r["merge_s"], None,
                           r["peak_rss"], _mib(out)))  # fmt: skip
        merged[dtype] = out
    return base_dir, merged, costs


# ---------------------------------------------------------------- part 2: decode


@dataclass
class Run:
    """One run of a step variant: mean seconds per step, and the tokens it chose."""

    seconds: float
    chosen: list[int]


def decode_loop(
    model: torch.nn.Module, prompt: list[int], steps: int, feed: list[int] | None = None
) -> Run:
    """Prefill `prompt` (untimed), then `steps` cached single-token steps, timed; greedy unless
    `feed` gives the tokens to feed."""
    times, chosen = [], []
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([prompt]), use_cache=True, logits_to_keep=1)
        cache = out.past_key_values
        nxt = int(out.logits[0, -1].argmax())
        chosen.append(nxt)
        for i in range(steps):
            tok = nxt if feed is None else feed[i % len(feed)]
            ids = torch.tensor([[tok]])
            t0 = time.perf_counter()
            out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            nxt = int(out.logits[0, -1].argmax())
            times.append(time.perf_counter() - t0)
            chosen.append(nxt)
    return Run(sum(times) / len(times), chosen)


def circuit_only_run(
    model: torch.nn.Module, embeds: torch.Tensor, out_dims: list[int], prompt_len: int
) -> Run:
    """run_layers in step mode over prompt + fed tokens; the per-token mean over all of them."""
    t0 = time.perf_counter()
    residual = run_layers(model, embeds, step=True)
    seconds = (time.perf_counter() - t0) / embeds.shape[0]
    chosen = residual[prompt_len - 1 :, out_dims].argmax(-1).tolist()
    return Run(seconds, chosen)


def set_conv1d_dtype(models: list[torch.nn.Module], dtype: torch.dtype) -> None:
    """Cast every `linear_attn.conv1d` (lossless both ways: the weights came from bf16)."""
    for model in models:
        for name, module in model.named_modules():
            if name.endswith("linear_attn.conv1d"):
                module.to(dtype)


def mem_available() -> int:
    """MemAvailable from /proc/meminfo, in bytes."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def weights_bytes(path: Path, dtype: torch.dtype) -> int:
    """In-memory size of a checkpoint's weights loaded in `dtype` (vision/MTP included)."""
    total = 0
    for file in path.glob("*.safetensors"):
        with safe_open(file, "pt") as f:
            total += sum(math.prod(f.get_slice(n).get_shape()) for n in f.keys())
    return total * dtype.itemsize


@dataclass
class Workload:
    """Prompts and expected tokens shared by every config."""

    text: list[int]
    circuit_prompt: list[int]
    circuit_feed: list[int] | None  # None: greedy (the demo picks its own next token)
    circuit_want: list[int] | None  # expected chosen tokens (demo), for the exactness check
    sched: Schedule | None
    embeds: torch.Tensor | None = None
    out_dims: list[int] = field(default_factory=list)
    out_ids: list[int] = field(default_factory=list)


def dot_launch() -> tuple[list[str], list[str]]:
    """The README's dot product [1,2,3]·[4,5,6] on one warp: its prompt tokens and the tokens
    the reference machine says the model generates."""
    kernel = compile_file(ROOT / "kernels" / "dot.cu").kernel("dot")
    args = [[1, 2, 3], [4, 5, 6], {"zeros": 1}, 3]
    launch = T.Launch.checked(kernel.program, (1, 1), (4, 1),
                              place_arguments(kernel.ptx.params, args))
    run = run_program(launch.program, grid=launch.grid, block=launch.block,
                      params=launch.params, memory=launch.memory, allocations=launch.allocations)
    return T.prompt_tokens(launch), T.expected_tokens(launch, run.trace)


def make_workload(circuit: str, merged_dir: Path, base_dir: Path, steps: int) -> Workload:
    """The text prompt, and the circuit prompt: the demo's looping program (its reference
    tokens, and the same tokens embedded for the circuit-only model), the GPU's dot product
    (its reference tokens: the model must generate them greedily) or the null tokens."""
    tokenizer = AutoTokenizer.from_pretrained(merged_dir)
    text = tokenizer(TEXT_PROMPT, add_special_tokens=False).input_ids
    if circuit == "gpu":
        prompt, expected = dot_launch()
        if len(expected) < steps + 1:
            raise SystemExit(f"--tokens {steps}: the dot product generates {len(expected)}")
        return Workload(text, tokenizer.convert_tokens_to_ids(prompt), None,
                        tokenizer.convert_tokens_to_ids(expected[:steps + 1]), None)
    if circuit != "demo":
        names = [n for n in tokenizer.get_vocab() if n.startswith("<|gpu:null")]
        ids = sorted(tokenizer.convert_tokens_to_ids(names))
        return Workload(text, ids, ids, None, None)
    want, _ = demo.reference(LOOP_PROGRAM, steps + 1)
    prompt_names = demo.prompt(LOOP_PROGRAM)
    compiled = demo.compile_demo(read_text_config(base_dir))
    sched = compiled.sched
    table = demo.token_table()
    w = Workload(text, tokenizer.convert_tokens_to_ids(prompt_names), None,
                 tokenizer.convert_tokens_to_ids(want), sched)  # fmt: skip
    # The circuit-only model is K' wide (no base dims): embed the same tokens at that width.
    k = nx.pad_k(0, sched.k_used)
    fed = prompt_names + want[:steps]
    w.embeds = torch.stack([embed(sched, k, k, table[n]) for n in fed])
    w.out_dims = [sched.dim("out", i) for i in range(demo.HALT_INDEX + 1)]
    out_names = {feats["out"].index(1): n for n, feats in table.items() if "out" in feats}
    w.out_ids = tokenizer.convert_tokens_to_ids([out_names[i] for i in range(len(out_names))])
    return w


Results = dict[tuple[str, str], tuple[list[float], str]]
"""(config, step) -> (per-run mean seconds per token, check)."""


def measure(
    circuit: str, base_dir: Path, merged: dict[str, Path], steps: int, repeat: int
) -> Results:
    """All decode figures; bfloat16 first, then float32 (the larger one).

    Base and merged model are loaded side by side when both fit in memory (with a margin);
    otherwise one after the other in the same process (noted in the check column)."""
    work = make_workload(circuit, merged["float32"], base_dir, steps)
    results: Results = {}
    for dtype_name, configs in (("bfloat16", CONFIGS[1:]), ("float32", CONFIGS[:1])):
        dtype = getattr(torch, dtype_name)
        sizes = [weights_bytes(base_dir, dtype), weights_bytes(merged[dtype_name], dtype)]
        have = mem_available()
        if sum(sizes) + MEM_MARGIN <= have:
            groups = [("base", "merged")]
        elif max(sizes) + MEM_MARGIN <= have:
            groups = [("base",), ("merged",)]
        else:
            groups = []
        _log(
            f"{dtype_name}: base {sizes[0] / 2**30:.1f} GiB + merged {sizes[1] / 2**30:.1f} "
            f"GiB, {have / 2**30:.1f} GiB available: {PLACEMENT[len(groups)]}"
        )
        samples: dict[tuple[str, str], list[float]] = {}
        last: dict[tuple[str, str], Run] = {}
        for group in groups:
            timed = measure_dtype(work, base_dir if "base" in group else None,
                                  merged[dtype_name] if "merged" in group else None,
                                  dtype_name, configs, steps, repeat)  # fmt: skip
            for key, runs in timed.items():
                samples[key] = [run.seconds for run in runs]
                last[key] = runs[-1]
            gc.collect()
        note = " (base and merged loaded one after the other)" if len(groups) == 2 else ""
        for config in configs:
            for step in STEPS:
                if (config, step) not in last:
                    why = "skipped: memory" if not groups else "n/a: no schedule for this circuit"
                    results[(config, step)] = ([], why)
                    continue
                check = _check(step, last[(config, step)], last[(config, STEPS[0])].chosen, work)
                results[(config, step)] = (samples[(config, step)], check + note)
        _log(
            f"{dtype_name}: done; process peak RSS so far {_peak_rss_mib():.0f} MiB; "
            f"load average {os.getloadavg()[0]:.1f}"
        )
    return results


def measure_dtype(
    work: Workload,
    base_dir: Path | None,
    merged_dir: Path | None,
    dtype_name: str,
    configs: tuple[str, ...],
    steps: int,
    repeat: int,
) -> dict[tuple[str, str], list[Run]]:
    """Load the base and/or the merged model in one dtype; time their step variants, taking
    turns (the order rotates every run); the circuit-only model goes with the merged one."""
    dtype = getattr(torch, dtype_name)
    variants: dict[str, Callable[[int], Run]] = {}
    models = []
    if base_dir is not None:
        base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=dtype).eval()
        variants[STEPS[0]] = lambda n: decode_loop(base, work.text, n)
        models.append(base)
    if merged_dir is not None:
        model = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=dtype).eval()
        variants[STEPS[1]] = lambda n: decode_loop(model, work.text, n)
        variants[STEPS[2]] = lambda n: decode_loop(model, work.circuit_prompt, n,
                                                   work.circuit_feed)  # fmt: skip
        models.append(model)
        if work.sched is not None:
            cmodel = build_circuit_model(work.sched, dtype_name)[0]
            n_prompt = len(work.circuit_prompt)
            variants[STEPS[3]] = lambda n: circuit_only_run(
                cmodel, work.embeds[: n_prompt + n], work.out_dims, n_prompt
            )
            models.append(cmodel)
    runs: dict[tuple[str, str], list[Run]] = {}
    for r in range(-1, repeat):  # run -1 is a warm-up of one step, not recorded
        for config in configs:
            set_conv1d_dtype(models, torch.float32 if "conv1d fp32" in config else dtype)
            names = list(variants)
            shift = max(r, 0) % len(names)
            for step in names[shift:] + names[:shift]:
                run = variants[step](steps if r >= 0 else 1)
                if r >= 0:
                    runs.setdefault((config, step), []).append(run)
                    _log(f"run {r + 1}/{repeat} {config:16} {step:25} "
                         f"{1000 * run.seconds:9.2f} ms/token")  # fmt: skip
    return runs


def _check(step: str, run: Run, base_text: list[int], work: Workload) -> str:
    """Merged text: greedy tokens equal to the base's; circuit: tokens equal to the reference."""
    if step == STEPS[1]:
        same = sum(a == b for a, b in zip(run.chosen, base_text, strict=True))
        return f"greedy = base {same}/{len(base_text)}"
    if work.circuit_want is None or step == STEPS[0]:
        return ""
    got = run.chosen if step == STEPS[2] else [work.out_ids[i] for i in run.chosen]
    ok = sum(a == b for a, b in zip(got, work.circuit_want, strict=True))
    return f"exact {ok}/{len(work.circuit_want)}"


def print_decode(title: str, results: Results, steps: int, repeat: int) -> None:
    print(f"\n{title}")
    print(
        f"ms/token = mean of {steps} cached steps in one run; median and best of {repeat} runs. "
        "x base: ratio to the base's text step in the same config (of medians, of bests); "
        "x fp32: ratio of bests to the float32 base text step"
    )
    print(
        f"{'config':17} {'step':25} {'median':>8} {'best':>8} {'x base':>6} {'(best)':>6} "
        f"{'x fp32':>6}  check"
    )
    refs = {}
    for config in CONFIGS:
        base = results.get((config, STEPS[0]), ([], ""))[0]
        refs[config] = (statistics.median(base), min(base)) if base else None
    fp32 = refs[CONFIGS[0]]
    for config in CONFIGS:
        ref = refs[config]
        for step in STEPS:
            seconds, check = results.get((config, step), ([], "-"))
            if not seconds:
                print(f"{config:17} {step:25} {'-':>8} {'-':>8} {'-':>6} {'-':>6} {'-':>6}  "
                      f"{check}")  # fmt: skip
                continue
            med, best = statistics.median(seconds), min(seconds)
            ratios = [f"{med / ref[0]:6.2f}", f"{best / ref[1]:6.2f}"] if ref else ["-"] * 2
            ratios.append(f"{best / fp32[1]:6.2f}" if fp32 else f"{'-':>6}")
            print(
                f"{config:17} {step:25} {1000 * med:8.2f} {1000 * best:8.2f} "
                f"{' '.join(ratios)}  {check}"
            )


def describe(base_dir: Path, merged_dir: Path) -> str:
    b, m = read_text_config(base_dir), read_text_config(merged_dir)
    return (
        f"base hidden {b['hidden_size']} x {b['num_hidden_layers']} layers; merged hidden "
        f"{m['hidden_size']} x {m['num_hidden_layers']} layers, vocab {m['vocab_size']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", choices=("tiny", "2b", "both"), default="tiny")
    parser.add_argument("--circuit", choices=("demo", "gpu", "null"), default="demo")
    parser.add_argument(
        "--tokens", type=int, default=None, help="cached steps per run (default: tiny 10, 2b 6)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: with 2, any other busy process on these 2 cores stalls "
        "the OpenMP barriers; a tiny-base step went from 15 ms to 200-440 ms)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the checkpoints in build/")
    ns = parser.parse_args()
    hf_logging.set_verbosity_error()
    torch.set_num_threads(ns.threads)
    WORK.mkdir(parents=True, exist_ok=True)
    kinds = ["tiny", "2b"] if ns.base == "both" else [ns.base]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); circuit {ns.circuit}")
    try:
        # Every child is spawned before any model is loaded here: a spawned child's ru_maxrss
        # starts at this process's high-water mark (Linux keeps it across fork and exec).
        prepared = {}
        for kind in kinds:
            start = time.perf_counter()
            prepared[kind] = (*prepare(kind, ns.circuit), time.perf_counter() - start)
        for kind, (base_dir, merged, costs, prepare_s) in prepared.items():
            load = os.getloadavg()[0]
            steps = ns.tokens or DEFAULT_TOKENS[kind]
            label = f"{kind} base + {ns.circuit} circuit ({describe(base_dir, merged['float32'])})"
            costs.print(f"== compile and merge: {label}")
            print(f"({kind}: {prepare_s:.0f} s in all, with the start-up of each child process)")
            start = time.perf_counter()
            results = measure(ns.circuit, base_dir, merged, steps, ns.repeat)
            print_decode(f"== decode: {label}", results, steps, ns.repeat)
            print(
                f"decode process peak RSS {_peak_rss_mib():.0f} MiB; {kind} decode part "
                f"{time.perf_counter() - start:.0f} s; 1-min load average at its start "
                f"{load:.1f}, at its end {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)",
                flush=True,
            )
            if not ns.keep:
                for path in [*merged.values(), base_dir]:
                    shutil.rmtree(path, ignore_errors=True)
    finally:
        if not ns.keep:
            shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
