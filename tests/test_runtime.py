"""Launches on a merged model: ``python -m qgpu build --base tiny`` (the GPU circuit compiled for
the Qwen3.5-2B layer shapes, merged into the tiny base) loaded with stock transformers. The model
writes the whole launch itself, token for token what the reference machine says, and the results
read from its state equal the kernel's intent — with the interpreter unavailable, so the host
computes nothing.

The build writes ~15 GB (float32) and takes minutes, so this module builds and loads it once.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qgpu import cli, interp, runtime
from qgpu import tokens as T
from qgpu.driver import SUITE_DIR, compile_file, place_arguments
from qgpu.runtime import Divergence, GpuModel, make_launch, run_launch
from qgpu.suite import by_name, make_args, print_model_report, suite_module

KERNEL = "copy"  # three thread blocks, divergence at the bounds check, indexed loads and stores


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    """``python -m qgpu build --base tiny`` in its own process (its memory goes with it)."""
    out = tmp_path_factory.mktemp("gpu")
    subprocess.run([sys.executable, "-m", "qgpu", "build", "--base", "tiny", "--out", str(out),
                    "--dtype", "float32", "--cache-dir", str(out / "cache")], check=True)
    return out


@pytest.fixture(scope="module")
def gpu(build_dir) -> GpuModel:
    return GpuModel.load(build_dir)


def launch_of(name: str, seed: int = 0):
    k = by_name(name)
    kernel = suite_module(k).kernel(name)
    args = make_args(k, seed)
    place = place_arguments(kernel.ptx.params, args)
    return k, kernel, args, make_launch(kernel.program, k.grid, k.block, place, k.dynamic_shared)


def test_the_model_runs_a_launch_with_no_interpreter(gpu, monkeypatch) -> None:
    k, kernel, args, _ = launch_of(KERNEL)
    want = [list(map(int, a)) if isinstance(a, list) else a for a in k.intent(args)]

    def unavailable(*_a, **_k):
        raise AssertionError("the interpreter ran during a model launch")

    monkeypatch.setattr(interp, "run_program", unavailable)
    monkeypatch.setattr(interp._Launch, "run", unavailable)
    result = kernel.launch(grid=k.grid, block=k.block, args=args, backend="model", model=gpu)
    assert result.args == want
    assert result.model == {"prompt_tokens": 316, "generated_tokens": 57}


def test_cli_runs_the_dot_product_on_the_model_checked(gpu, build_dir, monkeypatch,
                                                       capsys) -> None:
    """The README's dot product through ``run --backend model --model BUILD --check --json``
    (the fixture's model stands in for the load, which the fixture did)."""
    monkeypatch.setattr(GpuModel, "load", lambda path, dtype=None: gpu
                        if Path(path) == build_dir and dtype is None else pytest.fail(path))
    status = cli.main(["run", str(SUITE_DIR / "dot.cu"), "--grid", "1", "--block", "4",
                       "--args", "[[1,2,3],[4,5,6],{\"zeros\":1},3]", "--backend", "model",
                       "--model", str(build_dir), "--check", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert status == 0, out
    assert out["args"][2] == [32] and out["exact"] is True
    assert (out["prompt_tokens"], out["generated_tokens"]) == (136, 31)


def test_the_suite_report_checks_every_token(gpu, capsys) -> None:
    """``python -m qgpu suite --model BUILD copy``: exact token for token, results equal."""
    assert print_model_report([KERNEL], "unused", gpu=gpu) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(KERNEL))
    assert line.split()[1:3] == ["316", "57"] and line.endswith("exact")


def test_check_reports_the_first_diverging_token(gpu) -> None:
    k, _, _, launch = launch_of(KERNEL)
    ref = interp.run_program(launch.program, grid=k.grid, block=k.block, params=launch.params,
                             memory=launch.memory, allocations=launch.allocations)
    expected = T.expected_tokens(launch, ref.trace)
    wrong = list(expected)
    i = next(i for i, t in enumerate(wrong) if T.body(t).startswith("val"))
    wrong[i] = T.name("end")  # a reference that disagrees at token i: reported there
    with pytest.raises(Divergence) as err:
        run_launch(gpu, launch, expected=wrong)
    assert err.value.index == i and f"generated token {i} is" in err.value.message


def test_a_runaway_launch_stops_at_the_token_limit(gpu) -> None:
    """A kernel that never ends: the step limit (generated tokens) stops it with a clear error
    naming the last block the model ran."""
    kernel = compile_file(Path(__file__).parent / "user_kernels" / "spin_wait.cu").kernel()
    with pytest.raises(runtime.LaunchError, match="did not end within 40 generated tokens"):
        kernel.launch(grid=(1, 1), block=(4, 1), args=[[0], {"zeros": 4}], backend="model",
                      model=gpu, step_limit=40)
