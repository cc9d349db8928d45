"""The ``python -m qgpu run`` JSON contract and its error kinds."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qgpu.cli import main
from qgpu.toolchain.cuda import available_compilers

ROOT = Path(__file__).resolve().parent.parent
DOT = str(ROOT / "kernels" / "dot.cu")
DOT_ARGS = '[[1,2,3],[4,5,6],{"zeros":1},3]'


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert len(lines) == 1, out  # exactly one JSON object
    return code, json.loads(lines[0])


@pytest.mark.parametrize("backend", ["interp", "ptx"])
def test_run_dot_product(capsys, backend: str) -> None:
    code, out = run_json(capsys, "run", DOT, "--grid", "1", "--block", "4", "--args", DOT_ARGS,
                         "--backend", backend)
    assert code == 0
    assert out["kernel"] == "dot" and out["backend"] == backend
    assert out["args"] == [[1, 2, 3], [4, 5, 6], [32], 3]
    assert out["stats"]["warp_instructions"] > 0


def test_entry_point_prints_readable_summary() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "qgpu", "run", DOT, "--grid", "1", "--block", "4", "--args",
         DOT_ARGS], capture_output=True, text=True, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "arg 2: [32]" in proc.stdout


def write(tmp_path: Path, src: str) -> str:
    path = tmp_path / "k.cu"
    path.write_text(src)
    return str(path)


needs_compiler = pytest.mark.skipif(not available_compilers(), reason="no CUDA compiler")


@needs_compiler
@pytest.mark.parametrize("src,args,extra,kind,needle", [
    ('extern "C" __global__ void k(int* a) { a[0] = nope; }', "[[1]]", [], "compile", "nope"),
    ('extern "C" __global__ void k(float* a) { a[0] *= 0.1; }', "[[1]]", [], "unsupported",
     "line"),
    ('extern "C" __global__ void k(int* a) { a[threadIdx.x] = 1; }', "[[1]]", [], "launch",
     "out of bounds"),
    ('extern "C" __global__ void k(volatile int* a) { while (a[0] == 0) {} }', "[[0]]", [],
     "launch", "did not finish"),
    ('extern "C" __global__ void k(int* a) { a[0] = 1; }', "[[1]]", ["--block", "32"],
     "resource", "at most 16"),
    ('extern "C" __global__ void k(int* a) { a[0] = 1; }', "[[1], 2]", [], "usage", "1 param"),
    ('extern "C" __global__ void k(int* a) { a[0] = 1; }', "[[1]", [], "usage", "JSON"),
])
def test_errors_exit_2_with_kind(capsys, tmp_path, src, args, extra, kind, needle) -> None:
    argv = ["run", write(tmp_path, src), "--grid", "1", "--args", args]
    argv += extra if extra else ["--block", "4"]
    code, out = run_json(capsys, *argv)
    assert code == 2
    assert out["error"]["kind"] == kind, out
    assert needle in out["error"]["message"], out


@pytest.mark.parametrize("extra,needle", [
    (["--backend", "model"], "needs --model BUILD_DIR"),
    (["--check"], "belong to --backend model"),
    (["--backend", "model", "--model", str(ROOT / "kernels")], "not a qgpu build"),
])
def test_model_backend_usage_errors(capsys, extra: list[str], needle: str) -> None:
    """The model backend's options are checked before any model is loaded."""
    code, out = run_json(capsys, "run", DOT, "--grid", "1", "--block", "4", "--args", DOT_ARGS,
                         *extra)
    assert code == 2 and out["error"]["kind"] == "usage" and needle in out["error"]["message"]


def test_bad_dimensions_are_usage_errors(capsys) -> None:
    code, out = run_json(capsys, "run", DOT, "--grid", "x", "--block", "4", "--args", DOT_ARGS)
    assert code == 2 and out["error"]["kind"] == "usage"
    code, out = run_json(capsys, "run", DOT, "--block", "4", "--args", DOT_ARGS)
    assert code == 2 and out["error"]["kind"] == "usage" and "--grid" in out["error"]["message"]


