"""The kernel suite, checked three ways: intent model, PTX interpreter, machine interpreter.

Each arrow of the verification ladder reports the first divergence (argument, index, values),
never a mere "mismatch". ``python -m qgpu suite`` prints the table.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from qgpu import protocol as tokens
from qgpu.driver import (
    SUITE_DIR,
    CompiledModule,
    Placement,
    load_ptx,
    place_arguments,
    read_back,
)
from qgpu.errors import QgpuError, UsageError
from qgpu.suite.manifest import SUITE, SuiteKernel, by_name, source_path  # noqa: F401


def suite_module(k: SuiteKernel, ptx_dir: Path = SUITE_DIR / "ptx") -> CompiledModule:
    """The committed (pinned NVRTC) PTX of a suite kernel."""
    return load_ptx((ptx_dir / f"{k.name}.ptx").read_text(encoding="utf-8"), "committed")


def first_difference(expected: list[Any], got: list[Any]) -> str | None:
    """Where two argument lists first differ, readably; None when equal."""
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        if isinstance(e, list):
            if len(e) != len(g):
                return f"arg {i}: length {len(g)} != {len(e)}"
            for j, (x, y) in enumerate(zip(e, g, strict=True)):
                if x != y:
                    return f"arg {i}[{j}]: got {y}, expected {x}"
        elif e != g:
            return f"arg {i}: got {g}, expected {e}"
    return None


@dataclass
class Check:
    """One kernel on one seed: the difference of each backend from the intent (None = exact),
    and the race warnings of either interpreter (suite kernels are race-free by design)."""

    name: str
    seed: int
    ptx: str | None
    machine: str | None
    stats: dict[str, int]
    races: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return self.ptx is None and self.machine is None


def make_args(k: SuiteKernel, seed: int) -> list[Any]:
    return k.make_args(np.random.default_rng(seed))


def check_kernel(k: SuiteKernel, seed: int, module: CompiledModule | None = None) -> Check:
    """Run one suite kernel on both interpreters and compare each with the intent model."""
    module = module or suite_module(k)
    args = make_args(k, seed)
    expected = [list(map(int, a)) if isinstance(a, list) else a for a in k.intent(args)]
    kernel = module.kernel(k.name)
    diffs: dict[str, str | None] = {}
    stats: dict[str, int] = {}
    races: list[str] = []
    for backend in ("ptx", "interp"):
        try:
            res = kernel.launch(grid=k.grid, block=k.block, args=args,
                                dynamic_shared=k.dynamic_shared, backend=backend)
            diffs[backend] = first_difference(expected, res.args)
            races += [f"{backend}: {w}" for w in res.warnings]
            if backend == "interp":
                stats = dict(res.stats, **token_counts(k, kernel, args, res.trace))
        except QgpuError as e:
            diffs[backend] = f"{e.kind} error: {e.message}"
    return Check(k.name, seed, diffs["ptx"], diffs["interp"], stats, races)


def suite_launch(k: SuiteKernel, seed: int = 0) -> tuple[list[Any], Placement, tokens.Launch]:
    """A suite kernel's arguments for `seed`, their placement and its checked launch."""
    kernel = suite_module(k).kernel(k.name)
    args = make_args(k, seed)
    place = place_arguments(kernel.ptx.params, args)
    return args, place, tokens.Launch.checked(kernel.program, k.grid, k.block, place,
                                              k.dynamic_shared)


def token_counts(k: SuiteKernel, kernel, args: list[Any], trace: list) -> dict[str, int]:
    """Prompt and generated tokens of the launch in the model's protocol (qgpu/tokens.py)."""
    place = place_arguments(kernel.ptx.params, args)
    launch = tokens.Launch.checked(kernel.program, k.grid, k.block, place, k.dynamic_shared)
    return {"prompt_tokens": len(tokens.prompt_tokens(launch)),
            "generated_tokens": len(tokens.expected_tokens(launch, trace))}


def print_suite_report(names: list[str], seeds: int) -> int:
    """Print one line per kernel; exit status 1 if any kernel is not exact three ways."""
    kernels = [by_name(n) for n in names] if names else list(SUITE)
    failures = racy = 0
    print(f"{'kernel':24} {'exact':>6} {'ROM':>4} {'instr':>5} {'blocks run':>10} {'spills':>6} "
          f"{'prompt':>6} {'generated':>9}")
    t0 = time.perf_counter()
    for k in kernels:
        checks = [check_kernel(k, seed) for seed in range(seeds)]
        bad = [c for c in checks if not c.exact]
        failures += bool(bad)
        st = checks[-1].stats
        print(f"{k.name:24} {len(checks) - len(bad):>3}/{len(checks):<2} "
              f"{st.get('rom_blocks', '-'):>4} {st.get('instructions', '-'):>5} "
              f"{st.get('blocks_executed', '-'):>10} {st.get('spill_slots', '-'):>6} "
              f"{st.get('prompt_tokens', '-'):>6} {st.get('generated_tokens', '-'):>9}")
        for c in bad:
            print(f"    seed {c.seed}: ptx: {c.ptx or 'exact'}; machine: {c.machine or 'exact'}")
        racy += any(c.races for c in checks)
        for c in checks:
            for warning in c.races:
                print(f"    seed {c.seed}: warning: {warning}")
    print(f"{len(kernels) - failures}/{len(kernels)} kernels exact on {seeds} seeds, {racy} "
          f"with race warnings ({time.perf_counter() - t0:.1f} s)")
    return 1 if failures else 0


