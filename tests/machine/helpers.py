"""Hand-built machine programs for tests that need exact instructions, no compiler involved."""

from __future__ import annotations

from qgpu.machine.isa import Block, Instr, Op, Program, Term, TermKind
from qgpu.toolchain.lower.layout import pack_slots

EXIT = Term(TermKind.EXIT)


def block(instrs: tuple[Instr, ...], term: Term) -> Block:
    """One ROM block of these instructions, placed in slots whose units can run them as the
    lowering places them."""
    (slots,) = pack_slots(list(instrs))
    return Block(tuple(slots), term)


def program(*blocks: Block, params: int = 1, shared: int = 0) -> Program:
    return Program("test", tuple(blocks), params, shared, shared, 0)


def imm(op: Op, d: int, a: int, value: int, **kw) -> Instr:
    return Instr(op, d, a, imm=value, bi=True, **kw)
