"""Launches on the compiled GPU circuit (Qwen3.5-2B layer shapes, stock transformers layers):
the model writes the whole launch itself, token for token what the reference machine says, and
the results read from its state equal the kernel's intent — with the interpreter unavailable, so
the host computes nothing.

Compiling the circuit takes minutes and about 14 GB (float32), so this module compiles it once.
"""

import pytest

from qgpu import interp
from qgpu import tokens as T
from qgpu.driver import place_arguments, read_back
from qgpu.runtime import Divergence, GpuModel, run_launch
from qgpu.suite import by_name, make_args, print_model_report, suite_module

KERNEL = "copy"  # three thread blocks, divergence at the bounds check, indexed loads and stores


@pytest.fixture(scope="module")
def gpu() -> GpuModel:
    return GpuModel.compile("float32")


def launch_of(name: str, seed: int = 0):
    k = by_name(name)
    kernel = suite_module(k).kernel(name)
    args = make_args(k, seed)
    place = place_arguments(kernel.ptx.params, args)
    prog = kernel.program
    launch = T.Launch(prog, k.grid, k.block, place.params, place.memory, place.allocations,
                      prog.shared_bytes(k.dynamic_shared) // 4)
    return k, args, place, launch


def test_the_model_runs_a_launch_with_no_interpreter(gpu, monkeypatch) -> None:
    k, args, place, launch = launch_of(KERNEL)
    want = [list(map(int, a)) if isinstance(a, list) else a for a in k.intent(args)]

    def unavailable(*_a, **_k):
        raise AssertionError("the interpreter ran during a model launch")

    monkeypatch.setattr(interp, "run_program", unavailable)
    monkeypatch.setattr(interp._Launch, "run", unavailable)
    run = run_launch(gpu, launch)
    assert run.generated[-1] == T.name("end")
    assert read_back(place, args, run.memory) == want


def test_the_suite_report_checks_every_token(gpu, capsys) -> None:
    """``python -m qgpu suite --model float32 copy``: exact token for token, results equal."""
    assert print_model_report([KERNEL], "float32", gpu) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(KERNEL))
    assert line.split()[1:3] == ["316", "57"] and line.endswith("exact")


def test_check_reports_the_first_diverging_token(gpu) -> None:
    k, args, place, launch = launch_of(KERNEL)
    ref = interp.run_program(launch.program, grid=k.grid, block=k.block, params=place.params,
                             memory=place.memory, allocations=place.allocations)
    expected = T.expected_tokens(launch, ref.trace)
    wrong = list(expected)
    i = next(i for i, t in enumerate(wrong) if T.body(t).startswith("val"))
    wrong[i] = T.name("end")  # a reference that disagrees at token i: reported there
    with pytest.raises(Divergence) as err:
        run_launch(gpu, launch, expected=wrong)
    assert err.value.index == i and f"generated token {i} is" in err.value.message
