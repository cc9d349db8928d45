"""The chat package's commands for ``python -m qgpu`` (cli.py registers them):

    python -m qgpu calc "EXPR" [--backend interp | --backend model --model BUILD] [--check]
                       [--dtype] [--device] [--engine] [--json]
    python -m qgpu chat-eval --set normal|advanced --model BUILD [--n N] [--out REPORT]
                       [--dtype] [--device] [--greedy] [--thinking]

``calc --json`` prints one object, ``{"expression", "value", "launches": [{"kernel",
"prompt_tokens", "generated_tokens", ...}]}``, or exits with status 2 and ``{"error": {"kind",
"message"}}`` (kinds: parse, shape, overflow, division_by_zero, resource, launch, usage).
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_calc_parser(sub: Any) -> None:
    calc = sub.add_parser("calc", help="evaluate an integer/vector/matrix expression, every "
                                       "operation a kernel launch (gpu_calc)")
    calc.add_argument("expression", help='e.g. "sum([1, 2, 3] * [4, 5, 6])"')
    calc.add_argument("--backend", default="interp", choices=("interp", "model"))
    calc.add_argument("--model", help="model backend: a build directory (python -m qgpu build)")
    calc.add_argument("--dtype", choices=("float32", "bfloat16"),
                      help="model backend: load the model in this dtype (default: as built)")
    calc.add_argument("--device", help="model backend: the torch device (default cpu)")
    calc.add_argument("--engine", help="model backend: sparse (default) or stock")
    calc.add_argument("--check", action="store_true",
                      help="model backend: replay every launch on the machine and compare "
                           "every generated token and global word")
    calc.add_argument("--json", action="store_true", help="print one JSON object")


def run_calc(ns: argparse.Namespace) -> int:
    from qgpu.chat.calc import Launcher, calc
    from qgpu.errors import UsageError

    model = None
    if ns.backend == "model":
        if not ns.model:
            raise UsageError("--backend model needs --model BUILD_DIR (python -m qgpu build)")
        from qgpu.runtime import GpuModel

        model = GpuModel.load(ns.model, ns.dtype, ns.device or "cpu", ns.engine or "sparse")
    elif ns.model or ns.dtype or ns.device or ns.engine or ns.check:
        raise UsageError("--model, --dtype, --device, --engine and --check belong to "
                         "--backend model")
    result = calc(ns.expression, Launcher(ns.backend, model, check=ns.check))
    if ns.json:
        print(json.dumps(result.to_json()))
        return 0
    print(f"{result.canonical} = {result.value}")
    for x in result.launches:
        exact = "" if x.exact is None else ", exact"
        print(f"  {x.kernel:14} {x.what}: {x.prompt_tokens} prompt + {x.generated_tokens} "
              f"generated tokens on the {x.backend} backend ({x.seconds:.2f} s{exact})")
    return 0


def add_eval_parser(sub: Any) -> None:
    ev = sub.add_parser("chat-eval", help="score the chat on a question set: answered with the "
                                          "number the GPU computed")
    ev.add_argument("--set", required=True, choices=("normal", "advanced"), dest="set_name")
    ev.add_argument("--model", required=True, help="a build directory (python -m qgpu build)")
    ev.add_argument("--n", type=int, help="only the first N questions")
    ev.add_argument("--out", help="the report file (default: chat-eval-SET.json in the "
                                  "current directory; a .md summary is written beside it)")
    ev.add_argument("--dtype", choices=("float32", "bfloat16"))
    ev.add_argument("--device", default="cpu")
    ev.add_argument("--greedy", action="store_true", help="greedy decoding (default: the "
                                                          "model card's sampling)")
    ev.add_argument("--thinking", action="store_true", help="let the model think first")
    ev.add_argument("--seed", type=int, default=0)


def run_eval(ns: argparse.Namespace) -> int:
    from pathlib import Path

    from qgpu.chat.evaluate import run_evaluation

    out = Path(ns.out or f"chat-eval-{ns.set_name}.json")
    report = run_evaluation(ns.set_name, ns.model, out, n=ns.n, dtype=ns.dtype,
                            device=ns.device, greedy=ns.greedy, thinking=ns.thinking,
                            seed=ns.seed)
    print(report.summary())
    print(f"report: {out} and {out.with_suffix('.md')}")
    return 0
