"""The cached build pipeline: fetch a base checkpoint, compile a circuit, merge them.

Each stage is memoised in a diskcache (under `$QGPU_CACHE_DIR`, else `build/cache`). A stage's
key holds everything its output depends on: the pipeline version, a hash of the qgpu sources it
runs, the library versions, the base's identity (file hashes of a local directory, repo and
commit for the Hub), the circuit name and dtype. Artifacts are directories of files written to a
temp dir and renamed into place; the cache keeps only a small manifest (file sizes and mtimes),
so a missing or rewritten artifact is noticed and rebuilt. A diskcache.Lock with a re-check
after acquiring makes concurrent cold builds of one stage build it once.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import inspect
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import diskcache
import torch
from huggingface_hub import snapshot_download

from qgpu import tinybase
from qgpu.compiler import numerics as nx
from qgpu.errors import UsageError
from qgpu.merge import (
    CIRCUIT_LAYER_KEYS,
    CircuitWeights,
    circuit_layer_shapes,
    merge,
    read_text_config,
)

PIPELINE_VERSION = 1
"""Bump when a stage's output changes in a way its source hash cannot see."""

LOCK_EXPIRE_S = 3600
"""A lock left by a killed build expires after this; a live build that outlasts it only risks
one duplicate build (artifacts are renamed into place atomically)."""

TINY_BASE = {"hidden_size": 64, "num_layers": 4, "seed": 0}
"""The `--base tiny` checkpoint: the offline stand-in for Qwen3.5-2B (official layout)."""

HUB_PATTERNS = ["*.json", "*.safetensors", "*.jinja", "*.txt"]
"""Hub files a checkpoint needs: configs, weights, tokenizer, chat template."""

_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
_LIBRARIES = ("torch", "transformers", "safetensors", "tokenizers", "huggingface_hub")


def default_cache_dir() -> Path:
    """`$QGPU_CACHE_DIR`, else `build/cache` under the working directory."""
    return Path(os.environ.get("QGPU_CACHE_DIR") or Path("build") / "cache")


def null_circuit(base_config: dict) -> CircuitWeights:
    """A circuit that computes nothing useful: random weights on circuit dims only.

    It exists to test isolation: K is the smallest K >= 2 that makes d_base + K a perfect
    square; two GDN + MLP layers and four tokens, whose rows are [A, 1, random...] (anchor and
    unit dims of qgpu.compiler.numerics). Like any circuit it never writes the anchor dim, so
    its RMSNorms divide by exactly 2**ANCHOR_EXP.
    """
    d_base = base_config["hidden_size"]
    k = nx.pad_k(d_base, 2)
    anchors = nx.anchors(d_base + k, k)
    gen = torch.Generator().manual_seed(0)
    shapes = circuit_layer_shapes(base_config, k)
    layers = [
        {key: _null_tensor(key, shapes[key], gen) for key in CIRCUIT_LAYER_KEYS} for _ in range(2)
    ]
    for layer in layers:
        for key in ("linear_attn.out_proj.weight", "mlp.down_proj.weight"):
            layer[key][list(anchors)] = 0.0
    tokens = torch.randn(4, k, generator=gen)
    for dim, value in anchors.items():
        tokens[:, dim] = value
    tokens[:, nx.UNIT_DIM] = 1.0
    return CircuitWeights(
        k_dims=k,
        layers=layers,
        token_names=[f"<|gpu:null{i}|>" for i in range(4)],
        token_embeddings=tokens,
        final_norm=0.1 * torch.randn(k, generator=gen),
        metadata={"circuit": "null"},
    )


