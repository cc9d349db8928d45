"""Where qgpu keeps what it computes once: one cache directory for every memoised stage (the
build's base and merged checkpoints, the converted tokenizer, the GPU circuit's schedule, the
engine's derived forms and compiled step), the source hash that keys a stage by the code that
produced it, and the cache's housekeeping: `scan` lists what it holds, `prune` removes the least
recently used entries down to a size limit (DEFAULT_CACHE_LIMIT_BYTES, $QGPU_CACHE_LIMIT),
which every build stage enforces and `python -m qgpu cache prune` applies (docs/CACHE.md)."""

from __future__ import annotations

import ast
import contextlib
import datetime
import hashlib
import importlib.util
import json
import os
import re
import shutil
import stat
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qgpu.errors import UsageError


def default_cache_dir() -> Path:
    """`$QGPU_CACHE_DIR`, else `$XDG_CACHE_HOME/qgpu`, else `~/.cache/qgpu`: one place per user,
    wherever the command runs (a checkout or an installed `qgpu`)."""
    if os.environ.get("QGPU_CACHE_DIR"):
        return Path(os.environ["QGPU_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "qgpu"


def mark_used(path: Path) -> None:
    """Date a cached entry's last use (its mtime): the size limit removes least recently used
    entries first (``prune``)."""
    with contextlib.suppress(OSError):
        os.utime(path)


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


# --- what the cache holds, its size limit, pruning -------------------------------------------
#
# The cache directory's layout (each entry's writer keys it; this module only walks and removes):
#   artifacts/<stage>-<digest20>/  a build stage's output (model/build.py, Stages), its
#                                  manifest in stages/ under "<stage>:<digest>"
#   artifacts/.<stage>-*/          a stage being written (renamed into place when done)
#   stages/                        the stage index: a diskcache of manifests, locks, file hashes
#   tokenizer/<hash16>/            the converted tokenizer (model/tinybase.py)
#   engine/<hash24>.safetensors    the sparse engine's form of a checkpoint (runtime/engine.py)
#   native/engine_native-<h>.so    the engine's compiled step (runtime/engine_native.py)
#   schedules/                     the GPU circuit's schedules (circuits/gpu/compiled.py)

DEFAULT_CACHE_LIMIT_BYTES = 40 * 2**30
"""40 GiB of what only the cache holds (Scan.frees: a build directory's or the Hub cache's hard
links do not count). A Qwen3.5-2B build's stages in both dtypes fit even with no build directory
left linking them (merged 13.2 GB bfloat16 + 26.4 GB float32 = 36.9 GiB; the Hub base is links
into the Hub cache), a pile of rebuilds does not. $QGPU_CACHE_LIMIT overrides it."""

LIMIT_ENV = "QGPU_CACHE_LIMIT"

LOCK_EXPIRE_S = 3600
"""A stage's build lock left by a killed build expires after this, and an unfinished write
(`.stage-*`, `*.tmp`) this old is a killed build's leftover: pruning removes it."""

IN_USE_S = 3600
"""An entry used this recently may still be read by another process (qgpu/model/build.py keeps
a superseded artifact this long)."""

REMOVABLE = ("artifact", "partial", "engine", "native", "tokenizer")
"""The kinds the limit and `qgpu cache prune` remove; `schedules` goes with --all only; the
stage index (`index`) and anything qgpu did not write (`other`) are never removed."""

_UNITS = {"": 1, "b": 1, **{u: 1024 ** (i + 1) for i, u in enumerate("kmgt")},
          **{f"{u}ib": 1024 ** (i + 1) for i, u in enumerate("kmgt")},
          **{f"{u}b": 1000 ** (i + 1) for i, u in enumerate("kmgt")}}
_NO_LIMIT = ("none", "off", "unlimited")


def parse_size(text: str) -> int | None:
    """A size in bytes: "40G" (K, M, G, T and KiB ... TiB are powers of 1024; KB ... TB powers
    of 1000), "1.5GiB", "500M", "1000000"; None for no limit ("0", "none", "off",
    "unlimited"). ValueError for anything else."""
    t = str(text).strip().lower().replace(" ", "").replace("_", "")
    if t in _NO_LIMIT:
        return None
    m = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)([kmgt](?:i?b)?|b)?", t) if len(t) <= 32 else None
    if not m:
        raise ValueError(f"{str(text)[:40]!r} is not a size: bytes, or a number with K, M, G or "
                         f"T (20G is 20 GiB; KB, MB, GB, TB are powers of 1000), or 0 or none "
                         f"for no limit")
    number = float(m[1])
    if number == 0:
        return None
    value = round(number * _UNITS[m[2] or ""])
    if value < 1:
        raise ValueError(f"{str(text)[:40]!r} is less than a byte")
    return value


def cache_limit() -> int | None:
    """The cache's size limit in bytes: $QGPU_CACHE_LIMIT if set, else
    DEFAULT_CACHE_LIMIT_BYTES; None for no limit."""
    text = os.environ.get(LIMIT_ENV, "").strip()
    if not text:
        return DEFAULT_CACHE_LIMIT_BYTES
    try:
        return parse_size(text)
    except ValueError as e:
        raise UsageError(f"${LIMIT_ENV}: {e}") from None


def format_size(n: int) -> str:
    """1,536 -> "1.5 KiB" (binary units, as parse_size reads "K")."""
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f}".removesuffix(".0") + f" {unit}"
    raise AssertionError  # pragma: no cover


