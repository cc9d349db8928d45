"""The GPU schedule's memo (qgpu/circuits/gpu/compiled.py): computed once per source and shape."""

from __future__ import annotations

import pytest

import qgpu.model.build
from qgpu.circuits.gpu import compiled, encoding
from qgpu.compiler import numerics as nx
from qgpu.compiler.evaluate import Evaluator
from qgpu.compiler.schedule import LayerShape
from tests.circuits.helpers import launch_stream


@pytest.fixture
def counted(tmp_path, monkeypatch):
    """gpu_schedule over a scheduler that records its calls, with the disk memo in tmp_path."""
    monkeypatch.setenv("QGPU_CACHE_DIR", str(tmp_path))
    calls: list[LayerShape] = []

    def scheduler(graph, shape: LayerShape, *, layers: int) -> dict:
        assert layers == compiled.machine.LAYERS  # the circuit's layer budget
        calls.append(shape)
        return {"shape": shape, "n": len(calls)}

    monkeypatch.setattr(compiled, "schedule", scheduler)
    monkeypatch.setattr(compiled.machine, "build", lambda: None)
    compiled.pickled_schedule.cache_clear()
    yield calls
    compiled.pickled_schedule.cache_clear()  # never leave a stand-in where real callers look


def test_a_schedule_is_computed_once_and_read_back_from_disk(counted) -> None:
    first = compiled.gpu_schedule(LayerShape())
    again = compiled.gpu_schedule(LayerShape())  # the process's memo, as a copy of its own
    assert again == first and again is not first
    again["n"] = "changed by a caller"
    assert compiled.gpu_schedule(LayerShape()) == first  # which no other caller sees
    compiled.pickled_schedule.cache_clear()  # a new process: the disk memo
    assert compiled.gpu_schedule(LayerShape()) == first
    assert counted == [LayerShape()]


def test_another_shape_or_source_is_scheduled_afresh(counted, monkeypatch) -> None:
    compiled.gpu_schedule(LayerShape())
    compiled.gpu_schedule(LayerShape(intermediate=1024))
    assert counted == [LayerShape(), LayerShape(intermediate=1024)]
    compiled.pickled_schedule.cache_clear()
    monkeypatch.setattr(compiled, "source_hash", lambda modules: "an edited circuit")
    assert compiled.gpu_schedule(LayerShape())["n"] == 3


@pytest.mark.slow
def test_the_anchor_swallows_the_residual_of_every_token_of_a_launch() -> None:
    """The numerics contract: every circuit dim's square summed stays under the bound the
    merged width is padded for (compiled.RESIDUAL_ENERGY), and so under what the anchors
    swallow in float32 (numerics.energy_budget) at the tiny base's width and the 2B's (two
    anchors there), after every sublayer of every token of the dot product's launch."""
    sched = compiled.gpu_schedule(LayerShape())
    launch, run, stream = launch_stream("dot")
    ev = Evaluator(sched.graph)
    worst = max((float(e.max()), t) for t, token in enumerate(stream)
                for e in [sched.residual_energy(ev.step(encoding.features(token)))])
    assert 0 < worst[0] < compiled.RESIDUAL_ENERGY, worst
    widths = {}
    for base in (qgpu.model.build.TINY_BASE["hidden_size"], 2048):
        k = nx.pad_k(base, sched.k_used, compiled.RESIDUAL_ENERGY)
        widths[base] = nx.anchor_roots(base + k)
        assert worst[0] < nx.energy_budget(base + k), (base, k)
    assert widths[2048][1] > 0  # 2048 + K is no perfect square: two anchors
