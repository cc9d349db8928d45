"""The anchors of the numerics contract (qgpu/compiler/numerics.py): at every width pad_k picks,
Qwen3.5's own RMSNorm divides a circuit token by exactly 2**ANCHOR_EXP."""

import math

import pytest
import torch
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5RMSNorm

from qgpu.compiler import numerics as nx


@pytest.mark.parametrize("hidden", [1089, 3050, 3074, 1066, 80])
def test_anchor_roots_sum_to_the_width(hidden: int) -> None:
    a, b = nx.anchor_roots(hidden)
    assert a * a + b * b == hidden and a >= b >= 0
    assert (b == 0) == (math.isqrt(hidden) ** 2 == hidden)


def test_pad_k_takes_a_second_anchor_only_with_an_energy_bound_it_meets() -> None:
    assert nx.pad_k(2048, 1001) == 1088  # 56^2: one anchor
    k = nx.pad_k(2048, 1001, 2.0**18)
    assert k == 1002 and nx.anchor_roots(2048 + k) == (41, 37)  # dim 1001 is the second anchor
    assert nx.energy_budget(2048 + k) == 2.0**18
    assert nx.pad_k(64, 1001, 2.0**18) == 1025  # a second anchor would swallow only 2**17
    k = nx.pad_k(0, 1000, 2.0**18)
    assert k > 1000 or nx.anchor_roots(k)[1] == 0  # never on a dim the circuit uses


def test_a_width_without_anchors_is_refused() -> None:
    with pytest.raises(ValueError, match="no exact anchors"):
        nx.anchor_roots(67)  # prime, 3 mod 4: no sum of two squares


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("hidden,d_base", [(3050, 2048), (1089, 64), (3074, 2048)])
def test_rmsnorm_divides_by_exactly_the_scale(hidden: int, d_base: int,
                                              dtype: torch.dtype) -> None:
    """Circuit tokens (base dims 0) whose other circuit dims hold just under the budget, spread
    at random (integers of magnitude up to 64): the norm's output is the input times
    2**-ANCHOR_EXP, bit for bit."""
    k = hidden - d_base
    budget = nx.energy_budget(hidden)
    gen = torch.Generator().manual_seed(hidden)
    rows = []
    for _ in range(64):
        x = torch.zeros(hidden)
        free = torch.randperm(k - 3, generator=gen) + d_base + 1
        energy, j = 0.0, 0
        for v in torch.randint(-64, 65, (k,), generator=gen).tolist():
            if j == len(free) or energy + v * v >= budget:
                break
            x[free[j]] = v
            energy, j = energy + v * v, j + 1
        for dim, value in nx.anchors(hidden, k).items():
            x[d_base + dim] = value
        rows.append(x)
    x = torch.stack(rows).to(dtype)
    norm = Qwen3_5RMSNorm(hidden)
    with torch.no_grad():
        assert torch.equal(norm(x), (x.float() * 2.0**-nx.ANCHOR_EXP).to(dtype))
        x[:, d_base + k - 2] = math.sqrt(2**20 * budget)  # far over the budget: not exact
        assert not torch.equal(norm(x), (x.float() * 2.0**-nx.ANCHOR_EXP).to(dtype))
