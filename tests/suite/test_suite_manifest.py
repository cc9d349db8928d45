"""The kernel suite's manifest agrees with its CUDA sources and with the machine's limits.

These checks need no GPU and no compiler (the PTX check runs only where nvcc is on PATH):
every launch must be accepted by the machine, and every intent must be a well-formed final
state of the launch, so later rungs of the verification ladder can compare against it blindly.
"""

from __future__ import annotations

import concurrent.futures
import copy
import pathlib
import re
import shutil
import subprocess

import numpy as np
import pytest

from qgpu.machine import limits
from qgpu.suite.manifest import INT_MAX, INT_MIN, SUITE, SuiteKernel, by_name, source_path

SEEDS = range(20)
MAX_ARRAY_WORDS = 120  # global memory is 128 words; the host keeps a few for itself
REQUIRED_TAGS = {
    "library", "teaching", "shared", "atomic", "shuffle", "divergence", "loop", "2d", "grid",
    "bits", "division", "mulhi", "spill",
}  # fmt: skip
REQUIRED_LIBRARY = {
    "add", "sub", "scale", "axpy", "mul", "dot", "matmul", "matvec", "transpose", "sum", "max",
    "min", "argmax", "argmin", "norm2", "histogram", "prefix_sum", "exclusive_scan", "reverse",
    "clamp", "abs", "count_if", "fill", "iota", "copy", "poly", "fib", "factorial", "gcd",
    "isqrt", "pow",
}  # fmt: skip
FORBIDDEN_PTX = re.compile(
    r"\.local|\bcall\b|\.const\b|\.f32|\.f64|\bvote\b|activemask"
    r"|(ld|st)\.global\.(u8|s8|u16|s16|u64|s64|b8|b16|b64)"
    r"|\b(ld|st)\.(u32|s32|b32)\b"  # generic (no state space) accesses
)
IDS = [k.name for k in SUITE]


def _signature(k: SuiteKernel) -> list[tuple[bool, bool]]:
    """(is_pointer, is_const) for each parameter, read from the kernel's declaration."""
    src = source_path(k).read_text()
    m = re.search(rf'extern "C" __global__ void {k.name}\s*\(([^)]*)\)', src)
    assert m, f'{k.name}.cu lacks `extern "C" __global__ void {k.name}(...)`'
    params = [p.strip() for p in m.group(1).split(",") if p.strip()]
    return [("*" in p, p.startswith("const ")) for p in params]


def _static_shared_words(k: SuiteKernel) -> int:
    """Words of `__shared__` arrays and scalars declared in the source (extern ones excluded)."""
    src = source_path(k).read_text()
    words = 0
    for m in re.finditer(r"(?<!extern )__shared__\s+(?:unsigned|int)\s+\w+((?:\[\d+\])*)\s*;", src):
        dims = [int(d) for d in re.findall(r"\[(\d+)\]", m.group(1))]
        words += int(np.prod(dims)) if dims else 1
    return words


def _array_len(a: object) -> int | None:
    if isinstance(a, dict):
        return a["zeros"]
    if isinstance(a, list):
        return len(a)
    return None


def test_suite_size_and_unique_names() -> None:
    assert len(SUITE) >= 64
    assert len(set(IDS)) == len(IDS)
    assert all(by_name(n).name == n for n in IDS)
    with pytest.raises(KeyError):
        by_name("no_such_kernel")


def test_every_source_file_is_in_the_suite() -> None:
    stems = {p.stem for p in source_path(SUITE[0]).parent.glob("*.cu")}
    assert stems == set(IDS)


def test_library_operations_unique_and_complete() -> None:
    ops = [k.library for k in SUITE if k.library is not None]
    assert len(set(ops)) == len(ops)
    assert REQUIRED_LIBRARY <= set(ops)
    for k in SUITE:
        assert (k.library is not None) == ("library" in k.tags), k.name


def test_required_tags_covered() -> None:
    covered = {t for k in SUITE for t in k.tags}
    assert REQUIRED_TAGS <= covered, REQUIRED_TAGS - covered


def _call_args(src: str, start: int) -> list[str]:
    """The top-level comma-separated arguments of the call whose '(' is at src[start]."""
    depth, args, cur = 0, [], ""
    for ch in src[start:]:
        if ch == "(":
            depth += 1
            if depth == 1:
                continue
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return [*args, cur.strip()]
        if ch == "," and depth == 1:
            args.append(cur.strip())
            cur = ""
        else:
            cur += ch
    raise AssertionError("unbalanced call")