def print_model_report(names: list[str], build: str, dtype: str | None = None,
                       gpu=None, batch: int = 1, device: str = "cpu", layers: float = 1.0,
                       engine: str = "sparse", jobs: int = 1) -> int:
    """Run kernels (seed 0) on a merged model (`build`: a build directory, loaded in `dtype`;
    or `gpu`, an already loaded runtime.GpuModel) with ``--check``: every generated token and
    global word, and every circuit layer at every token for a `layers` fraction of the kernels
    (every kernel at 1, none at 0, else an even sample in name order); `batch` launches side by
    side (kernels of similar length together); `jobs` processes, each with the model loaded,
    taking batches longest first; one line per kernel (prompt and generated tokens, whether its
    layers were checked, exact or the first divergence, seconds of its batch); exit status 1
    unless every launch is exact and its results equal the intent model."""
    if batch < 1:
        raise UsageError(f"--batch must be at least 1, not {batch}")
    if jobs < 1 or (jobs > 1 and gpu is not None):
        raise UsageError(f"--jobs must be at least 1 (1 with a loaded model), not {jobs}")
    if not 0 <= layers <= 1:
        raise UsageError(f"--layer-sample must be between 0 and 1, not {layers}")
    kernels = [by_name(n) for n in names] if names else list(SUITE)
    every = round(1 / layers) if layers else 0
    sampled = {k.name for i, k in enumerate(sorted(kernels, key=lambda k: k.name))
               if every and i % every == 0}
    t0 = time.perf_counter()
    # the machine's token count of each kernel: batches of similar lengths, longest run first
    length = {k.name: check_kernel(k, 0).stats.get("generated_tokens", 0) for k in kernels}
    runs = sorted(kernels, key=lambda k: length[k.name])
    groups = [(checked, [k.name for k in subset[i:i + batch]])
              for checked in (True, False)
              for subset in [[k for k in runs if (k.name in sampled) == checked]]
              for i in range(0, len(subset), batch)]
    groups.sort(key=lambda g: -max(length[n] for n in g[1]) * (3 if g[0] else 1))
    header = f"{'kernel':24} {'prompt':>6} {'generated':>9} {'layers':>6} {'s':>6}  result"
    if jobs == 1:
        from qgpu.runtime import GpuModel

        gpu = gpu or GpuModel.load(build, dtype, device, engine)
        print(f"loaded {gpu.path} ({gpu.dtype}, {gpu.engine} engine) in "
              f"{time.perf_counter() - t0:.0f} s\n{header}")
        results = (_run_group(gpu, checked, group) for checked, group in groups)
    else:
        import concurrent.futures
        import multiprocessing

        pool = concurrent.futures.ProcessPoolExecutor(
            jobs, multiprocessing.get_context("spawn"), _load_worker,
            (build, dtype, device, engine))
        futures = [pool.submit(_run_worker_group, checked, group) for checked, group in groups]
        print(f"{jobs} processes load {build}\n{header}")
        results = (f.result() for f in concurrent.futures.as_completed(futures))
    failures, total = 0, 0
    try:
        for rows in results:
            for name, prompt, generated, checked, seconds, result in rows:
                failures += result != "exact"
                total += max(generated, 0)
                print(f"{name:24} {prompt:>6} {generated:>9} {'yes' if checked else 'no':>6} "
                      f"{seconds:>6.0f}  {result}", flush=True)
    finally:
        if jobs > 1:
            pool.shutdown(cancel_futures=True)
    print(f"{len(kernels) - failures}/{len(kernels)} kernels exact on the model, {total} "
          f"generated tokens, layers checked for {len(sampled)} "
          f"({time.perf_counter() - t0:.0f} s)")
    return 1 if failures else 0


def _run_group(gpu, checked: bool, names: list[str]) -> list[tuple]:
    """One batch of suite kernels on the model, checked: a row per kernel (name, prompt
    tokens, generated tokens or -1, layers checked, seconds of the batch, result)."""
    from qgpu.runtime import run_checked_batch

    t = time.perf_counter()
    kernels = [by_name(n) for n in names]
    launches = [suite_launch(k) for k in kernels]
    try:
        outs = run_checked_batch(gpu, [launch for _, _, launch in launches], layers=checked)
    except QgpuError as e:
        outs = [e] * len(kernels)
    rows = []
    for k, (args, place, launch), run in zip(kernels, launches, outs, strict=True):
        if isinstance(run, QgpuError):
            result, generated = run.message, -1
        elif run.exact:
            generated = len(run.generated)
            intent = [list(map(int, a)) if isinstance(a, list) else a for a in k.intent(args)]
            diff = first_difference(intent, read_back(place, args, run.memory))
            result = "exact" if diff is None else f"results differ: {diff}"
        else:
            result, generated = run.divergence, len(run.generated)
        rows.append((k.name, len(tokens.prompt_tokens(launch)), generated, checked,
                     time.perf_counter() - t, result))
    return rows


_worker_model = None  # the model a --jobs worker process loaded


def _load_worker(build: str, dtype: str | None, device: str, engine: str) -> None:
    global _worker_model
    import torch

    from qgpu.runtime import GpuModel

    torch.set_num_threads(1)  # the jobs share the cores
    _worker_model = GpuModel.load(build, dtype, device, engine)


def _run_worker_group(checked: bool, names: list[str]) -> list[tuple]:
    return _run_group(_worker_model, checked, names)