def _null_tensor(key: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    if key.endswith("A_log"):
        return torch.empty(shape).uniform_(1.0, 16.0, generator=gen).log_()
    if key.endswith(("dt_bias", "linear_attn.norm.weight")):
        return torch.ones(shape)
    if len(shape) == 1:
        return 0.1 * torch.randn(shape, generator=gen)
    return torch.randn(shape, generator=gen) / math.sqrt(math.prod(shape[1:]))


def demo_circuit(base_config: dict) -> CircuitWeights:
    """The 4-register demo machine (qgpu/circuit/demo.py)."""
    from qgpu.circuit.demo import compile_demo

    return compile_demo(base_config).weights()


def gpu_circuit(base_config: dict) -> CircuitWeights:
    """The SIMT machine (qgpu/circuit/gpu/, docs/ISA.md), compiled for the base's layer shapes."""
    from qgpu.circuit.gpu.compiled import compile_gpu

    return compile_gpu(base_config)


CIRCUITS: dict[str, Callable[[dict], CircuitWeights]] = {"gpu": gpu_circuit, "null": null_circuit,
                                                        "demo": demo_circuit}
"""Circuit name -> compiler entry point, called with the base's text config."""


@dataclass
class BuildResult:
    """Where the build put its outputs, and which stages came from the cache."""

    base: Path
    merged: Path
    stages: dict[str, dict] = field(default_factory=dict)


def build(
    base: str,
    out: Path,
    *,
    circuit: str = "gpu",
    dtype: str = "bfloat16",
    revision: str | None = None,
    cache_dir: Path | None = None,
) -> BuildResult:
    """Build `out/base` (the base used) and `out/merged` (base + compiled circuit).

    `base` is "tiny" (the offline stand-in), a local checkpoint directory, or a Hub model id
    (downloaded with huggingface_hub, at `revision` if given).
    """
    if circuit not in CIRCUITS:
        raise UsageError(f"unknown circuit {circuit!r}; known: {', '.join(sorted(CIRCUITS))}")
    if dtype not in ("bfloat16", "float32"):
        raise UsageError(f"dtype must be bfloat16 or float32, got {dtype!r}")
    kind = _base_kind(base)
    stages = Stages(Path(cache_dir or default_cache_dir()))
    result = BuildResult(base=Path(out) / "base", merged=Path(out) / "merged")

    base_key, produce_base = _base_stage(base, kind, revision, stages)
    base_dir = stages.run("base", base_key, produce_base, result.stages)

    def produce_merged(tmp: Path) -> None:
        weights = CIRCUITS[circuit](read_text_config(base_dir))
        merge(base_dir, weights, tmp, dtype=dtype)

    compiler = CIRCUITS[circuit]
    merge_key = {
        "sources": source_hash(
            [__name__, "qgpu.merge", compiler.__module__], [Path(inspect.getfile(compiler))]
        ),
        "base": _digest(base_key),
        "circuit": circuit,
        "dtype": dtype,
    }
    merged_dir = stages.run("merged", merge_key, produce_merged, result.stages)
    _publish(base_dir, result.base)
    _publish(merged_dir, result.merged)
    return result


def _base_kind(base: str) -> str:
    if base == "tiny":
        return "tiny"
    if Path(base).is_dir():
        return "dir"
    if _HUB_ID.match(base):
        return "hub"
    raise UsageError(f"--base {base!r}: not 'tiny', a directory, or a Hub model id")


def _base_stage(
    base: str, kind: str, revision: str | None, stages: Stages
) -> tuple[dict, Callable[[Path], None]]:
    """The base stage's key and producer for "tiny", a local directory or a Hub id."""
    if kind == "tiny":
        key = {
            "kind": "tiny",
            "params": TINY_BASE,
            "sources": source_hash(["qgpu.tinybase"], [tinybase.CHAT_TEMPLATE]),
        }
        return key, lambda tmp: tinybase.write_tiny_base(tmp, **TINY_BASE, cache_dir=stages.root)
    path = Path(base)
    if kind == "dir":
        key = {
            "kind": "dir",
            "files": stages.file_hashes(path),
            "sources": source_hash([], [Path(__file__)]),
        }
        return key, lambda tmp: _link_files(path, tmp)
    _progress(f"resolving {base} on the Hugging Face Hub")
    try:
        snapshot = Path(snapshot_download(base, revision=revision, allow_patterns=HUB_PATTERNS))
    except Exception as e:  # network, auth, missing repo: all the user's move
        raise UsageError(f"could not download {base}: {e}") from e
    commit = snapshot.name if re.fullmatch(r"[0-9a-f]{40}", snapshot.name) else None
    identity = {"commit": commit} if commit else {"files": stages.file_hashes(snapshot)}
    key = {"kind": "hub", "repo": base, **identity, "sources": source_hash([], [Path(__file__)])}
    return key, lambda tmp: _link_files(snapshot, tmp)


class Stages:
    """diskcache-memoised stages whose outputs are artifact directories under the cache root."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).absolute()
        self.artifacts = self.root / "artifacts"
        self.artifacts.mkdir(parents=True, exist_ok=True)
        self.cache = diskcache.Cache(str(self.root / "stages"), eviction_policy="none")

    def run(
        self,
        stage: str,
        key: dict,
        produce: Callable[[Path], None],
        report: dict[str, dict] | None = None,
    ) -> Path:
        """The artifact for (stage, key): from the cache if intact, else built once."""
        start = time.monotonic()
        full_key = {"stage": stage, "pipeline": PIPELINE_VERSION, "libs": _versions(), **key}
        digest = _digest(full_key)
        cache_key = f"{stage}:{digest}"
        path = self._valid(cache_key)
        hit = path is not None
        if not hit:
            with diskcache.Lock(self.cache, f"lock:{cache_key}", expire=LOCK_EXPIRE_S):
                path = self._valid(cache_key)
                hit = path is not None
                if not hit:
                    _progress(f"building {stage}")
                    path = self._build(stage, digest, full_key, produce, cache_key)
        seconds = time.monotonic() - start
        _progress(f"{stage}: {'cached' if hit else 'built'} ({seconds:.1f} s) {path}")
        if report is not None:
            report[stage] = {"cached": hit, "seconds": round(seconds, 3), "artifact": str(path)}
        return path

    def _valid(self, cache_key: str) -> Path | None:
        """The cached artifact if every file it was built with is still there, unchanged."""
        manifest = self.cache.get(cache_key)
        if manifest is None:
            return None
        path = self.root / manifest["path"]
        for name, (size, mtime) in manifest["files"].items():
            try:
                st = (path / name).stat()
            except OSError:
                return None
            if (st.st_size, st.st_mtime_ns) != (size, mtime):
                return None
        return path

    def _build(
        self, stage: str, digest: str, key: dict, produce: Callable[[Path], None], cache_key: str
    ) -> Path:
        target = self.artifacts / f"{stage}-{digest[:20]}"
        self.cache.delete(cache_key)
        _remove(target)
        tmp = Path(tempfile.mkdtemp(dir=self.artifacts, prefix=f".{stage}-"))
        tmp.chmod(0o755)
        try:
            produce(tmp)
        except BaseException:
            _remove(tmp)
            raise
        try:
            tmp.rename(target)
        except OSError:  # a build that outlived its lock got there first: use its artifact
            _remove(tmp)
            if not target.is_dir():
                raise
        files = {
            str(p.relative_to(target)): [p.stat().st_size, p.stat().st_mtime_ns]
            for p in sorted(target.rglob("*"))
            if p.is_file()
        }
        self.cache.set(cache_key, {"path": str(target.relative_to(self.root)), "files": files,
                                   "key": key})  # fmt: skip
        return target

    def file_hashes(self, directory: Path) -> dict[str, str]:
        """sha256 of each top-level file, memoised by (path, size, mtime, inode)."""
        hashes = {}
        for path in sorted(directory.iterdir()):
            if path.name.startswith(".") or not path.is_file():
                continue
            st = path.stat()
            memo = f"sha256:{path.resolve()}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
            value = self.cache.get(memo)
            if value is None:
                value = _sha256_file(path)
                self.cache.set(memo, value)
            hashes[path.name] = value
        return hashes


def _link_files(source: Path, target: Path) -> None:
    """Hard-link (else copy) the top-level files of `source` into `target`, following links."""
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        real = path.resolve()
        try:
            os.link(real, target / path.name)
        except OSError:
            shutil.copyfile(real, target / path.name)


def _publish(artifact: Path, dest: Path) -> None:
    """Make `dest` hold the artifact's files (hard links where possible), replacing it whole."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}-"))
    staging.chmod(0o755)
    _link_files(artifact, staging)
    old = dest.with_name(f".{dest.name}-old-{os.getpid()}")
    if dest.exists():
        dest.rename(old)
    staging.rename(dest)
    _remove(old)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def source_hash(modules: list[str], extra_files: Sequence[Path] = ()) -> str:
    """sha256 over the source files of `modules` and every qgpu module they import."""
    seen: dict[str, Path] = {}
    todo = list(modules)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ModuleNotFoundError, ValueError):  # `from qgpu.x import name`: not a module
            continue
        if spec is None or spec.origin is None:
            continue
        seen[name] = Path(spec.origin)
        todo += _qgpu_imports(name, Path(spec.origin), spec.submodule_search_locations is not None)
    digest = hashlib.sha256()
    for name in sorted(seen):
        digest.update(f"{name}\0".encode() + seen[name].read_bytes())
    for path in extra_files:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


def _qgpu_imports(module: str, path: Path, is_package: bool) -> list[str]:
    """The qgpu modules that `module`'s source imports (absolute or relative)."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}".rstrip(".")
            found.append(base)
            found += [f"{base}.{alias.name}" for alias in node.names]
    return [name for name in found if name == "qgpu" or name.startswith("qgpu.")]


def _versions() -> dict[str, str]:
    return {name: importlib.metadata.version(name) for name in _LIBRARIES}


def _digest(value: dict) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


def _progress(message: str) -> None:
    print(f"[qgpu build] {message}", file=sys.stderr, flush=True)