@pytest.mark.parametrize("name", IDS)
def test_source_declares_kernel(name: str) -> None:
    k = by_name(name)
    src = source_path(k).read_text()
    assert f'extern "C" __global__ void {name}(' in src
    code = re.sub(r"//[^\n]*", "", src)
    assert "__constant__" not in code and "printf" not in code
    assert not re.search(r"\b(char|short|long|float|double)\b", code)
    assert not re.search(r"__(ballot|any|all)_sync|__activemask", code)
    for m in re.finditer(r"__shfl\w*_sync\(", code):
        args = _call_args(code, m.end() - 1)
        assert len(args) == 4 and args[3] in {"2", "4"}, f"shuffle width must be 2 or 4: {args}"
    for m in re.finditer(r"^(?!extern).*__device__.*\(", code, re.M):
        assert "__forceinline__" in m.group(0), "device helpers must be __forceinline__"


@pytest.mark.parametrize("name", IDS)
def test_launch_within_limits(name: str) -> None:
    k = by_name(name)
    (gx, gy), (bx, by) = k.grid, k.block
    assert min(gx, gy, bx, by) >= 1
    assert gx * gy <= limits.MAX_GRID_BLOCKS
    assert bx * by <= limits.MAX_THREADS
    assert k.dynamic_shared % limits.WORD_BYTES == 0
    shared = _static_shared_words(k) + k.dynamic_shared // limits.WORD_BYTES
    assert shared <= limits.SHARED_WORDS
    if "extern __shared__" in source_path(k).read_text():
        assert k.dynamic_shared > 0


@pytest.mark.parametrize("name", IDS)
def test_make_args_fit_and_deterministic(name: str) -> None:
    k = by_name(name)
    sig = _signature(k)
    assert len(sig) <= limits.PARAM_WORDS
    for seed in SEEDS:
        args = k.make_args(np.random.default_rng(seed))
        assert args == k.make_args(np.random.default_rng(seed)), "make_args is not seeded"
        assert len(args) == len(sig)
        words = 0
        for a, (is_ptr, _) in zip(args, sig, strict=True):
            if is_ptr:
                n = _array_len(a)
                assert n is not None and n >= 1, f"pointer parameter got {a!r}"
                words += n
                if isinstance(a, list):
                    assert all(type(v) is int and INT_MIN <= v <= INT_MAX for v in a)
            else:
                assert type(a) is int and INT_MIN <= a <= INT_MAX, f"scalar parameter got {a!r}"
        assert words <= MAX_ARRAY_WORDS


@pytest.mark.parametrize("name", IDS)
def test_intent_shape(name: str) -> None:
    k = by_name(name)
    sig = _signature(k)
    for seed in SEEDS:
        args = k.make_args(np.random.default_rng(seed))
        before = copy.deepcopy(args)
        want = k.intent(args)
        assert args == before, "intent mutated its arguments"
        assert len(want) == len(args)
        for a, w, (is_ptr, is_const) in zip(args, want, sig, strict=True):
            if not is_ptr:
                assert w == a, "scalars must come back unchanged"
                continue
            assert isinstance(w, list) and len(w) == _array_len(a)
            assert all(type(v) is int and INT_MIN <= v <= INT_MAX for v in w)
            if is_const:
                assert w == a, "a const input array must come back unchanged"


def _nvcc_ptx(path: pathlib.Path, out_dir: pathlib.Path) -> str:
    out = out_dir / f"{path.stem}.ptx"
    cmd = ["nvcc", "--ptx", "-arch=sm_75", "-O3", str(path), "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    return out.read_text()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_ptx_stays_in_the_supported_subset(tmp_path: pathlib.Path) -> None:
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        texts = list(pool.map(lambda n: _nvcc_ptx(source_path(by_name(n)), tmp_path), IDS))
    ptx = dict(zip(IDS, texts, strict=True))
    bad = {}
    for name, text in ptx.items():
        assert f".entry {name}(" in text
        hits = [line.strip() for line in text.splitlines() if FORBIDDEN_PTX.search(line)]
        if hits:
            bad[name] = hits[:3]
    assert not bad
