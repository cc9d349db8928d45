"""The cached build pipeline: fetch a base checkpoint, compile a circuit, merge them.

Each stage is memoised in a diskcache (under qgpu.cache.default_cache_dir()). A stage's
key holds everything its output depends on: the pipeline version, a hash of the qgpu sources it
runs, the library versions, the base's identity (file hashes of a local directory, repo and
commit for the Hub), the circuit name and dtype. Artifacts are directories of files written to a
temp dir and renamed into place; the cache keeps only a small manifest (file sizes and mtimes),
so a missing or rewritten artifact is noticed and rebuilt. A diskcache.Lock with a re-check
after acquiring makes concurrent cold builds of one stage build it once. A new artifact
replaces those it supersedes — the same stage of the same inputs built by other code (older
sources, pipeline or libraries) — once they have gone unused for an hour, so rebuilds after
upgrades do not pile up gigabytes of checkpoints. After building a stage (build(): once its
outputs are published, as files linked there free nothing when removed), the whole cache is kept
under its size limit (qgpu.cache.DEFAULT_CACHE_LIMIT_BYTES, $QGPU_CACHE_LIMIT): the least
recently used entries go first, never the ones this build uses (qgpu.cache.prune,
docs/CACHE.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import diskcache
from huggingface_hub import snapshot_download

from qgpu.cache import (
    IN_USE_S,
    LOCK_EXPIRE_S,
    cache_limit,
    default_cache_dir,
    format_size,
    prune,
    source_hash,
    stage_lock_key,
)
from qgpu.circuits import CIRCUITS
from qgpu.errors import UsageError
from qgpu.model import tinybase
from qgpu.model.merge import merge, read_text_config

PIPELINE_VERSION = 1
"""Bump when a stage's output changes in a way its source hash cannot see."""

# LOCK_EXPIRE_S (qgpu.cache): a lock left by a killed build expires after this; a live build
# that outlasts it only risks one duplicate build (artifacts are renamed into place atomically).

TINY_BASE = {"hidden_size": 64, "num_layers": 4, "seed": 0}
"""The `--base tiny` checkpoint: the offline stand-in for Qwen3.5-2B (official layout)."""

HUB_PATTERNS = ["*.json", "*.safetensors", "*.jinja", "*.txt"]
"""Hub files a checkpoint needs: configs, weights, tokenizer, chat template."""

PRUNE_AFTER_S = IN_USE_S
"""A superseded artifact is removed once unused this long (a checkout of the code that built it
may still be reading it)."""

VERSION_FIELDS = ("stage", "pipeline", "libs", "sources")
"""The parts of a stage's key that say which code built it, not what it was built from."""