COUNTS = """
__constant__ int step = 1;
__device__ int total;
extern "C" __global__ void count(int *out) {
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    out[t] = threadIdx.z * step;
    atomicAdd(&total, step);
}
"""


@pytest.mark.parametrize("backend", ["interp", "ptx"])
def test_3d_launch_and_symbols(capsys, tmp_path, backend: str) -> None:
    src = tmp_path / "count.cu"
    src.write_text(COUNTS)
    code, out = run_json(capsys, "run", str(src), "--grid", "1,1,2", "--block", "2,1,3",
                         "--args", '[{"zeros": 6}]', "--symbols", '{"step": 5}',
                         "--backend", backend)
    assert code == 0 and out["args"] == [[0, 0, 5, 5, 10, 10]]
    assert out["symbols"] == {"step": 5, "total": 60}
    assert "races" not in out and out["warnings"] == []  # atomics between blocks: no race


UNROLLED = """
extern "C" __global__ void unrolled(const int *in, int *out) {
    __shared__ int s[8];
    int t = threadIdx.x;
    s[t] = in[t];
    __syncthreads();
    volatile int *v = s;
    if (t < 4) { v[t] += v[t + 4]; v[t] += v[t + 2]; v[t] += v[t + 1]; }
    else v[t] = 0;  /* warp 1 overwrites what warp 0 read: nothing orders the two */
    if (t == 0) out[0] = v[0];
}
"""


@needs_compiler
@pytest.mark.parametrize("backend", ["interp", "ptx"])
def test_races_are_warnings_in_json_and_on_stderr(capsys, tmp_path, backend: str) -> None:
    argv = ["run", write(tmp_path, UNROLLED), "--grid", "1", "--block", "8", "--args",
            "[[1,2,3,4,5,6,7,8], {\"zeros\": 1}]", "--backend", backend]
    code, out = run_json(capsys, *argv)
    assert code == 0 and out["args"][1] == [36]  # the launch completes
    assert [(r["kind"], r["space"], r["word"], r["name"], r["between"], r["first"]["op"],
             r["first"]["warp"], r["first"]["thread"], r["second"]["op"], r["second"]["warp"],
             r["second"]["thread"]) for r in out["races"]] == \
        [("write-after-read", "shared", 4 + i, f"s[{4 + i}]", "warps", "read", 0, i, "write",
          1, 4 + i) for i in range(4)]
    assert out["races"][0]["first"]["where"] and out["races"][0]["second"]["where"]
    assert out["warnings"] == [r["message"] for r in out["races"]]
    assert "on a 32-lane GPU these threads may share a warp" in out["warnings"][0]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "arg 1: [36]" in captured.out
    lines = captured.err.splitlines()
    assert len(lines) == 4 and lines[0].startswith(
        "warning: data race (write-after-read) on shared word 4 (s[4]) in thread block 0: "
        "thread 4 (warp 1) wrote it at ")


def test_missing_file_is_a_usage_error(capsys) -> None:
    code, out = run_json(capsys, "run", "nope.cu", "--grid", "1", "--block", "1", "--args", "[]")
    assert code == 2 and out["error"]["kind"] == "usage"


def test_asm_prints_machine_program(capsys) -> None:
    assert main(["asm", DOT]) == 0
    out = capsys.readouterr().out
    assert out.startswith("// dot:") and "atom.global.add" in out


def test_map_prints_the_gpu_circuits_allocation_as_committed(capsys) -> None:
    """docs/gpu_allocation.txt is the exported map of the circuit as it is now (regenerate it
    with ``python -m qgpu map > docs/gpu_allocation.txt`` after changing the circuit)."""
    assert main(["map", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert len(m["layers"]) <= 45  # the target for the 2B shapes
    committed = (Path(__file__).parent.parent / "docs" / "gpu_allocation.txt").read_text()
    assert committed.splitlines()[0] == f"{len(m['layers'])} layers, {m['k_used']} residual dims"
    assert main(["map"]) == 0
    assert capsys.readouterr().out == committed
