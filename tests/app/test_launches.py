"""The launch service: requests checked against the app's limits with clear messages, every
error kind as the CLI reports it, the run_cuda JSON on the model, the per-token states (the
copied heads decode to exactly what ``GpuModel.machine_state`` reads live), stopping, and the
verify / diagnose comparisons with the reference interpreter."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from qgpu import protocol as T
from qgpu.app import launches as S
from qgpu.app.examples import DEFAULT, EXAMPLES
from qgpu.app.recording import Snapshot
from qgpu.errors import QgpuError

ONE = 'extern "C" __global__ void k(int* a) { a[threadIdx.x] = threadIdx.x; }'


def fields(kernel: str) -> dict:
    return next(e for e in EXAMPLES if e.kernel == kernel).fields()


def prepared(kernel: str) -> S.Prepared:
    f = fields(kernel)
    return S.prepare(S.Request.parse(f["source"], f["kernel"], f["grid"], f["block"],
                                     f["args"], f["dynamic_shared"]))


@pytest.mark.parametrize(("source", "kernel", "grid", "block", "args", "shared", "kind", "text"), [
    ("", None, "1", "4", "[]", 0, "usage", "empty"),
    ("x" * (S.MAX_SOURCE_CHARS + 1), None, "1", "4", "[]", 0, "usage", "at most 20,000"),
    (ONE, None, "1", "4", "[" * (S.MAX_ARGS_CHARS + 1), 0, "usage", "at most 8,000"),
    (ONE, None, "1", "4", "[[1, 2]", 0, "usage", "not valid JSON"),
    (ONE, None, "1", "4", '{"a": 1}', 0, "usage", "JSON list"),
    (ONE, None, "one", "4", "[[1]]", 0, "usage", "X or X,Y"),
    (ONE, None, "1", "32", "[[1]]", 0, "resource", "at most 16 per block"),
    (ONE, None, "17", "4", "[[1]]", 0, "resource", "at most 16 thread blocks"),
    (ONE, None, "1", "4", "[[1]]", 300, "usage", "0..256 bytes"),
    (ONE, None, "1", "4", "[[1], 2]", 0, "usage", "takes 1 parameters, 2 args"),
    (ONE, None, "1", "4", '[{"zeros": 300}]', 0, "resource", "global memory holds 127"),
    (ONE, "nope", "1", "4", "[[1]]", 0, "usage", "no kernel 'nope'"),
    (ONE + "\n" + ONE.replace(" k(", " j("), None, "1", "4", "[[1]]", 0, "usage", "pick one"),
    (ONE.replace(";", "", 1), None, "1", "4", "[[1]]", 0, "compile", "kernel.cu(1): error"),
    ("__global__ void k(float* a) { a[0] *= 1.5f; }", None, "1", "1", "[[1]]", 0,
     "unsupported", "no float unit"),
])
def test_requests_and_errors_say_what_is_wrong(source, kernel, grid, block, args, shared,
                                               kind, text) -> None:
    with pytest.raises(QgpuError) as e:
        S.prepare(S.Request.parse(source, kernel, grid, block, args, shared))
    assert e.value.kind == kind
    assert text in e.value.message


def test_request_accepts_api_forms() -> None:
    r = S.Request.parse(ONE, "", [2, 1], 4, [[0, 0, 0, 0]], "0")
    assert (r.grid, r.block, r.kernel, r.dynamic_shared) == ((2, 1), (4, 1), None, 0)
    assert S.Request.parse(ONE, "k", "2,2", "2x2", "[[1]]", 8.0).block == (2, 2)


def test_param_names_come_from_the_cuda_source() -> None:
    prep = prepared("dot")
    assert [p.label for p in prep.params] == ["a", "b", "out", "n"]
    assert prep.params[2].array == (9, 1) and prep.params[3].array is None


def test_run_cuda_json_is_the_clis(gpu) -> None:
    f = DEFAULT.fields()
    out = S.run_json(gpu, threading.Lock(), f["source"], f["kernel"], f["grid"], f["block"],
                     f["args"], f["dynamic_shared"], verify_run=True)
    assert out["args"] == [[1, 2, 3], [4, 5, 6], [32], 3]
    assert set(out) == {"kernel", "backend", "args", "stats", "prompt_tokens",
                        "generated_tokens", "engine", "decode_step", "seconds", "exact"}
    assert (out["backend"], out["prompt_tokens"], out["generated_tokens"], out["exact"]) \
        == ("model", 132, 30, True)
    assert S.run_json(gpu, threading.Lock(), "", None, "1", "1", "[]") \
        == {"error": {"kind": "usage", "message": "the CUDA source is empty"}}


def test_faults_and_runaways_come_back_as_launch_errors(gpu) -> None:
    lock = threading.Lock()
    f = fields("shift_left")
    out = S.run_json(gpu, lock, f["source"], f["kernel"], f["grid"], f["block"], f["args"])
    assert out["error"]["kind"] == "launch" and "global_bounds fault" in out["error"]["message"]
    assert "threadIdx=(3,0)" in S.diagnose(prepared("shift_left"))
    f = fields("spin")
    out = S.run_json(gpu, lock, f["source"], f["kernel"], f["grid"], f["block"], f["args"],
                     token_limit=40)
    assert out["error"]["kind"] == "launch" and "within 40 generated tokens" in \
        out["error"]["message"]


def test_streamed_states_are_what_machine_state_reads_after_each_token(gpu) -> None:
    from qgpu.runtime import run_launch

    prep = prepared("copy")  # 3 thread blocks, divergence, memory writes
    live: list[Snapshot] = []
    run_launch(gpu, prep.launch,
               on_token=lambda i, t, s: live.append(Snapshot.of(gpu.machine_state(s))))
    items = list(S.stream_launch(gpu, threading.Lock(), prep.launch, 5000))
    ticks, fin = items[:-1], items[-1]
    assert isinstance(fin, S.Finished) and fin.error is None
    assert [t.index for t in ticks] == list(range(len(fin.run.generated) - 1)) \
        == list(range(len(live)))
    for tick, want in zip(ticks, live, strict=True):
        for name in ("regs", "preds", "pcs", "exited", "ctas", "gmem", "smem"):
            assert np.array_equal(getattr(tick.state, name), getattr(want, name)), name
    assert [t.token for t in ticks] == fin.run.generated[:-1]
    assert int(ticks[-1].state.gmem[prep.params[1].array[0] + 9]) == 14  # dst[9]


def test_closing_the_stream_stops_the_launch(gpu) -> None:
    lock = threading.Lock()
    prep = prepared("spin")
    stream = S.stream_launch(gpu, lock, prep.launch, 5000)
    t0 = time.perf_counter()
    seen = [next(stream) for _ in range(5)]
    stream.close()
    assert [t.index for t in seen] == list(range(5))
    assert not lock.locked() and time.perf_counter() - t0 < 30
    assert not [t for t in threading.enumerate() if t.name.startswith("qgpu-")]


def test_verify_compares_and_names_the_first_difference() -> None:
    prep = prepared("dot")
    from qgpu.machine.interp import run_program

    launch = prep.launch
    ref = run_program(launch.program, grid=launch.grid, block=launch.block,
                      params=launch.params, memory=launch.memory,
                      allocations=launch.allocations)
    stream = [T.body(t) for t in T.expected_tokens(launch, ref.trace)]
    assert S.verify(prep, stream, ref.memory).exact is True
    bad = list(stream)
    bad[7] = "val:r5:1:9"
    v = S.verify(prep, bad, ref.memory)
    assert v.exact is False and v.message.startswith("generated token 7 is val:r5:1:9")
    memory = list(ref.memory)
    memory[9] = 31
    v = S.verify(prep, stream, memory)
    assert v.exact is False and "global word 9: the model holds 31" in v.message
    assert S.verify(prep, stream[:10], None, complete=False).exact is True
    assert S.verify(prep, stream[:10], None).exact is False
    assert S.verify(prep, stream, ref.memory).races == ()


RACY = """extern "C" __global__ void racy(int *out) {
    __shared__ int s[8];
    int t = threadIdx.x;
    s[t] = t;
    if (t >= 4) out[t - 4] = s[t - 4];  /* warp 1 reads warp 0's words: no barrier */
}"""


def test_verify_carries_the_replays_races_to_the_result_panel() -> None:
    from qgpu.app import panels
    from qgpu.machine.interp import run_program

    prep = S.prepare(S.Request.parse(RACY, None, "1", "8", '[{"zeros": 4}]'))
    launch = prep.launch
    ref = run_program(launch.program, grid=launch.grid, block=launch.block,
                      params=launch.params, memory=launch.memory,
                      allocations=launch.allocations)
    v = S.verify(prep, [T.body(t) for t in T.expected_tokens(launch, ref.trace)], ref.memory)
    assert v.exact is True
    assert [(r.kind, r.name, r.first.thread, r.second.thread) for r in v.races] == \
        [("read-after-write", f"s[{i}]", i, 4 + i) for i in range(4)]
    html = panels.races_html([r.message() for r in v.races])
    assert "4 data races" in html and "32-lane GPU" in html and "qg-warn" in html
    assert panels.races_html([]) == ""
    from types import SimpleNamespace

    from qgpu.runtime import ModelRun

    gm = SimpleNamespace(engine="sparse", decode_step="native", load_seconds=0.0)
    out = S.result_json(gm, prep, ModelRun(ref.memory, 0, []), v)
    assert out["exact"] is True and out["warnings"] == [r.message() for r in v.races]
    assert [r["word"] for r in out["races"]] == [0, 1, 2, 3]
