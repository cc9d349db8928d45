"""The one model the app serves: which base to build (or which build to serve), building it with
the cached pipeline (``qgpu.model.build``), loading it (``qgpu.runtime.GpuModel``), and what the
page's header says about it. Every session shares this model: up to MAX_CONCURRENT_LAUNCHES
launches run on it at once, taking its decode steps in turn (``runtime.Turns``: a fair share),
at most MAX_LAUNCHES_PER_SESSION of them from one session; the page's events queue beyond that
on one concurrency id, and the page shows the queue position.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qgpu.app import space
from qgpu.app.launches import Finished, Tick, execute, stream_launch
from qgpu.errors import ResourceError

if TYPE_CHECKING:
    from qgpu import protocol as T
    from qgpu.runtime import GpuModel, ModelRun

DEFAULT_HUB_BASE = "Qwen/Qwen3.5-2B"
TOKEN_LIMIT = 5_000
"""Generated tokens a launch may take before the app stops it (every suite kernel fits; a
runaway loop costs about a minute here). The page lets a user raise it up to MAX_TOKEN_LIMIT."""
MAX_TOKEN_LIMIT = 20_000
MAX_CONCURRENT_LAUNCHES = 8
"""Launches on the model at once (the rest wait in Gradio's queue, their position shown): each
costs ~2 KB of state per token and a thread; their steps take turns."""
MAX_LAUNCHES_PER_SESSION = 2
"""Launches one session (a browser tab, an API client) may have running at once; more is a
ResourceError, so one user cannot take every slot."""


def _slug(base: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "--", base.strip("/")).strip("-") or "base"


def default_build_dir(base: str, dtype: str) -> Path:
    """Where the app puts the build of `base` (the project's build/ folder)."""
    name = Path(base).name if Path(base).is_dir() else base
    return Path("build") / "app" / f"{_slug(name)}-{dtype}"


def default_dtype(base: str) -> str:
    """float32 for the tiny base (its build is what the tests use), bfloat16 for a real base
    (half the memory and disk; every launch is exact in both)."""
    return "float32" if base == "tiny" else "bfloat16"


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face Hub answers (never tried when HF_HUB_OFFLINE is set)."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    try:
        from huggingface_hub import HfApi

        HfApi().model_info(DEFAULT_HUB_BASE, timeout=timeout)
        return True
    except Exception:  # noqa: BLE001 — offline, DNS, proxy, rate limit: all "not reachable"
        return False


def resolve_base(base: str | None, dtype: str | None,
                 reachable: Callable[[], bool] = hub_reachable) -> tuple[str, str]:
    """(base, dtype) to build: the given base, else Qwen/Qwen3.5-2B when a build of it exists
    here or the Hub can be reached, else the tiny base."""
    if base:
        return base, dtype or default_dtype(base)
    hub_dtype = dtype or default_dtype(DEFAULT_HUB_BASE)
    if _is_build(default_build_dir(DEFAULT_HUB_BASE, hub_dtype)) or reachable():
        return DEFAULT_HUB_BASE, hub_dtype
    return "tiny", dtype or default_dtype("tiny")


def _is_build(path: Path) -> bool:
    return (path / "merged" / "qgpu_circuit.json").is_file()


@dataclass
class ModelHost:
    """The loaded model, what it is, and the lock its launches take."""

    gm: GpuModel
    base: str  # what was asked for: tiny, a Hub id, a directory, or the served build
    tiny: bool
    build_dir: Path
    build_seconds: float | None = None  # None: an existing build was served
    token_limit: int = TOKEN_LIMIT
    max_token_limit: int = MAX_TOKEN_LIMIT
    max_concurrent: int = MAX_CONCURRENT_LAUNCHES
    per_session: int = MAX_LAUNCHES_PER_SESSION
    slots: threading.BoundedSemaphore = field(init=False, repr=False)
    _running: Counter = field(default_factory=Counter, repr=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.slots = threading.BoundedSemaphore(self.max_concurrent)

    @contextlib.contextmanager
    def session_launch(self, key: str) -> Iterator[None]:
        """Count a launch of session `key` while it runs; a ResourceError beyond
        ``per_session`` at once."""
        with self._guard:
            if self._running[key] >= self.per_session:
                raise ResourceError(f"this session already has {self._running[key]} launches "
                                    f"running; at most {self.per_session} at once (wait for one "
                                    f"to end, or stop it)")
            self._running[key] += 1
        try:
            yield
        finally:
            with self._guard:
                self._running[key] -= 1
                if not self._running[key]:
                    del self._running[key]

    @classmethod
    def load(cls, build_dir: str | Path, *, dtype: str | None = None, device: str = "cpu",
             base: str | None = None, build_seconds: float | None = None,
             **limits: Any) -> ModelHost:
        from qgpu.runtime import GpuModel

        gm = GpuModel.load(build_dir, dtype, device)
        meta = gm._loaded["meta"]
        return cls(gm, base or str(build_dir), _tiny(meta), Path(build_dir), build_seconds,
                   **limits)

    @classmethod
    def build_and_load(cls, base: str, *, dtype: str, device: str = "cpu",
                       out: str | Path | None = None, cache_dir: str | Path | None = None,
                       **limits: Any) -> ModelHost:
        """Build `base` with the GPU circuit (cached stages; progress on stderr), then load."""
        from qgpu.model.build import build

        out = Path(out) if out else default_build_dir(base, dtype)
        print(f"[qgpu app] building {base} with the GPU circuit ({dtype}) into {out}",
              file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        build(base, out, circuit="gpu", dtype=dtype,
              cache_dir=Path(cache_dir) if cache_dir else None)
        seconds = time.perf_counter() - t0
        print(f"[qgpu app] build ready in {seconds:.1f} s; loading", file=sys.stderr, flush=True)
        return cls.load(out, dtype=dtype, device=device, base=base, build_seconds=seconds,
                        **limits)

    # --- what the page says about it ---------------------------------------------------------

    @property
    def meta(self) -> dict:
        return self.gm._loaded["meta"]

    def info(self) -> dict[str, Any]:
        """The header's facts: base, circuit layers, K, dtype, engine, device."""
        meta = self.meta
        lo, hi = meta["circuit_dims"]
        first, last = meta["circuit_layers"]
        base_layers = meta.get("base_layers", [last, last])
        return {
            "base": "tiny" if self.tiny and self.base in ("tiny", str(self.build_dir))
                    else self.base,
            "tiny": self.tiny,
            "base_hidden": meta["base"]["hidden_size"],
            "base_layers": base_layers[1] - base_layers[0],
            "circuit_layers": last - first,
            "k": hi - lo,
            "k_used": meta["circuit"].get("k_used"),
            "hidden": meta["hidden_size"],
            "dtype": self.gm.dtype,
            "engine": self.gm.engine,
            "decode_step": self.gm.decode_step,
            "device": str(self.gm.device),
            "resident_mb": round(self.gm.sparse.resident_bytes() / 2**20, 1)
                           if self.gm.engine == "sparse" else None,
            "load_seconds": round(self.gm.load_seconds, 1),
            "build_seconds": None if self.build_seconds is None else round(self.build_seconds, 1),
            "path": str(self.gm.path),
        }

    def header_markdown(self) -> str:
        i = self.info()
        base = ("tiny (offline stand-in: random weights, the Qwen3.5-2B's layer shapes)"
                if i["tiny"] else i["base"])
        k = f"K = {i['k']}" + (f" ({i['k_used']} used)" if i["k_used"] else "")
        engine = f"{i['engine']} engine" + (
            f" ({i['resident_mb']} MB resident, {i['decode_step']} decode step)"
            if i["resident_mb"] is not None else "")
        return (f"**Loaded:** base `{base}` · **{i['circuit_layers']} circuit layers** in front of "
                f"{i['base_layers']} base layers · {k} circuit dims (hidden "
                f"{i['base_hidden']} + {i['k']} = {i['hidden']}) · **{i['dtype']}** · {engine} · "
                f"device `{i['device']}` · loaded in {i['load_seconds']} s")

    def banner_markdown(self) -> str | None:
        if not self.tiny:
            return None
        return ("**This is the tiny base.** Its weights are random, so its *text* is random; the "
                "GPU compiled into it is exact on any base, so every launch here is as exact as "
                "on Qwen3.5-2B. To serve the real model: `python app.py --base "
                f"{DEFAULT_HUB_BASE}` (downloads the checkpoint and builds it once; the stages "
                "are cached).")

    # --- launches ----------------------------------------------------------------------------

    def stream(self, launch: T.Launch, token_limit: int) -> Iterator[Tick | Finished]:
        return _stream_on_gpu(self, launch, token_limit)

    def execute(self, launch: T.Launch, token_limit: int) -> ModelRun:
        return _execute_on_gpu(self, launch, token_limit)


def _tiny(meta: dict) -> bool:
    from qgpu.model.build import TINY_BASE

    base = meta.get("base", {})
    return (base.get("hidden_size") == TINY_BASE["hidden_size"]
            and base.get("num_layers") == TINY_BASE["num_layers"])


@space.on_gpu(duration=120)
def _stream_on_gpu(host: ModelHost, launch: T.Launch, token_limit: int) \
        -> Iterator[Tick | Finished]:
    yield from stream_launch(host.gm, host.slots, launch, token_limit)


@space.on_gpu(duration=120)
def _execute_on_gpu(host: ModelHost, launch: T.Launch, token_limit: int) -> ModelRun:
    return execute(host.gm, host.slots, launch, token_limit)