def stage_lock_key(cache_key: str) -> str:
    """The stage index key of the lock a build of `cache_key` holds (diskcache.Lock)."""
    return f"lock:{cache_key}"


@dataclass
class Entry:
    """One thing in the cache. `bytes`: its files' apparent size; `frees`: what removing it
    frees (files that no link outside the entry holds: a Hub base links the Hub cache's files,
    a build directory links its stages' files); `last_used`: its modification time, which a
    cache hit touches."""

    kind: str
    path: Path
    bytes: int
    frees: int
    last_used: float
    what: str
    key: str | None = None  # an artifact's key in the stage index
    info: dict = field(default_factory=dict)  # an artifact's stage, inputs and code versions
    inodes: dict = field(default_factory=dict, repr=False)  # (dev, ino) -> (size, nlink, links)

    def to_json(self, root: Path, now: float | None = None) -> dict:
        now = time.time() if now is None else now
        used = datetime.datetime.fromtimestamp(self.last_used, datetime.UTC)
        return {"kind": self.kind, "path": _relative(self.path, root), "bytes": self.bytes,
                "frees": self.frees, "last_used": used.isoformat(timespec="seconds"),
                "age_s": round(now - self.last_used), "what": self.what, **self.info}


@dataclass
class Scan:
    """Every entry of a cache directory; `bytes` and `frees` over all of them (a file linked
    from two entries counted once; `frees`: files held only by the cache)."""

    root: Path
    entries: list[Entry]
    bytes: int
    frees: int


def scan(root: Path, index: Any = None) -> Scan:
    """Walk the cache directory `root` (removing nothing): the entries listed at
    the top of this section, each with its sizes, last use and what it is. `index`: the stage
    index (a diskcache.Cache) if the caller has it open."""
    root = Path(root).absolute()
    found: list[Entry] = []
    if not root.is_dir():
        return Scan(root, [], 0, 0)
    manifests = _manifests(root, index)
    for child in sorted(root.iterdir()):
        name = child.name
        if name == "artifacts" and child.is_dir():
            for path in sorted(child.iterdir()):
                if path.name.startswith("."):
                    found.append(_entry("partial", path, "an unfinished stage (a running or "
                                        "killed build)"))
                else:
                    key, manifest = manifests.get(_relative(path, root), (None, None))
                    what, info = _describe_artifact(path.name, manifest)
                    found.append(_entry("artifact", path, what, key, info))
        elif name in ("engine", "native", "tokenizer") and child.is_dir():
            for path in sorted(child.iterdir()):
                found.append(_entry(*_classify(name, path)))
        elif name == "schedules":
            found.append(_entry("schedules", child, "the GPU circuit's schedules (a diskcache; "
                                "removed by prune --all only)"))
        elif name == "stages":
            found.append(_entry("index", child, f"the stage index: {len(manifests)} manifests, "
                                "locks, file hashes (never removed)"))
        else:
            found.append(_entry("other", child, "not qgpu's: left alone"))
    inodes: dict = {}
    for entry in found:
        for ino, (size, nlink, links) in entry.inodes.items():
            inodes[ino] = (size, nlink, inodes.get(ino, (0, 0, 0))[2] + links)
    total = sum(size for size, _, _ in inodes.values())
    frees = sum(size for size, nlink, links in inodes.values() if links >= nlink)
    return Scan(root, found, total, frees)


@dataclass
class Pruned:
    """What prune removed (or with dry_run would remove), what it left and why."""

    root: Path
    removed: list[Entry]
    skipped: list[tuple[Entry, str]]
    freed: int
    left: int  # what the cache alone holds afterwards (Scan.frees; with dry_run an estimate)
    after: Scan | None  # the cache after pruning (None with dry_run)
    limit: int | None
    dry_run: bool

    @property
    def over(self) -> bool:
        """Still over the limit: what is left is this build's, being built, or not removable
        by the limit (the stage index, the schedules, what qgpu did not write)."""
        return self.limit is not None and self.left > self.limit


