"""The instruction encoding round-trips and rejects fields that do not fit."""

import random

import pytest

from qgpu.machine import limits
from qgpu.machine.isa import (
    ATOMIC_OPS,
    INDEXED,
    Atom,
    Block,
    Instr,
    Op,
    Program,
    Space,
    Term,
    TermKind,
    decode_instr,
    decode_term,
    encode_instr,
    encode_term,
    format_program,
    guard_code,
    guard_parts,
)


def random_instr(rng: random.Random) -> Instr:
    op, mod = Op(rng.randrange(len(Op))), rng.randrange(16)
    indexed = op in (Op.LD, Op.ST) and mod & INDEXED  # a + 4*b: no immediate
    indexed |= op in ATOMIC_OPS and mod == Atom.CAS  # nor has CAS
    return Instr(
        op, d=rng.randrange(16), a=rng.randrange(16), b=rng.randrange(16), c=rng.randrange(16),
        imm=0 if indexed else rng.randrange(-(1 << 31), 1 << 31), bi=rng.random() < 0.5,
        mod=mod, guard=rng.randrange(9),
    )


def test_indexed_accesses_have_no_immediate() -> None:
    with pytest.raises(ValueError, match="no immediate"):
        Instr(Op.LD, 1, 2, 3, imm=4, mod=Space.GLOBAL | INDEXED)
    with pytest.raises(ValueError, match="no immediate"):
        Instr(Op.ATOMG, 1, 2, 3, 4, imm=4, mod=Atom.CAS)


def test_nothing_in_an_atomics_block_reads_its_result() -> None:
    atom = Instr(Op.ATOMG, 5, 2, 3, mod=Atom.ADD)
    with pytest.raises(ValueError, match="reads the result of the block's atomic"):
        Block((atom, Instr(Op.ADD, 6, 5, imm=1, bi=True)), Term(TermKind.EXIT))
    Block((atom, Instr(Op.ADD, 5, 3, imm=1, bi=True)), Term(TermKind.EXIT))  # writing it is fine


def test_instruction_encoding_round_trips() -> None:
    rng = random.Random(0)
    for _ in range(2000):
        ins = random_instr(rng)
        word = encode_instr(ins)
        assert word < 1 << 63
        assert decode_instr(word) == ins


def test_terminator_encoding_round_trips() -> None:
    for t in (Term(TermKind.JMP, 5), Term(TermKind.EXIT), Term(TermKind.BAR, 63),
              Term(TermKind.BRA, 1, 2, 3, True), Term(TermKind.BRA, 127, 9, 0)):
        assert decode_term(encode_term(t)) == t


def test_guards() -> None:
    assert guard_parts(guard_code(None)) is None
    for p in range(limits.NUM_PREDS):
        for neg in (False, True):
            assert guard_parts(guard_code(p, neg)) == (p, neg)


@pytest.mark.parametrize("field", ["d", "a", "b", "c"])
def test_register_fields_are_checked(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Instr(Op.ADD, **{field: 16})


def test_blocks_hold_at_most_the_slot_count() -> None:
    with pytest.raises(ValueError, match="instructions"):
        Block(tuple(Instr(Op.ADD) for _ in range(limits.BLOCK_SLOTS + 1)), Term(TermKind.EXIT))


def test_format_program_is_readable() -> None:
    prog = Program("k", (Block((Instr(Op.ADD, 1, 0, imm=7, bi=True, guard=guard_code(2, True)),),
                               Term(TermKind.BRA, 0, 1, 1)),
                         Block((), Term(TermKind.EXIT))), 0, 0, 0, 0)
    text = format_program(prog)
    assert "@!p2 add r1, r0, 7" in text
    assert "bra p1 ? B0 : B1" in text
