"""Schedule.residual_energy: what the anchor must swallow, against the compiled layers."""

from __future__ import annotations

import pytest
import torch

from qgpu.compiler.circuit_model import build_circuit_model, run_layers
from qgpu.compiler.evaluate import evaluate
from qgpu.compiler.schedule import schedule
from qgpu.compiler.weights import embed
from tests.compiler.graphs import frame, frame_graph, read, waiting_graph
from tests.compiler.helpers import SHAPE


def waiting_tokens() -> list[dict]:
    return [{"a": [(t * 7 + i) % 3 == 0 for i in range(32)], "s": [t % 2]} for t in range(6)]


@pytest.mark.parametrize("case", ["reads", "clears and packing"])
def test_the_energy_after_the_last_layer_is_the_compiled_residuals(case: str) -> None:
    """Read outputs on top of CARRIER, features cleared to 0 or CARRIER, packed copies: the
    last row of residual_energy is the sum of squares of the compiled model's final residual
    (all but the anchor), token by token."""
    if case == "reads":
        g, tokens = frame_graph(), frame(2, 0xDEADBEEF) + [read(2)] + frame(5, 77, read=2)
    else:
        g, tokens = waiting_graph(), waiting_tokens()
    sched = schedule(g, SHAPE)
    model, k = build_circuit_model(sched, "float32")
    residual = run_layers(model, torch.stack([embed(sched, k, k, t) for t in tokens]),
                          step=False).double()
    for i, values in enumerate(evaluate(sched.graph, tokens)):
        energy = sched.residual_energy(values)
        assert energy.shape == (2 * sched.layers + 1,)
        assert energy[-1] == float((residual[i, 1:] ** 2).sum()), (case, i)
        assert energy.min() >= 2  # the unit dims
