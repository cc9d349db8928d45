"""The examples picker: at least 12 suite kernels and the cases the issue names, each with a
launch that fits the machine; every suite example gives its intent on the reference
interpreter, the fault example faults and the runaway one never ends."""

from __future__ import annotations

import pytest

from qgpu import protocol as T
from qgpu.app.examples import EXAMPLES, by_label
from qgpu.app.launches import Request, prepare
from qgpu.errors import LaunchError
from qgpu.machine.interp import run_program
from qgpu.suite.manifest import by_name


def test_the_picker_covers_what_the_issue_asks_for() -> None:
    kernels = {e.kernel for e in EXAMPLES}
    assert len([e for e in EXAMPLES if e.suite]) >= 12
    for name in ("dot", "matmul", "histogram", "reduce_sum", "scan_warp", "odd_even_sort",
                 "warp_sum_down", "vec_add"):
        assert name in kernels
    assert {e.expect for e in EXAMPLES} == {"result", "fault", "runaway"}
    assert any(e.launch_grid[0] * e.launch_grid[1] > 1 for e in EXAMPLES)
    assert len({e.label for e in EXAMPLES}) == len(EXAMPLES)
    assert by_label(EXAMPLES[3].label) is EXAMPLES[3]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.kernel)
def test_example_runs_as_labelled(example) -> None:
    f = example.fields()
    prep = prepare(Request.parse(f["source"], f["kernel"], f["grid"], f["block"], f["args"],
                                 f["dynamic_shared"]))
    launch = prep.launch
    run = lambda: run_program(launch.program, grid=launch.grid, block=launch.block,  # noqa: E731
                              params=launch.params, memory=launch.memory,
                              dynamic_shared=f["dynamic_shared"],
                              allocations=launch.allocations)
    if example.expect == "fault":
        with pytest.raises(LaunchError) as e:
            run()
        assert e.value.fault == "global_bounds"
        return
    if example.expect == "runaway":
        with pytest.raises(LaunchError, match="never ends"):
            run()
        return
    ref = run()
    from qgpu.driver import read_back

    got = read_back(prep.place, example.args, ref.memory)
    assert got == by_name(example.kernel).intent(example.args)
    # small enough to watch: seconds on a CPU
    assert len(T.expected_tokens(launch, ref.trace)) <= 400
