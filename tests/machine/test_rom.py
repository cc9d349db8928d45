"""ROM image: per-block live-out masks (what the model must write back) and row encoding."""

from qgpu.machine import rom
from qgpu.machine.isa import (
    TERM_BITS,
    Block,
    Cmp,
    Instr,
    Op,
    Program,
    SReg,
    Term,
    TermKind,
    decode_instr,
    decode_term,
    guard_code,
)

EXIT = Term(TermKind.EXIT)


def imm(op: Op, d: int, a: int, value: int, **kw) -> Instr:
    return Instr(op, d, a, imm=value, bi=True, **kw)


def program(*blocks: Block) -> Program:
    return Program("t", tuple(blocks), 1, 0, 0, 0)


def test_loop_carried_values_are_live_and_dead_writes_are_not() -> None:
    prog = program(
        # B0: r1 = tid, r2 = 10 (used in the loop), r3 = 7 (never read)
        Block((Instr(Op.S2R, 1, mod=SReg.TID_X), imm(Op.ADD, 2, 0, 10), imm(Op.ADD, 3, 0, 7)),
              Term(TermKind.JMP, 1)),
        # B1: r1 += 1; p0 = r1 < r2; loop while p0
        Block((imm(Op.ADD, 1, 1, 1), Instr(Op.SETP, 0, 1, 2, mod=Cmp.LT)),
              Term(TermKind.BRA, 1, 2, 0)),
        # B2: store r1
        Block((Instr(Op.ST, 0, 0, 1),), EXIT),
    )
    live = rom.live_out(prog)
    assert live[0] == rom.Live(regs=0b110, preds=0)
    assert live[1] == rom.Live(regs=0b110, preds=0)  # p0 is consumed by B1's own branch
    assert live[2] == rom.Live(0, 0)


def test_a_guarded_write_does_not_kill_and_branch_predicates_are_live() -> None:
    prog = program(
        Block((imm(Op.ADD, 1, 0, 1), imm(Op.SETP, 1, 1, 0, mod=Cmp.GT)), Term(TermKind.JMP, 1)),
        Block((imm(Op.ADD, 1, 0, 5, guard=guard_code(1)),), Term(TermKind.JMP, 2)),
        Block((Instr(Op.ST, 0, 0, 1),), Term(TermKind.BRA, 3, 3, 1)),
        Block((), EXIT),
    )
    live = rom.live_out(prog)
    assert live[0].regs == 0b10 and live[0].preds == 0b10  # B1's guarded write keeps r1 live
    assert live[1].preds == 0b10  # B2's branch reads p1


def test_rows_hold_instructions_and_terminator_with_live_masks() -> None:
    b0 = Block((imm(Op.ADD, 1, 0, -3), Instr(Op.ADD)), Term(TermKind.JMP, 1))
    prog = program(b0, Block((Instr(Op.ST, 0, 0, 1),), EXIT))
    rows = rom.rows(prog)
    assert decode_instr(rows[(0, 0)]) == b0.instrs[0]
    assert (0, 1) not in rows  # add r0, r0, r0 is word 0: the no-op an empty slot reads as
    term = rows[(0, rom.TERM_SLOT)]
    assert decode_term(term & ((1 << TERM_BITS) - 1)) == b0.term
    assert term >> TERM_BITS == 0b1  # r1 live (bit 0 = r1)
    assert term < 1 << rom.TERM_ROW_BITS
    assert all(row < 1 << rom.ROW_BITS for row in rows.values())
    assert sum(p << (rom.PART_BITS * i) for i, p in enumerate(rom.parts(rows[(0, 0)]))) \
        == rows[(0, 0)]
