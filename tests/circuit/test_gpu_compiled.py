"""The GPU schedule's memo (qgpu/circuit/gpu/compiled.py): computed once per source and shape."""

from __future__ import annotations

import pytest

import qgpu.build
from qgpu.circuit.gpu import compiled
from qgpu.compiler.schedule import LayerShape


@pytest.fixture
def counted(tmp_path, monkeypatch):
    """gpu_schedule over a scheduler that records its calls, with the disk memo in tmp_path."""
    monkeypatch.setenv("QGPU_CACHE_DIR", str(tmp_path))
    calls: list[LayerShape] = []

    def scheduler(graph, shape: LayerShape) -> dict:
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
    monkeypatch.setattr(qgpu.build, "source_hash", lambda modules: "an edited circuit")
    assert compiled.gpu_schedule(LayerShape())["n"] == 3