def prune(
    root: Path,
    *,
    limit: int | None = None,
    older_than_s: float | None = None,
    everything: bool = False,
    dry_run: bool = False,
    keep: Iterable[Path] = (),
    index: Any = None,
    now: float | None = None,
) -> Pruned:
    """Remove from the cache `root`, least recently used first:

    * always, unfinished writes older than LOCK_EXPIRE_S (killed builds' leftovers);
    * with `limit`, entries until what the cache alone holds (Scan.frees) is at most `limit`
      bytes, skipping entries that free nothing (every file linked from elsewhere);
    * with `older_than_s`, every entry unused for that long;
    * with `everything`, every entry, and the schedules too.

    Never removed: the paths in `keep` (what the running build uses), an artifact whose stage
    is being built (its lock is held), an unfinished write younger than LOCK_EXPIRE_S, the stage
    index, anything qgpu did not write. Removing an artifact deletes its manifest first, under
    its stage's lock, so a concurrent build rebuilds it rather than reading a half-removed one.
    """
    root = Path(root).absolute()
    now = time.time() if now is None else now
    kept = {Path(p).absolute() for p in keep}
    own_index = index is None and (root / "stages").is_dir()
    if own_index:
        index = _open_index(root)
    try:
        before = scan(root, index)

        def removable(e: Entry) -> bool:
            if e.path in kept or (e.kind == "partial" and now - e.last_used < LOCK_EXPIRE_S):
                return False
            return e.kind in REMOVABLE or (everything and e.kind == "schedules")

        candidates = sorted((e for e in before.entries if removable(e)),
                            key=lambda e: (e.last_used, str(e.path)))
        chosen = [e for e in candidates if e.kind == "partial"]
        if everything:
            chosen = candidates
        else:
            if older_than_s is not None:
                chosen += [e for e in candidates
                           if e not in chosen and now - e.last_used >= older_than_s]
            if limit is not None:
                left = before.frees - sum(e.frees for e in chosen)
                for e in candidates:
                    if left <= limit:
                        break
                    if e not in chosen and e.frees > 0:
                        chosen.append(e)
                        left -= e.frees
        chosen.sort(key=lambda e: (e.last_used, str(e.path)))
        if dry_run:
            freed = sum(e.frees for e in chosen)
            return Pruned(root, chosen, [], freed, before.frees - freed, None, limit, True)
        removed, skipped = [], []
        for e in chosen:
            if _remove_entry(root, e, index):
                removed.append(e)
            else:
                skipped.append((e, "being built: its stage lock is held"))
        if index is not None:
            _drop_dangling(root, index)
        after = scan(root, index)
        return Pruned(root, removed, skipped, sum(e.frees for e in removed), after.frees, after,
                      limit, False)
    finally:
        if own_index:
            index.close()


def _open_index(root: Path) -> Any:
    try:
        import diskcache
    except ImportError:  # the stage index exists, so diskcache wrote it: a broken install
        raise UsageError(f"{root / 'stages'}: reading the stage index needs diskcache "
                         f"(pip install 'qgpu[model]')") from None
    return diskcache.Cache(str(root / "stages"), eviction_policy="none")


def _manifests(root: Path, index: Any) -> dict[str, tuple[str, dict]]:
    """The stage index's manifests by artifact path (relative to root): (key, manifest)."""
    if index is None:
        if not (root / "stages").is_dir():
            return {}
        with _open_index(root) as opened:
            return _manifests(root, opened)
    out = {}
    for key in list(index.iterkeys()):
        if not isinstance(key, str) or key.startswith(("lock:", "sha256:")):
            continue
        manifest = index.get(key)
        if isinstance(manifest, dict) and isinstance(manifest.get("path"), str):
            out[manifest["path"]] = (key, manifest)
    return out


def _entry(kind: str, path: Path, what: str, key: str | None = None,
           info: dict | None = None) -> Entry:
    """Measure `path` (a file, or a directory's files, links not followed)."""
    inodes: dict = {}
    try:
        st = path.lstat()
    except OSError:  # removed while we looked
        return Entry(kind, path, 0, 0, 0.0, what, key, info or {}, {})
    stats = [st] if not stat.S_ISDIR(st.st_mode) else []
    if stat.S_ISDIR(st.st_mode):
        for folder, _, files in os.walk(path):
            for name in files:
                with contextlib.suppress(OSError):
                    stats.append(os.lstat(os.path.join(folder, name)))
    for s in stats:
        if stat.S_ISREG(s.st_mode):
            ino = (s.st_dev, s.st_ino)
            inodes[ino] = (s.st_size, s.st_nlink, inodes.get(ino, (0, 0, 0))[2] + 1)
    size = sum(v[0] for v in inodes.values())
    frees = sum(v[0] for v in inodes.values() if v[2] >= v[1])
    return Entry(kind, path, size, frees, st.st_mtime, what, key, info or {}, inodes)


