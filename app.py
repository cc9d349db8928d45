"""``python app.py``: serve the qgpu web app — a CUDA editor whose kernels run on the GPU
compiled into a Qwen3.5 model, with plotly views of the model's state after every token, and a
chat whose numbers come from launches on that GPU.

    python app.py                       # Qwen/Qwen3.5-2B if built or reachable, else tiny
    python app.py --base tiny           # build the tiny base with the GPU (cached), serve it
    python app.py --model build/gpu     # serve an existing build, no build step

docs/APP.md describes the app, docs/SPACE.md the Hugging Face Space.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

T0 = time.perf_counter()


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python app.py", description=__doc__.splitlines()[0])
    which = p.add_mutually_exclusive_group()
    which.add_argument("--base", default=os.environ.get("QGPU_BASE") or None,
                       help="tiny, a Hub model id or a checkpoint directory: build it with the "
                            "GPU circuit first (cached stages, progress in the terminal). "
                            "Default: Qwen/Qwen3.5-2B when a build of it exists or the Hub can "
                            "be reached, else tiny ($QGPU_BASE overrides)")
    which.add_argument("--model", default=os.environ.get("QGPU_MODEL") or None,
                       metavar="BUILD_DIR",
                       help="serve an existing build (python -m qgpu build --out BUILD_DIR), "
                            "no build step")
    p.add_argument("--dtype", choices=("float32", "bfloat16"),
                   default=os.environ.get("QGPU_DTYPE") or None,
                   help="model dtype (default: float32 for tiny, bfloat16 for a real base; "
                        "with --model: as built)")
    p.add_argument("--device", default=os.environ.get("QGPU_DEVICE", "cpu"),
                   help="torch device: cpu (default), cuda, cuda:1, ...")
    p.add_argument("--host", default=None,
                   help="address to serve on (default $GRADIO_SERVER_NAME, else 127.0.0.1; "
                        "0.0.0.0 for every interface)")
    p.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", 7860)))
    p.add_argument("--out", help="with --base: the build directory (default build/app/BASE-DTYPE)")
    p.add_argument("--cache-dir", help="build stage cache (default $QGPU_CACHE_DIR, else "
                                       "~/.cache/qgpu)")
    p.add_argument("--token-limit", type=int, default=None,
                   help="generated tokens before a launch is stopped (default 5000)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    ns = parse(argv)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # no telemetry
    from qgpu.app import host as H
    from qgpu.app.page import create_app, launch_options
    from qgpu.errors import QgpuError

    limits = {"token_limit": ns.token_limit} if ns.token_limit else {}
    try:
        if ns.model:
            host = H.ModelHost.load(ns.model, dtype=ns.dtype, device=ns.device, **limits)
        else:
            base, dtype = H.resolve_base(ns.base, ns.dtype)
            host = H.ModelHost.build_and_load(base, dtype=dtype, device=ns.device, out=ns.out,
                                              cache_dir=ns.cache_dir, **limits)
    except QgpuError as e:
        print(f"error ({e.kind}): {e.message}", file=sys.stderr)
        return 2
    demo = create_app(host)
    demo.launch(server_name=ns.host, server_port=ns.port, prevent_thread_lock=True,
                **launch_options())
    from qgpu.toolchain.cuda import serving_compiler

    print(f"[qgpu app] ready in {time.perf_counter() - T0:.1f} s (model loaded in "
          f"{host.gm.load_seconds:.1f} s): {demo.local_url}; pasted CUDA: "
          f"{serving_compiler()}", file=sys.stderr, flush=True)
    demo.block_thread()
    return 0


if __name__ == "__main__":
    sys.exit(main())
