"""Write-back frames keep the model's register files, predicates and memory equal to the
machine's: the launch the model must generate (tokens.expected_tokens) is fed after the prompt,
and every bank row is compared with the reference interpreter (weight-free evaluator, then the
compiled 2B-shaped layers)."""

import pytest

from qgpu import protocol as T
from qgpu.circuits.gpu import encoding, machine
from qgpu.compiler.evaluate import Evaluator
from qgpu.machine import limits, rom
from tests.circuits.helpers import expected_registers, launch_stream, value
from tests.compiler.helpers import MODES, assert_exact

KERNELS = ("dot", "warp_sum_down", "copy", "reduce_sum", "divergent_if_else", "atomic_cas",
           "matmul4_regs")  # fmt: skip
"""Uniform and per-lane values, several warps and thread blocks, shared memory, spills."""


@pytest.mark.parametrize("name", KERNELS)
def test_banks_equal_the_machine_after_the_launch(name: str) -> None:
    launch, run, stream = launch_stream(name)
    ev = Evaluator(machine.build(execute=False))
    for token in stream:
        ev.step(encoding.features(token))
    for (lane, w, r), v in expected_registers(launch, run).items():
        assert value(ev.memory[f"regs.{lane}"][w * limits.NUM_REGS + r][:32]) == v, (lane, w, r)
    live, rows, sent = rom.live_out(launch.program), [0] * limits.MAX_WARPS, {}
    for rec in run.trace:  # predicate rows: the last row a block with live predicates sent
        if T.sends_pred_row(rec, live[rec.block]):
            rows[rec.warp] = sent[rec.warp] = T.pred_row(rec.preds, rows[rec.warp])
    assert {w: value(ev.memory["preds"][w][:16]) for w in sent} == sent
    for rec in run.trace:  # shared and local words: the last value the launch wrote
        for space, addr, _ in rec.mem:
            row = T.memory_row(space, addr)
            if space == "shared":
                got = ev.memory["smem"][int(row[1:])]
            elif space == "local":
                lane, word = map(int, row[1:].split("."))
                got = ev.memory[f"lmem.{lane}"][rec.warp * limits.LOCAL_WORDS + word]
            else:
                continue
            last = [v2 for r2 in run.trace for sp2, a2, v2 in r2.mem
                    if (sp2, a2) == (space, addr) and (space != "local" or r2.warp == rec.warp)]
            assert value(got[:32]) == last[-1] & 0xFFFFFFFF, (space, addr)
    allocated = T.allocated_words(launch.allocations)
    gmem = ev.memory["gmem"]
    assert sorted(gmem) == allocated
    for word in allocated:
        row = gmem[word]
        assert value(row[:32]) == run.memory[word] & 0xFFFFFFFF and row[32] == 1, word


@pytest.mark.parametrize("dtype,step", MODES)
def test_compiled_layers_match_the_evaluator(dtype: str, step: bool) -> None:
    _, _, stream = launch_stream("shfl_broadcast")  # register, memory and predicate-row frames
    assert any(T.body(t).startswith("prow") for t in stream)
    assert_exact(machine.build(execute=False), [encoding.features(t) for t in stream], dtype, step)
