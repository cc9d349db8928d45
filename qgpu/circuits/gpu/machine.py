"""The GPU circuit: the machine of docs/ISA.md as a circuit graph (docs/ARCHITECTURE.md §9).

Built stage by stage (the first five in banks.py); each stage adds features, memory banks
and rule groups to one graph:

* ``inputs`` — every token's input features (encoding.py);
* ``prompt`` — what the prompt loads: the ROM (one bits bank per slot and 24-bit part, row =
  block), parameter words, the launch shape; every write is a conv1d frame (qgpu/protocol);
* ``state`` — the current warp, its active lanes and the thread block (written by EXEC and CTA
  tokens, read by every token);
* ``writeback`` — VAL, PROW and MEM frames write the register files, predicate rows and memories
  that later blocks read (and from which the host reads results);
* ``fetch`` — an EXEC token reads its block's rows and decodes every slot's fields;
* the slots (execute.py, memory.py) — operands, units, faults, store records, the branch;
* control (control.py) — the lanes' pcs, the warp's next block, the scheduler's sweep;
* the outbox (outbox.py) — the outbox, the stream's positions and the token every pass chooses.
"""

from __future__ import annotations

from qgpu.circuits.gpu import control, outbox
from qgpu.circuits.gpu import execute as slots
from qgpu.circuits.gpu.banks import fetch, inputs, prompt, state, writeback
from qgpu.compiler.graph import Graph

LAYERS = 43
"""The layers the GPU circuit is scheduled into (``schedule(layers=...)``). It needs 42; the
43rd gives the flattening room to pull slot 3's multiply phase apart from the memory slots'
phases and the atomic chain (K 1148 against 1305 in 42 layers: docs/ARCHITECTURE.md §9)."""


def build(*, execute: bool = True) -> Graph:
    """Every stage of the machine, in one graph (`execute=False`: only the memory-side stages,
    for tests of the prompt and the write-back frames)."""
    g = Graph()
    inputs(g)
    prompt(g)
    state(g)
    writeback(g)
    fetch(g)
    if execute:
        slots.build_slots(g)
        control.build_control(g)
        outbox.build_outbox(g)
    return g
