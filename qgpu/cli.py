"""``python -m qgpu``: run kernels, show their PTX and machine code, run the kernel suite, build
the merged model, print the GPU circuit's allocation map.

The ``run --json`` output is a contract used by later stages and outside checks: exactly one JSON
object on stdout, ``{"kernel", "backend", "args", "stats"}`` (the model backend adds
``"prompt_tokens"``, ``"generated_tokens"`` and with ``--check`` ``"exact"``; a checked run that
is not exact exits with status 1, its ``"args"`` null if the stream diverged, and says where in
``"divergence"``), or on any error exit status 2 and ``{"error": {"kind", "message"}}``.
``build --json`` prints ``{"base", "merged", "stages"}`` the
same way (stage progress goes to stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from qgpu.driver import BACKENDS, CompiledModule, compile_file
from qgpu.errors import QgpuError, UsageError
from qgpu.machine.isa import format_program


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting, so --json can report it."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def _dims(text: str) -> tuple[int, int]:
    try:
        parts = [int(p) for p in text.split(",")]
    except ValueError:
        raise UsageError(f"dimensions must be X or X,Y integers, got {text!r}") from None
    if not 1 <= len(parts) <= 2:
        raise UsageError(f"dimensions must be X or X,Y, got {text!r}")
    return (parts[0], parts[1] if len(parts) == 2 else 1)


def _build_parser() -> _Parser:
    parser = _Parser(prog="python -m qgpu", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="launch a kernel")
    run.add_argument("file", help="CUDA source (.cu) or PTX (.ptx)")
    run.add_argument("--kernel", help="kernel name (needed when the file has several)")
    run.add_argument("--grid", required=True, help="X[,Y] thread blocks")
    run.add_argument("--block", required=True, help="X[,Y] threads per block")
    run.add_argument("--args", required=True, help="JSON list, one entry per parameter")
    run.add_argument("--dynamic-shared", type=int, default=0, help="bytes of extern shared")
    run.add_argument("--backend", default="interp", choices=BACKENDS)
    run.add_argument("--compiler", default="auto", help="auto, nvrtc, nvcc or clang")
    run.add_argument("--step-limit", type=int, default=None,
                     help="warp-instructions (interp), instructions (ptx) or generated tokens "
                          "(model) before a launch is stopped")
    run.add_argument("--model", help="model backend: a build directory (python -m qgpu build) "
                                     "or its merged/ checkpoint")
    run.add_argument("--dtype", choices=("float32", "bfloat16"),
                     help="model backend: load the model in this dtype (default: as built)")
    run.add_argument("--device", help="model backend: the torch device to run it on (default "
                                      "cpu; cuda, cuda:1, ...)")
    run.add_argument("--engine",
                     help="model backend: sparse (the sparse engine over the circuit layers, "
                          "default) or stock (the whole model in stock transformers)")
    run.add_argument("--check", action="store_true",
                     help="model backend: replay the launch on the machine and compare every "
                          "generated token, circuit layer and global word")
    run.add_argument("--json", action="store_true", help="print one JSON object")
    for name, helptext in (("ptx", "print the PTX of a CUDA file"),
                           ("asm", "print the lowered machine program")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("file")
        p.add_argument("--kernel")
        p.add_argument("--compiler", default="auto")
    suite = sub.add_parser("suite", help="run the kernel suite on both interpreters")
    suite.add_argument("--seeds", type=int, default=3)
    suite.add_argument("--model", metavar="BUILD_DIR",
                       help="instead: run every kernel on this merged model, checked token by "
                            "token against the machine")
    suite.add_argument("--dtype", choices=("float32", "bfloat16"),
                       help="with --model: load it in this dtype (default: as built)")
    suite.add_argument("--device", default="cpu",
                       help="with --model: the torch device to run it on (cpu, cuda, ...)")
    suite.add_argument("--engine", default="sparse",
                       help="with --model: sparse (default) or stock transformers")
    suite.add_argument("--layer-sample", type=float, default=1.0, metavar="FRACTION",
                       help="with --model: check every circuit layer at every token for this "
                            "fraction of the kernels (an even sample; 0: tokens and memory only;"
                            " the layer check's evaluator costs ~20 ms of CPU a token)")
    suite.add_argument("--batch", type=int, default=1, metavar="N",
                       help="with --model: run N launches side by side (one batch)")
    suite.add_argument("names", nargs="*", help="only these kernels")
    cmap = sub.add_parser("map", help="the GPU circuit's allocation map for the Qwen3.5-2B "
                                      "layer shapes: what every layer, head, neuron and "
                                      "residual dim does")
    cmap.add_argument("--json", action="store_true", help="print it as one JSON object")
    build = sub.add_parser("build", help="build the merged model (cached stages)")
    build.add_argument("--base", required=True, help="tiny, a Hub model id, or a checkpoint dir")
    build.add_argument("--revision", help="Hub revision (branch, tag or commit)")
    build.add_argument("--circuit", default="gpu",
                       help="registered circuit name: gpu (the SIMT machine), demo or null")
    build.add_argument("--out", required=True, help="writes OUT/base and OUT/merged")
    build.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    build.add_argument("--cache-dir", help="stage cache (default $QGPU_CACHE_DIR, else "
                                           "~/.cache/qgpu)")
    build.add_argument("--json", action="store_true", help="print one JSON object")
    from qgpu.chat.commands import add_calc_parser, add_eval_parser

    add_calc_parser(sub)
    add_eval_parser(sub)
    return parser


def _load(path: str, compiler: str) -> CompiledModule:
    if not Path(path).is_file():
        raise UsageError(f"no such file: {path}")
    return compile_file(Path(path), compiler=compiler)


def _run(ns: argparse.Namespace) -> dict[str, Any]:
    try:
        args = json.loads(ns.args)
    except json.JSONDecodeError as e:
        raise UsageError(f"--args is not valid JSON: {e}") from None
    if (ns.model or ns.dtype or ns.device or ns.check or ns.engine) and ns.backend != "model":
        raise UsageError("--model, --dtype, --device, --engine and --check belong to "
                         "--backend model")
    kernel = _load(ns.file, ns.compiler).kernel(ns.kernel)
    model = None
    if ns.backend == "model":
        if not ns.model:
            raise UsageError("--backend model needs --model BUILD_DIR (python -m qgpu build)")
        from qgpu.runtime import GpuModel

        model = GpuModel.load(ns.model, ns.dtype, ns.device or "cpu", ns.engine or "sparse")
    result = kernel.launch(
        grid=_dims(ns.grid), block=_dims(ns.block), args=args,
        dynamic_shared=ns.dynamic_shared, backend=ns.backend, step_limit=ns.step_limit,
        model=model, check=ns.check,
    )
    return {"kernel": result.kernel, "backend": result.backend, "args": result.args,
            "stats": result.stats, **result.model}


def _print_run(out: dict[str, Any]) -> None:
    print(f"kernel {out['kernel']} on the {out['backend']} backend")
    for i, value in enumerate(out["args"] or []):
        print(f"  arg {i}: {value}")
    print("  " + ", ".join(f"{k}={v}" for k, v in out["stats"].items()))
    if "generated_tokens" in out:
        sec = out["seconds"]
        print(f"  {out['prompt_tokens']} prompt tokens, {out['generated_tokens']} generated "
              f"on the {out['engine']} engine (load {sec['load']:.2f} s, prefill "
              f"{sec['prefill']:.2f} s, decode {sec['decode']:.2f} s)")
    if "exact" in out:
        print("  exact: every generated token and global word is the machine's" if out["exact"]
              else f"  NOT exact: {out['divergence']}")


def _build(ns: argparse.Namespace) -> dict[str, Any]:
    from qgpu.model.build import build

    result = build(
        ns.base, Path(ns.out), circuit=ns.circuit, dtype=ns.dtype, revision=ns.revision,
        cache_dir=Path(ns.cache_dir) if ns.cache_dir else None,
    )
    return {"base": str(result.base), "merged": str(result.merged), "stages": result.stages}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    want_json = "--json" in argv
    try:
        ns = _build_parser().parse_args(argv)
        if ns.command == "run":
            out = _run(ns)
            if ns.json:
                print(json.dumps(out))
            else:
                _print_run(out)
            return 1 if out.get("exact") is False else 0
        elif ns.command == "ptx":
            print(_load(ns.file, ns.compiler).ptx)
        elif ns.command == "asm":
            print(format_program(_load(ns.file, ns.compiler).kernel(ns.kernel).program))
        elif ns.command == "build":
            out = _build(ns)
            if ns.json:
                print(json.dumps(out))
            else:
                print(f"base:   {out['base']}\nmerged: {out['merged']}")
        elif ns.command in ("calc", "chat-eval"):
            from qgpu.chat.commands import run_calc, run_eval

            return run_calc(ns) if ns.command == "calc" else run_eval(ns)
        elif ns.command == "map":
            from qgpu.circuits.gpu.compiled import gpu_schedule
            from qgpu.compiler.schedule import LayerShape

            sched = gpu_schedule(LayerShape())
            print(json.dumps(sched.allocation_map()) if ns.json else sched.table())
        elif ns.model:
            from qgpu.suite.runner import print_model_report

            return print_model_report(ns.names, ns.model, ns.dtype, batch=ns.batch,
                                      device=ns.device, layers=ns.layer_sample,
                                      engine=ns.engine)
        else:
            from qgpu.suite.runner import print_suite_report

            return print_suite_report(ns.names, ns.seeds)
    except QgpuError as e:
        if want_json:
            print(json.dumps({"error": {"kind": e.kind, "message": e.message}}))
        else:
            print(f"error ({e.kind}): {e.message}", file=sys.stderr)
        return 2
    return 0