def _classify(folder: str, path: Path) -> tuple[str, Path, str]:
    name = path.name
    if name.startswith(".") or name.endswith(".tmp"):
        return "partial", path, "an unfinished write (a running or killed process)"
    if folder == "engine" and name.endswith(".safetensors"):
        source = _safetensors_metadata(path).get("checkpoint")
        if not source:
            return "engine", path, "the sparse engine's form of a checkpoint"
        gone = "" if Path(source).is_dir() else " (gone)"
        return "engine", path, f"the sparse engine's form of {source}{gone}"
    if folder == "native" and name.endswith(".so"):
        return "native", path, "the sparse engine's compiled decode step (engine_native.c)"
    if folder == "tokenizer" and path.is_dir():
        return "tokenizer", path, "the Qwen3.5 tokenizer in transformers' fast format"
    return "other", path, "not qgpu's: left alone"


def _safetensors_metadata(path: Path) -> dict:
    """A safetensors file's __metadata__ (its header only), {} if unreadable."""
    try:
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            if not 0 < size <= 1 << 26:
                return {}
            meta = json.loads(f.read(size)).get("__metadata__")
    except (OSError, ValueError, AttributeError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _describe_artifact(name: str, manifest: dict | None) -> tuple[str, dict]:
    """What an artifact is, from its manifest: the stage, what it was built from (base,
    circuit, dtype) and which code built it."""
    stage = name.rsplit("-", 1)[0]
    if manifest is None:
        return f"{stage}: no manifest (no build reads it)", {"stage": stage}
    key = manifest.get("key") if isinstance(manifest.get("key"), dict) else {}
    inputs = manifest.get("inputs") if isinstance(manifest.get("inputs"), dict) else {}
    stage = key.get("stage", stage)
    if stage == "base":
        what = f"base: {_base_text(inputs)}"
    elif stage == "merged":
        what = (f"merged: {inputs.get('circuit', '?')} circuit, {inputs.get('dtype', '?')}, on "
                f"{_base_text(inputs.get('base') or {})}")
    else:
        what = f"{stage}: {json.dumps(inputs, sort_keys=True, default=str)[:80]}"
    code = {k: key[k] for k in ("pipeline", "libs", "sources") if k in key}
    if code:
        digest = hashlib.sha256(json.dumps(code, sort_keys=True, default=str).encode())
        digest = digest.hexdigest()
        what += f" (code {digest[:8]})"
    return what, {"stage": stage, "inputs": inputs, **code}


def _base_text(inputs: object) -> str:
    if not isinstance(inputs, dict):
        return json.dumps(inputs, sort_keys=True, default=str)[:80]
    kind = inputs.get("kind")
    if kind == "tiny":
        return "the tiny base"
    if kind == "hub":
        commit = inputs.get("commit")
        files = inputs.get("files") or {}
        return f"{inputs.get('repo')}@{str(commit)[:7]}" if commit else \
            f"{inputs.get('repo')} ({len(files)} files)"
    if kind == "dir":
        return f"a local directory ({len(inputs.get('files') or {})} files)"
    return json.dumps(inputs, sort_keys=True, default=str)[:80] if inputs else "?"


def _remove_entry(root: Path, e: Entry, index: Any) -> bool:
    """Remove one entry; an artifact under its stage's lock, its manifest first. False when
    the lock is held (the stage is being built)."""
    key = e.key
    if e.kind == "artifact" and key is None and index is not None:  # a build's, just renamed?
        key = _manifests(root, index).get(_relative(e.path, root), (None, None))[0]
    if e.kind != "artifact" or key is None or index is None:
        _rmtree(e.path)
        return True
    lock = stage_lock_key(key)
    if not index.add(lock, None, expire=LOCK_EXPIRE_S, retry=True):
        return False
    try:
        manifest = index.get(key)
        if isinstance(manifest, dict) and manifest.get("path") == _relative(e.path, root):
            index.delete(key, retry=True)
        _rmtree(e.path)
    finally:
        index.delete(lock, retry=True)
    return True


def _drop_dangling(root: Path, index: Any) -> None:
    """Delete manifests whose artifact directory is gone (removed by hand), under its lock."""
    for rel, (key, _) in _manifests(root, index).items():
        if (root / rel).exists():
            continue
        lock = stage_lock_key(key)
        if index.add(lock, None, expire=LOCK_EXPIRE_S, retry=True):
            try:
                manifest = index.get(key)
                if isinstance(manifest, dict) and manifest.get("path") == rel \
                        and not (root / rel).exists():
                    index.delete(key, retry=True)
            finally:
                index.delete(lock, retry=True)


def _rmtree(path: Path) -> None:
    """Remove a file or directory; already gone is fine (another prune got there first)."""
    if not (path.is_dir() and not path.is_symlink()):
        path.unlink(missing_ok=True)
        return
    for _ in range(3):
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:  # a file another prune removed first: go again
            if not path.exists():
                return
    shutil.rmtree(path)


def _relative(path: Path, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)
