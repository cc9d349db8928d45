"""The package's layout: every stage imports only from the stages before it (docs/ARCHITECTURE.md,
the layout), no module imports itself back through others, and the wheel ships all of it."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import qgpu

PACKAGE = Path(qgpu.__file__).resolve().parent
ROOT = PACKAGE.parent
STAGES = [
    ("qgpu.errors", "qgpu.cache"),
    ("qgpu.machine",),
    ("qgpu.toolchain",),
    ("qgpu.protocol",),
    ("qgpu.compiler",),
    ("qgpu.circuits",),
    ("qgpu.model",),
    ("qgpu.runtime",),
    ("qgpu.driver",),
    ("qgpu.suite",),
    ("qgpu.cli", "qgpu.__main__", "qgpu.app", "qgpu.chat"),
]


def stage_of(module: str) -> int:
    for i, prefixes in enumerate(STAGES):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{module} belongs to no stage: add it to STAGES")


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The qgpu modules a source imports, at any depth (function-level too), leaving out
    ``if TYPE_CHECKING:`` blocks (annotations only)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return {m for m in found if m in known}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: imports(p, known) - {m} for m, p in known.items()}


def test_every_module_belongs_to_a_stage() -> None:
    for m in modules():
        if m != "qgpu":
            stage_of(m)


def test_stages_import_only_from_earlier_stages() -> None:
    bad = [f"{m} (stage {stage_of(m)}) imports {d} (stage {stage_of(d)})"
           for m, deps in graph().items() if m != "qgpu"
           for d in sorted(deps) if d != "qgpu" and stage_of(d) > stage_of(m)]
    assert not bad, "\n".join(bad)


def test_no_import_cycles() -> None:
    g = graph()
    # a package imports its own submodules to export them: that edge is no cycle
    edges = {m: {d for d in deps if not d.startswith(m + ".")} for m, deps in g.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(edges[m]):
            if state.get(d) == 1:
                cycle = stack[stack.index(d):] + [d]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)


def build_wheel(out: Path) -> Path:
    """The wheel of a copy of the checkout's packaging sources (a build in place would leave
    build/ and an egg-info in the checkout), built offline with the installed setuptools."""
    source = out / "source"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    for name in ("qgpu", "kernels"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-index", "-q", "-w", str(out), str(source)], check=True)
    (wheel,) = out.glob("qgpu-*.whl")
    return wheel


def test_wheel_ships_every_module_the_kernel_suite_and_the_data(tmp_path: Path) -> None:
    with zipfile.ZipFile(build_wheel(tmp_path)) as wheel:
        names = set(wheel.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = wheel.read(entry_points).decode()
    kernels = ROOT / "kernels"
    suite = [*kernels.glob("*.cu"), *kernels.glob("ptx/*.ptx")]
    assert suite
    want = {p.relative_to(ROOT).as_posix() for p in modules().values()}
    want |= {f"qgpu/kernels/{p.relative_to(kernels).as_posix()}" for p in suite}
    want |= {"qgpu/toolchain/cuda_clang.h", "qgpu/model/assets/chat_template.jinja",
             "qgpu/runtime/engine_native.c"}
    assert sorted(want - names) == []
    assert "qgpu = qgpu.cli:main" in scripts
