"""``python -m qgpu``: run kernels, show their PTX and machine code, run the kernel suite, build
the merged model, print the GPU circuit's allocation map.

The ``run --json`` output is a contract used by later stages and outside checks: exactly one JSON
object on stdout, ``{"kernel", "backend", "args", "stats"}`` (the model backend adds
``"prompt_tokens"``, ``"generated_tokens"`` and with ``--check`` ``"exact"``; a checked run that
is not exact exits with status 1, its ``"args"`` null if the stream diverged, and says where in
``"divergence"``), or on any error exit status 2 and ``{"error": {"kind", "message"}}``.
``build --json`` prints ``{"base", "merged", "stages"}`` the
same way (stage progress goes to stderr). ``run``, ``ptx`` and ``asm`` show the compiler's
warnings on stderr, or with ``--json`` as a ``"warnings"`` list in the object (the error object
too); ``run`` adds a warning per data race between warps or thread blocks (the interpreters,
or the model backend's ``--check`` replay: docs/ISA.md §9), and with ``--json`` a ``"races"``
list of objects (kind, space, address, word, name, first and second access, message). No
input ends in a traceback: every bad one is exit status 2 and an error kind
(docs/ERRORS.md); a closed stdout (``| head``) ends the command quietly.

``cache`` lists the build cache and ``cache prune`` trims it (docs/CACHE.md); with ``--json``,
``{"cache_dir", "limit", "limit_from", "entries", "bytes", "frees"}`` and ``{"cache_dir",
"limit", "limit_from", "dry_run", "removed", "skipped", "freed", "bytes", "frees",
"over_limit"}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import traceback
from decimal import Decimal
from pathlib import Path
from typing import Any

from qgpu.driver import BACKENDS, CompiledModule, compile_file
from qgpu.errors import QgpuError, ResourceError, UsageError
from qgpu.machine import float32
from qgpu.machine.isa import format_program

# --args is at most 16 parameters of at most 127 words: a few KB of JSON. These bounds keep a
# hostile --args from costing memory or recursion before it is checked (docs/ERRORS.md).
MAX_ARGS_CHARS = 64 * 1024
MAX_ARGS_DEPTH = 8
MAX_INT_DIGITS = 30
ENGINES = ("sparse", "stock")
SHOWN_RACES = 8  # race warnings the text output prints; --json lists every one


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting, so --json can report it."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def _count(low: int) -> Any:
    """An argparse type: an int of at least ``low`` (argparse names the option in its error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text[:40]!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


def _fraction(text: str) -> float:
    """--layer-sample: 0, or a fraction in [1e-6, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text[:40]!r}") from None
    if not (value == 0 or 1e-6 <= value <= 1):
        raise argparse.ArgumentTypeError(f"must be 0 or a fraction between 1e-6 and 1, got "
                                         f"{text[:40]}")
    return value


def _json_args(text: str, option: str = "--args") -> Any:
    """The JSON of --args (or ``option``) parsed, its size, nesting and integers bounded
    first."""

    def integer(digits: str) -> int:
        if len(digits.lstrip("-")) > MAX_INT_DIGITS:
            raise UsageError(f"{option}: an integer of {len(digits.lstrip('-'))} digits "
                             f"({digits[:12]}...); the machine's words have 32 bits")
        return int(digits)

    if len(text) > MAX_ARGS_CHARS:
        raise UsageError(f"{option} has {len(text):,} characters; at most {MAX_ARGS_CHARS:,} "
                         f"(global memory holds 127 words)")
    depth = deepest = 0
    for bracket in re.findall(r"[\[\]{}]", re.sub(r'"(?:[^"\\]|\\.)*"', "", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    if deepest > MAX_ARGS_DEPTH:
        raise UsageError(f"{option} nests {deepest} deep; at most {MAX_ARGS_DEPTH} (an argument "
                         f"is an int, a list of ints or {{\"zeros\": n}})")
    try:
        return json.loads(text, parse_int=integer, parse_float=Decimal)  # decimals exact
    except json.JSONDecodeError as e:
        raise UsageError(f"{option} is not valid JSON: {e}") from None


def _days(text: str) -> float:
    """--older-than: a number of days, at least 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of days, got {text[:40]!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of days of at least 0, got "
                                         f"{text[:40]}")
    return value


def _dims(text: str) -> tuple[int, ...]:
    """X, X,Y or X,Y,Z (a missing Y or Z is 1)."""
    try:
        parts = [int(p) for p in text.split(",")]
    except ValueError:
        raise UsageError(f"dimensions must be X, X,Y or X,Y,Z integers, got {text!r}") from None
    if not 1 <= len(parts) <= 3:
        raise UsageError(f"dimensions must be X, X,Y or X,Y,Z, got {text!r}")
    return (*parts, 1)[:max(2, len(parts))]


def _build_parser() -> _Parser:
    parser = _Parser(prog="python -m qgpu", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="launch a kernel")
    run.add_argument("file", help="CUDA source (.cu) or PTX (.ptx)")
    run.add_argument("--kernel", help="kernel name (needed when the file has several)")
    run.add_argument("--grid", required=True, help="X[,Y[,Z]] thread blocks")
    run.add_argument("--block", required=True, help="X[,Y[,Z]] threads per block")
    run.add_argument("--args", required=True, help="JSON list, one entry per parameter")
    run.add_argument("--symbols", help="JSON object setting __device__/__constant__ variables "
                                       "before the launch, e.g. '{\"lut\": [1, 2, 3]}'")
    run.add_argument("--dynamic-shared", type=_count(0), default=0,
                     help="bytes of extern shared")
    run.add_argument("--backend", default="interp", choices=BACKENDS)
    run.add_argument("--compiler", default="auto", help="auto, nvrtc, nvcc or clang")
    run.add_argument("--step-limit", type=_count(1), default=None,
                     help="warp-instructions (interp), instructions (ptx) or generated tokens "
                          "(model) before a launch is stopped")
    run.add_argument("--model", help="model backend: a build directory (python -m qgpu build) "
                                     "or its merged/ checkpoint")
    run.add_argument("--dtype", choices=("float32", "bfloat16"),
                     help="model backend: load the model in this dtype (default: as built)")
    run.add_argument("--device", help="model backend: the torch device to run it on (default "
                                      "cpu; cuda, cuda:1, ...)")
    run.add_argument("--engine", choices=ENGINES,
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
        p.add_argument("--json", action="store_true",
                       help='print one JSON object ({"ptx"} or {"kernel", "asm"}, with '
                            '"warnings")')
    suite = sub.add_parser("suite", help="run the kernel suite on both interpreters")
    suite.add_argument("--seeds", type=_count(1), default=3)
    suite.add_argument("--model", metavar="BUILD_DIR",
                       help="instead: run every kernel on this merged model, checked token by "
                            "token against the machine")
    suite.add_argument("--dtype", choices=("float32", "bfloat16"),
                       help="with --model: load it in this dtype (default: as built)")
    suite.add_argument("--device", default="cpu",
                       help="with --model: the torch device to run it on (cpu, cuda, ...)")
    suite.add_argument("--engine", default="sparse", choices=ENGINES,
                       help="with --model: sparse (default) or stock transformers")
    suite.add_argument("--layer-sample", type=_fraction, default=1.0, metavar="FRACTION",
                       help="with --model: check every circuit layer at every token for this "
                            "fraction of the kernels (an even sample; 0: tokens and memory only;"
                            " the layer check's evaluator costs ~20 ms of CPU a token)")
    suite.add_argument("--batch", type=_count(1), default=1, metavar="N",
                       help="with --model: run N launches side by side (one batch)")
    suite.add_argument("--jobs", type=_count(1), default=1, metavar="N",
                       help="with --model: N processes, each with the model loaded, running "
                            "batches side by side (one a core)")
    suite.add_argument("names", nargs="*", help="only these kernels")
    fuzz = sub.add_parser("fuzz", help="differential fuzzing: random valid kernels on the PTX "
                                       "interpreter, the machine interpreter (and the model)")
    fuzz.add_argument("--n", type=_count(1), default=100, help="programs to generate and run")
    fuzz.add_argument("--seed", type=_count(0), default=0,
                      help="the run's seed (program i of a seed is always the same)")
    fuzz.add_argument("--backend", default="interp", choices=("interp", "model"),
                      help="interp: both interpreters; model: the model too")
    fuzz.add_argument("--model", metavar="BUILD_DIR", help="with --backend model: the build")
    fuzz.add_argument("--dtype", choices=("float32", "bfloat16"),
                      help="with --backend model: load it in this dtype (default: as built)")
    fuzz.add_argument("--device", help="with --backend model: the torch device (default cpu)")
    fuzz.add_argument("--batch", type=_count(1), default=16, metavar="N",
                      help="with --backend model: launches side by side")
    fuzz.add_argument("--size", choices=("normal", "small"),
                      help="program size (default: normal; small with --backend model)")
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
    cache = sub.add_parser("cache", help="list what the build cache holds, or prune it "
                                         "(docs/CACHE.md)")
    cache.add_argument("action", nargs="?", choices=("list", "prune"), default="list",
                       help="list (default): every entry, its size and last use; prune: remove "
                            "the least recently used down to the limit")
    cache.add_argument("--cache-dir", help="the cache (default $QGPU_CACHE_DIR, else "
                                           "~/.cache/qgpu)")
    cache.add_argument("--max-size", metavar="SIZE",
                       help="prune: down to SIZE (40G, 500M, bytes; 0 or none: no size limit) "
                            "instead of $QGPU_CACHE_LIMIT or the default")
    cache.add_argument("--older-than", type=_days, metavar="DAYS",
                       help="prune: also every entry unused for DAYS days")
    cache.add_argument("--all", action="store_true",
                       help="prune: every entry, and the GPU circuit's schedules")
    cache.add_argument("--dry-run", action="store_true",
                       help="prune: say what would go, remove nothing")
    cache.add_argument("--json", action="store_true", help="print one JSON object")
    from qgpu.chat.commands import add_calc_parser, add_eval_parser

    add_calc_parser(sub)
    add_eval_parser(sub)
    return parser


def _load(path: str, compiler: str, warnings: list[str], quiet: bool) -> CompiledModule:
    """Compile a file; its warnings go to stderr (``quiet``: only into ``warnings``, which
    the JSON object carries)."""
    module = compile_file(path, compiler=compiler)
    warnings.extend(module.warnings)
    for warning in [] if quiet else module.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return module


def _run(ns: argparse.Namespace, warnings: list[str]) -> dict[str, Any]:
    args = _json_args(ns.args)
    if (ns.model or ns.dtype or ns.device or ns.check or ns.engine) and ns.backend != "model":
        raise UsageError("--model, --dtype, --device, --engine and --check belong to "
                         "--backend model")
    kernel = _load(ns.file, ns.compiler, warnings, ns.json).kernel(ns.kernel)
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
        symbols=_json_args(ns.symbols, "--symbols") if ns.symbols else None,
    )
    symbols = {"symbols": result.symbols} if result.symbols else {}
    races = {"races": [r.to_json() for r in result.races]} if result.races else {}
    warnings.extend(result.warnings)
    return {"kernel": result.kernel, "backend": result.backend, "args": result.args,
            "stats": result.stats, **symbols, **result.model, **races, "warnings": warnings}


def _jsonable(value: Any) -> Any:
    """Results with their float32 values as JSON numbers (shortest form) or, non-finite, as
    the strings "nan", "inf", "-inf"."""
    if isinstance(value, float32.Float32):
        return value.json()
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def _print_run(out: dict[str, Any]) -> None:
    print(f"kernel {out['kernel']} on the {out['backend']} backend")
    for i, value in enumerate(out["args"] or []):
        print(f"  arg {i}: {value}")
    for name, value in out.get("symbols", {}).items():
        print(f"  {name}: {value}")
    print("  " + ", ".join(f"{k}={v}" for k, v in out["stats"].items()))
    if "generated_tokens" in out:
        sec = out["seconds"]
        print(f"  {out['prompt_tokens']} prompt tokens, {out['generated_tokens']} generated "
              f"on the {out['engine']} engine (load {sec['load']:.2f} s, prefill "
              f"{sec['prefill']:.2f} s, decode {sec['decode']:.2f} s)")
    if "exact" in out:
        print("  exact: every generated token and global word is the machine's" if out["exact"]
              else f"  NOT exact: {out['divergence']}")
    races = out.get("races", [])
    for race in races[:SHOWN_RACES]:
        print(f"warning: {race['message']}", file=sys.stderr)
    if len(races) > SHOWN_RACES:
        print(f"warning: {len(races) - SHOWN_RACES} more data races (--json lists them all)",
              file=sys.stderr)


def _build(ns: argparse.Namespace) -> dict[str, Any]:
    for option, value in (("--out", ns.out), ("--cache-dir", ns.cache_dir)):
        try:  # now, not after minutes of building
            if value:
                Path(value).mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise UsageError(f"{option} {value}: exists and is not a directory") from None
        except OSError as e:
            raise UsageError(f"{option} {value}: cannot create it ({e.strerror or e})") from None
    from qgpu.model.build import build

    result = build(
        ns.base, Path(ns.out), circuit=ns.circuit, dtype=ns.dtype, revision=ns.revision,
        cache_dir=Path(ns.cache_dir) if ns.cache_dir else None,
    )
    return {"base": str(result.base), "merged": str(result.merged), "stages": result.stages}


def _cache(ns: argparse.Namespace) -> dict[str, Any]:
    """``cache``: list the cache (``action`` list) or prune it; the JSON object either way."""
    from qgpu import cache

    if ns.action == "list" and (ns.max_size is not None or ns.older_than is not None or ns.all
                                or ns.dry_run):
        raise UsageError("--max-size, --older-than, --all and --dry-run belong to "
                         "'cache prune'")
    if ns.all and (ns.max_size is not None or ns.older_than is not None):
        raise UsageError("prune --all removes every entry; it takes no --max-size or "
                         "--older-than")
    root = Path(ns.cache_dir) if ns.cache_dir else cache.default_cache_dir()
    if root.exists() and not root.is_dir():
        raise UsageError(f"--cache-dir {root}: exists and is not a directory")
    if ns.max_size is not None:
        try:
            limit, limit_from = cache.parse_size(ns.max_size), "--max-size"
        except ValueError as e:
            raise UsageError(f"--max-size: {e}") from None
    else:
        limit = cache.cache_limit()
        limit_from = cache.LIMIT_ENV if os.environ.get(cache.LIMIT_ENV, "").strip() else "default"
    head = {"cache_dir": str(root.absolute()), "limit": limit, "limit_from": limit_from}
    if ns.action == "list":
        found = cache.scan(root)
        return {**head, "entries": [e.to_json(found.root) for e in found.entries],
                "bytes": found.bytes, "frees": found.frees}
    result = cache.prune(root, limit=limit, older_than_s=None if ns.older_than is None
                         else ns.older_than * 86400, everything=ns.all, dry_run=ns.dry_run)
    left = result.after  # None with --dry-run: "bytes" is then null, "frees" an estimate
    return {**head, "dry_run": result.dry_run,
            "removed": [e.to_json(result.root) for e in result.removed],
            "skipped": [{**e.to_json(result.root), "why": why} for e, why in result.skipped],
            "freed": result.freed, "bytes": left.bytes if left else None,
            "frees": result.left, "over_limit": result.over}


def _print_cache(out: dict[str, Any]) -> None:
    from qgpu.cache import format_size

    limit = "no limit" if out["limit"] is None else f"limit {format_size(out['limit'])}"
    limit += f" ({out['limit_from']})" if out["limit_from"] != "default" else \
        " (the default; QGPU_CACHE_LIMIT sets it)"

    def row(entry: dict[str, Any], verb: str = "") -> str:
        return (f"{verb}{entry['kind']:<10} {format_size(entry['bytes']):>10} "
                f"{format_size(entry['frees']):>10}  {_age(entry['age_s']):>9}  "
                f"{entry['path']}  {entry['what']}")

    if "entries" in out:
        print(f"{out['cache_dir']}: {len(out['entries'])} entries")
        if out["entries"]:
            print(f"{'kind':<10} {'size':>10} {'frees':>10}  {'last used':>9}  path  what")
        for entry in out["entries"]:
            print(row(entry))
        print(f"total {format_size(out['bytes'])}, {format_size(out['frees'])} of it held only "
              f"by the cache; {limit}")
        print("frees: what removing an entry frees (files also linked from a build directory or "
              "the Hub cache stay); only that counts toward the limit")
        return
    verb = "would remove " if out["dry_run"] else "removed "
    for entry in out["removed"]:
        print(row(entry, verb))
    for entry in out["skipped"]:
        print(row(entry, "skipped ") + f" ({entry['why']})")
    n = len(out["removed"])
    entries = f"{n} {'entry' if n == 1 else 'entries'}"
    if out["dry_run"]:
        print(f"would free {format_size(out['freed'])} ({entries}), leaving "
              f"{format_size(out['frees'])} of the cache's own; {limit}")
    else:
        print(f"freed {format_size(out['freed'])} ({entries}); the cache holds "
              f"{format_size(out['frees'])} of its own ({format_size(out['bytes'])} with "
              f"links); {limit}")
    if out["over_limit"]:
        print("over the limit still: what is left is being built, the stage index, the "
              "schedules (prune --all removes them) or not qgpu's")


def _age(seconds: float) -> str:
    """3 min ago, 5 h ago, 12 d ago."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


def main(argv: list[str] | None = None) -> int:
    """``python -m qgpu``: the exit status (0; 1: a check or suite that was not exact; 2: an
    error, reported as its kind and message, never a traceback; 130: interrupted; 141: stdout
    closed, as a Unix tool killed by SIGPIPE; docs/ERRORS.md)."""
    argv = sys.argv[1:] if argv is None else argv
    want_json = "--json" in argv
    warnings: list[str] = []
    try:
        code = _main(argv, warnings)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # the reader (head, a closed pager) is gone: stop quietly, and keep the interpreter's
        # final flush from complaining about the same pipe
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as e:  # a path given on the command line that cannot be read or written
        where = f": {e.filename}" if e.filename else ""
        return _report(UsageError(f"{e.strerror or e}{where}"), want_json, warnings)
    except MemoryError:
        return _report(ResourceError("out of memory"), want_json, warnings)
    except Exception as e:  # a bug in qgpu: still one error object, the traceback on request
        if os.environ.get("QGPU_TRACEBACK"):
            traceback.print_exc()
        error = QgpuError(f"{type(e).__name__}: {str(e)[:500]} (a bug in qgpu; "
                          f"QGPU_TRACEBACK=1 prints the traceback)")
        return _report(error, want_json, warnings)


def _report(e: QgpuError, want_json: bool, warnings: list[str]) -> int:
    """Print one error (the JSON object on stdout, else a line on stderr); exit status 2."""
    if want_json:
        error: dict[str, Any] = {"error": {"kind": e.kind, "message": e.message}}
        print(json.dumps({**error, "warnings": warnings} if warnings else error))
    else:
        print(f"error ({e.kind}): {e.message}", file=sys.stderr)
    return 2


def _main(argv: list[str], warnings: list[str]) -> int:
    """Parse and run one command; ``warnings`` collects the compiler's for the error object."""
    want_json = "--json" in argv
    try:
        ns = _build_parser().parse_args(argv)
        if ns.command == "run":
            out = _run(ns, warnings)
            if ns.json:
                print(json.dumps(_jsonable(out)))
            else:
                _print_run(out)
            return 1 if out.get("exact") is False else 0
        elif ns.command == "ptx":
            module = _load(ns.file, ns.compiler, warnings, ns.json)
            print(json.dumps({"ptx": module.ptx, "compiler": module.compiler,
                              "warnings": warnings}) if ns.json else module.ptx)
        elif ns.command == "asm":
            kernel = _load(ns.file, ns.compiler, warnings, ns.json).kernel(ns.kernel)
            text = format_program(kernel.program)
            print(json.dumps({"kernel": kernel.name, "asm": text, "warnings": warnings})
                  if ns.json else text)
        elif ns.command == "build":
            out = _build(ns)
            if ns.json:
                print(json.dumps(out))
            else:
                print(f"base:   {out['base']}\nmerged: {out['merged']}")
        elif ns.command == "cache":
            out = _cache(ns)
            if ns.json:
                print(json.dumps(out))
            else:
                _print_cache(out)
        elif ns.command in ("calc", "chat-eval"):
            from qgpu.chat.commands import run_calc, run_eval

            if ns.command == "chat-eval" and ns.n is not None and ns.n < 1:
                raise UsageError(f"--n must be at least 1, got {ns.n}")
            return run_calc(ns) if ns.command == "calc" else run_eval(ns)
        elif ns.command == "fuzz":
            from qgpu.suite.fuzz import run_command

            return run_command(ns)
        elif ns.command == "map":
            from qgpu.circuits.gpu.compiled import gpu_schedule
            from qgpu.compiler.schedule import LayerShape

            sched = gpu_schedule(LayerShape())
            print(json.dumps(sched.allocation_map()) if ns.json else sched.table())
        elif ns.names and (unknown := _unknown_suite_names(ns.names)):
            raise UsageError(unknown)
        elif ns.model:
            from qgpu.suite.runner import print_model_report

            return print_model_report(ns.names, ns.model, ns.dtype, batch=ns.batch,
                                      device=ns.device, layers=ns.layer_sample,
                                      engine=ns.engine, jobs=ns.jobs)
        else:
            from qgpu.suite.runner import print_suite_report

            return print_suite_report(ns.names, ns.seeds)
    except QgpuError as e:
        return _report(e, want_json, warnings)
    return 0


def _unknown_suite_names(names: list[str]) -> str | None:
    """A message naming the first name that is no suite kernel (with close ones), or None."""
    import difflib

    from qgpu.suite.manifest import SUITE

    known = [k.name for k in SUITE]
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            return (f"no suite kernel named {name[:80]!r}{hint} (the {len(known)} names: "
                    f"kernels/*.cu, or python -m qgpu suite)")
    return None
