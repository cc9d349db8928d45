"""The ROM image the model loads: one row per block slot, and what each block leaves live.

The model executes one machine block of one warp per EXEC token; everything a block writes that
a later block may read has to be carried back down to the early layers by generated tokens
(docs/ARCHITECTURE.md, section 9). Which registers and predicates that is, is a static property
of the program — a liveness analysis the host does at compile time, as NVRTC would — so the
terminator row of every block carries its live-out masks and the model writes back only those.

Row layout (each row is one GDN memory word, loaded in 24-bit parts):
* slots 0..3: the instruction words of docs/ISA.md (63 bits; an empty slot is word 0, which is
  ``add r0, r0, r0``, a no-op);
* slot 4: terminator word (19 bits) | live-out registers r1..r15 (bits 19..33) | live-out
  predicates p0..p3 (bits 34..37).
"""

from __future__ import annotations

from dataclasses import dataclass

from qgpu.machine import limits
from qgpu.machine.isa import (
    TERM_BITS,
    Block,
    Program,
    encode_instr,
    encode_term,
)
from qgpu.machine.liveness import machine_liveness

SLOTS = limits.BLOCK_SLOTS + 1  # instruction slots and the terminator row
TERM_SLOT = limits.BLOCK_SLOTS
PART_BITS = 24  # a ROM row is loaded as parts of this many bits (three data bytes per frame)
ROW_BITS = 63
PARTS = -(-ROW_BITS // PART_BITS)
_LIVE_REGS_SHIFT = TERM_BITS
_LIVE_PREDS_SHIFT = _LIVE_REGS_SHIFT + limits.NUM_REGS - 1
TERM_ROW_BITS = _LIVE_PREDS_SHIFT + limits.NUM_PREDS


@dataclass(frozen=True)
class Live:
    """Registers (bit r, r >= 1) and predicates (bit p) a block's successors may read."""

    regs: int
    preds: int


def live_out(prog: Program) -> list[Live]:
    """Per block, the registers and predicates that may be read after it (per thread).

    A guarded write may not happen, so it does not kill the old value; r0 is never live.
    """
    (_, regs), (_, preds) = machine_liveness(prog.blocks)
    return [
        Live(sum(1 << r for r in rs if r), sum(1 << p for p in ps))
        for rs, ps in zip(regs, preds, strict=True)
    ]


def term_row(block: Block, live: Live) -> int:
    """The terminator slot's row: terminator word and live-out masks."""
    return (encode_term(block.term) | (live.regs >> 1) << _LIVE_REGS_SHIFT
            | live.preds << _LIVE_PREDS_SHIFT)  # fmt: skip


def rows(prog: Program) -> dict[tuple[int, int], int]:
    """Every non-zero ROM row, keyed by (block, slot)."""
    out: dict[tuple[int, int], int] = {}
    for b, (block, live) in enumerate(zip(prog.blocks, live_out(prog), strict=True)):
        for s, ins in enumerate(block.instrs):
            if word := encode_instr(ins):
                out[(b, s)] = word
        if word := term_row(block, live):
            out[(b, TERM_SLOT)] = word
    return out


def parts(row: int) -> list[int]:
    """A row split into its PART_BITS-bit parts, least significant first."""
    return [(row >> (PART_BITS * p)) & ((1 << PART_BITS) - 1) for p in range(PARTS)]
