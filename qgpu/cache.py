"""Where qgpu keeps what it computes once: one cache directory for every memoised stage (the
build's base and merged checkpoints, the converted tokenizer, the GPU circuit's schedule), and
the source hash that keys a stage by the code that produced it."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path


def default_cache_dir() -> Path:
    """`$QGPU_CACHE_DIR`, else `$XDG_CACHE_HOME/qgpu`, else `~/.cache/qgpu`: one place per user,
    wherever the command runs (a checkout or an installed `qgpu`)."""
    if os.environ.get("QGPU_CACHE_DIR"):
        return Path(os.environ["QGPU_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "qgpu"


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
