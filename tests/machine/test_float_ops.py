"""The machine's float instructions: their fields, slots, text, and their semantics in the
reference interpreter (each one is float32.py's operation, with its mod bits)."""

import numpy as np
import pytest

from qgpu.machine import float32 as F
from qgpu.machine import limits
from qgpu.machine.float32 import FCmp, Round
from qgpu.machine.interp import alu, run_program
from qgpu.machine.isa import (
    F2I_FTZ,
    F2I_SIGNED,
    FLOAT_SLOTS,
    FTZ,
    I2F_SIGNED,
    SAT,
    Block,
    Instr,
    Op,
    Space,
    SReg,
    Term,
    TermKind,
    decode_instr,
    encode_instr,
    format_instr,
    slot_allows,
)
from tests.machine.helpers import EXIT, block, imm, program


def w(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


ONE, TWO, HALF, THIRD = w(1.0), w(2.0), w(0.5), w(1 / 3)
TINY = 1  # the smallest subnormal


@pytest.mark.parametrize("op,mod,a,b,c,want", [
    (Op.FADD, Round.RN, ONE, TWO, 0, w(3.0)),
    (Op.FSUB, Round.RN, ONE, TWO, 0, w(-1.0)),
    (Op.FMUL, Round.RN, THIRD, w(3.0), 0, ONE),
    (Op.FMUL, Round.RP, THIRD, w(3.0), 0, ONE + 1),  # 1/3 as float is above 1/3
    (Op.FFMA, Round.RN, THIRD, w(3.0), w(-1.0), F.fma(THIRD, w(3.0), w(-1.0))),
    (Op.FADD, Round.RN | FTZ, TINY, TINY, 0, 0),
    (Op.FADD, Round.RN, TINY, TINY, 0, 2),
    (Op.FADD, Round.RN | SAT, TWO, TWO, 0, ONE),
    (Op.FMIN, 0, F.CANONICAL_NAN, HALF, 0, HALF),
    (Op.FMAX, FTZ, TINY, 0x8000_0000, 0, 0),
    (Op.I2F, Round.RN | I2F_SIGNED, 0xFFFF_FFFF, 0, 0, w(-1.0)),
    (Op.I2F, Round.RN, 0xFFFF_FFFF, 0, 0, w(4294967296.0)),
    (Op.I2F, Round.RZ, 0xFFFF_FFFF, 0, 0, w(4294967040.0)),
    (Op.F2I, Round.RM | F2I_SIGNED, w(-1.5), 0, 0, 0xFFFF_FFFE),
    (Op.F2I, Round.RN, w(-1.5), 0, 0, 0),  # unsigned saturates
    (Op.F2I, Round.RP | F2I_SIGNED, TINY, 0, 0, 1),
    (Op.F2I, Round.RP | F2I_SIGNED | F2I_FTZ, TINY, 0, 0, 0),
    (Op.FRND, Round.RN, w(2.5), 0, 0, w(2.0)),
    (Op.FRND, Round.RP, w(-0.5), 0, 0, 0x8000_0000),
])
def test_float_alu_ops_are_float32_with_their_mod_bits(op, mod, a, b, c, want):
    assert alu(op, a, b, c, mod) == want


def test_float_instructions_encode_format_and_sit_in_the_float_slots():
    ins = [Instr(Op.FFMA, 1, 2, 3, 4, mod=Round.RZ | FTZ | SAT),
           Instr(Op.FADD, 1, 2, imm=w(1.5), bi=True, mod=Round.RP),
           Instr(Op.FSETP, 2, 3, 4, c=1, mod=FCmp.LTU),
           Instr(Op.F2I, 1, 2, mod=Round.RZ | F2I_SIGNED | F2I_FTZ),
           Instr(Op.I2F, 1, 2, mod=Round.RN), Instr(Op.FRND, 5, 6, mod=Round.RM | FTZ)]
    for i in ins:
        assert decode_instr(encode_instr(i)) == i
    assert [format_instr(i) for i in ins] == [
        "ffma.rz.ftz.sat r1, r2, r3, r4", "fadd.rp r1, r2, 0x3fc00000",
        "fsetp.ltu.ftz p2, r3, r4", "f2i.rzi.ftz.s32 r1, r2", "i2f.rn.u32 r1, r2",
        "frnd.rmi.ftz r5, r6"]
    assert ins[0].reads() == (2, 3, 4) and ins[2].writes_pred() == 2
    for slot in range(limits.BLOCK_SLOTS):
        assert slot_allows(slot, ins[0]) == (slot in FLOAT_SLOTS)
    with pytest.raises(ValueError, match="no float unit"):
        Block((ins[1],), Term(TermKind.EXIT))


def test_a_program_computes_in_float_and_branches_on_a_float_compare():
    """out[tid] = tid < 2 ? fma(float(tid), 0.5, 1/3) : -float(tid), per lane."""
    prog = program(
        block((Instr(Op.S2R, 3, mod=SReg.TID_X), Instr(Op.I2F, 4, 3, mod=Round.RN | I2F_SIGNED),
               Instr(Op.LD, 1, 0, imm=0, mod=Space.PARAM),
               imm(Op.FSETP, 0, 4, w(2.0), mod=FCmp.LT)),
              Term(TermKind.BRA, 1, 2, 0)),
        block((imm(Op.ADD, 5, 0, THIRD), imm(Op.FFMA, 6, 4, HALF, c=5),
               Instr(Op.MAD, 1, 3, imm=4, bi=True, c=1)), Term(TermKind.JMP, 3)),
        block((Instr(Op.FSUB, 6, 0, 4), imm(Op.MAD, 1, 3, 4, c=1)),
              Term(TermKind.JMP, 3)),
        block((imm(Op.FSUB, 6, 6, 0),  # x - 0: a no-op that keeps a float op in the block
               Instr(Op.ST, 0, 1, 6, mod=Space.GLOBAL)), EXIT),
    )
    run = run_program(prog, grid=(1, 1), block=(4, 1), params=[4],
                      memory=[0] * limits.GLOBAL_WORDS)
    got = [v & 0xFFFF_FFFF for v in run.memory[1:5]]  # memory reads back signed
    third = np.float32(1 / 3)
    want = [w(np.float32(t) * np.float32(0.5) + third) if t < 2 else w(-float(t))
            for t in range(4)]
    assert got[:2] == [F.fma(w(float(t)), HALF, THIRD) for t in range(2)]
    assert got[2:] == want[2:]