_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
_LIBRARIES = ("torch", "transformers", "safetensors", "tokenizers", "huggingface_hub")


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
    stages.defer_limit = True  # until the outputs are published: files linked there free nothing
    result = BuildResult(base=Path(out) / "base", merged=Path(out) / "merged")

    base_key, produce_base = _base_stage(base, kind, revision, stages)
    base_dir = stages.run("base", base_key, produce_base, result.stages)

    def produce_merged(tmp: Path) -> None:
        weights = CIRCUITS[circuit](read_text_config(base_dir))
        merge(base_dir, weights, tmp, dtype=dtype)

    compiler = CIRCUITS[circuit]
    merge_key = {
        "sources": source_hash(
            [__name__, "qgpu.model.merge", compiler.__module__], [Path(inspect.getfile(compiler))]
        ),
        "base": _digest(base_key),
        "circuit": circuit,
        "dtype": dtype,
    }
    merged_dir = stages.run("merged", merge_key, produce_merged, result.stages,
                            inputs={"base": _inputs(base_key), "circuit": circuit, "dtype": dtype})
    _publish(base_dir, result.base)
    _publish(merged_dir, result.merged)
    stages.enforce_limit()
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
            "sources": source_hash(["qgpu.model.tinybase"], [tinybase.CHAT_TEMPLATE]),
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

    def __init__(self, root: Path, limit: int | None | Literal["env"] = "env") -> None:
        """`limit`: the cache's size limit in bytes, None for none; "env": cache_limit()
        ($QGPU_CACHE_LIMIT, else the default; a malformed value is a UsageError now)."""
        self.root = Path(root).absolute()
        self.limit = cache_limit() if limit == "env" else limit
        self.used: set[Path] = set()  # the artifacts this instance returned: never evicted
        self.defer_limit = False  # True: the caller calls enforce_limit() when it is done
        self.artifacts = self.root / "artifacts"
        self.artifacts.mkdir(parents=True, exist_ok=True)
        self.cache = diskcache.Cache(str(self.root / "stages"), eviction_policy="none")

    def run(
        self,
        stage: str,
        key: dict,
        produce: Callable[[Path], None],
        report: dict[str, dict] | None = None,
        inputs: dict | None = None,
    ) -> Path:
        """The artifact for (stage, key): from the cache if intact, else built once. `inputs`:
        what it is built from (default: the key without its code versions); building it
        removes the stage's artifacts of the same inputs that other code built."""
        start = time.monotonic()
        full_key = {"stage": stage, "pipeline": PIPELINE_VERSION, "libs": _versions(), **key}
        digest = _digest(full_key)
        cache_key = f"{stage}:{digest}"
        path = self._valid(cache_key)
        hit = path is not None
        if not hit:
            with diskcache.Lock(self.cache, stage_lock_key(cache_key), expire=LOCK_EXPIRE_S):
                path = self._valid(cache_key)
                hit = path is not None
                if not hit:
                    _progress(f"building {stage}")
                    inputs = _inputs(key) if inputs is None else inputs
                    path = self._build(stage, digest, full_key, produce, cache_key, inputs)
                    self._prune(stage, inputs, cache_key)
        self.used.add(path)
        if hit:
            os.utime(path)  # last used: a superseded artifact is kept while in use
        elif not self.defer_limit:
            self.enforce_limit()
        seconds = time.monotonic() - start
        _progress(f"{stage}: {'cached' if hit else 'built'} ({seconds:.1f} s) {path}")
        if report is not None:
            report[stage] = {"cached": hit, "seconds": round(seconds, 3), "artifact": str(path)}
        return path

    def enforce_limit(self) -> None:
        """Keep the cache under self.limit: remove the least recently used entries (never the
        artifacts this instance returned), and killed builds' leftovers (qgpu.cache.prune)."""
        result = prune(self.root, limit=self.limit, keep=self.used, index=self.cache)
        if result.removed:
            names = ", ".join(e.path.name for e in result.removed[:4])
            more = f" and {len(result.removed) - 4} more" if len(result.removed) > 4 else ""
            limit = "none" if self.limit is None else format_size(self.limit)
            n = f"{len(result.removed)} {'entry' if len(result.removed) == 1 else 'entries'}"
            _progress(f"cache: removed {n} ({names}{more}), freeing "
                      f"{format_size(result.freed)} (limit {limit}, least recently used first)")
        if result.over and self.limit is not None:
            _progress(f"cache: {format_size(result.left)} is over its limit of "
                      f"{format_size(self.limit)}: what is left cannot go now (this build's "
                      f"artifacts, stages being built, the schedules; python -m qgpu cache "
                      f"lists it)")

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
        self, stage: str, digest: str, key: dict, produce: Callable[[Path], None], cache_key: str,
        inputs: dict,
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
                                   "key": key, "inputs": inputs})  # fmt: skip
        return target

    def _prune(self, stage: str, inputs: dict, keep: str) -> None:
        """Remove the artifacts of `stage` built from `inputs` by other code, unused for
        PRUNE_AFTER_S (artifacts cached before inputs were recorded are left alone)."""
        now = time.time()
        for cache_key in list(self.cache.iterkeys()):
            if not str(cache_key).startswith(f"{stage}:") or cache_key == keep:
                continue
            manifest = self.cache.get(cache_key)
            if not isinstance(manifest, dict) or manifest.get("inputs") != inputs:
                continue
            path = self.root / manifest["path"]
            with contextlib.suppress(OSError):
                if now - path.stat().st_mtime < PRUNE_AFTER_S:
                    continue
            self.cache.delete(cache_key)
            _remove(path)

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


def _inputs(key: dict) -> dict:
    """What a stage is built from: its key without the code versions."""
    return {name: value for name, value in key.items() if name not in VERSION_FIELDS}


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
