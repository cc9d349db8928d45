"""Loads inside the EXEC pass: parameter words in every slot, and the memory unit of the memory
slots (isa.SLOT_UNITS), which reads global, shared and local memory for 4 lanes.

Every slot keeps its own copy of the parameter words (written by the prompt's PARAM frames) and
reads the word its immediate names; the value is the same for all lanes. A memory slot's adder
forms each lane's byte address a + imm (``execute.access_flags``: port b reads r0 for an access);
its bits 2.. address the lane's copies of global memory (row = word; the read brings the word and
its allocated flag), shared memory (row = word) and local memory (row = (warp, word)), each copy
kept current by the MEM frames that every block's stores leave behind. Only the copy of the
access's space is enabled, so the three reads share one output feature ``x{s}.m{lane}``.
"""

from __future__ import annotations

from qgpu.circuit.gpu.machine import (
    ACCESSES,
    EXEC,
    LANES,
    access_is,
    bits_of,
    global_bank,
    instr_bits,
    local_bank,
    param_bank,
    shared_bank,
)
from qgpu.compiler.graph import Address, Graph, Rule
from qgpu.isa import Op, Space

WORD = 32
MEM_WORD = WORD + 1  # a global row: the value, then its allocated flag


def param_load(g: Graph, s: int) -> None:
    """LD.PARAM in slot s: x{s}.prm = parameter word imm / 4, added to every running lane's
    result."""
    flag, prm = f"x{s}.ldp", f"x{s}.prm"
    g.feature(flag, 1)
    g.rule_group(flag, [Rule(EXEC + access_is(s, Op.LD, Space.PARAM), (((flag, 0), 1),))])
    param_bank(g, f"param.{s}")
    g.feature(prm, WORD)
    g.read(f"param.{s}", Address(tuple(instr_bits(s, "imm")[2:6]), (flag, 0)), prm)
    for lane in LANES:
        run = ((f"x{s}.ex{lane}", 0), 1)
        g.rule_group(f"x{s}.res{lane}.param", [
            Rule((run, ((prm, i), 1)), (((f"x{s}.res{lane}", i), 1),)) for i in range(WORD)])


SPACES = (Space.GLOBAL, Space.SHARED, Space.LOCAL)


def memory_unit(g: Graph, s: int) -> None:
    """Loads of a memory slot: per lane, the space of the access (x{s}.sp{lane}, one-hot), the
    read of that space's copy at the address the adder formed, and LD's result."""
    for lane in LANES:
        run = ((f"x{s}.ex{lane}", 0), 1)
        sp, m, total = f"x{s}.sp{lane}", f"x{s}.m{lane}", f"x{s}.sum{lane}"
        g.feature(sp, len(SPACES), "onehot")
        g.rule_group(sp, [
            Rule((run,) + access_is(s, op, space),
                 (((sp, SPACES.index(Space.GLOBAL if op == Op.ATOMG else Space.SHARED
                                     if op == Op.ATOMS else space)), 1),))
            for op, space in ACCESSES])
        g.feature(m, MEM_WORD, accumulate=True)
        global_bank(g, f"gmem.{s}.{lane}")
        g.read(f"gmem.{s}.{lane}", Address(bits_of(total, 7, 2), (sp, 0)), m)
        shared_bank(g, f"smem.{s}.{lane}")
        g.read(f"smem.{s}.{lane}", Address(bits_of(total, 6, 2), (sp, 1)), m)
        local_bank(g, lane, f"lmem.{s}.{lane}")
        g.read(f"lmem.{s}.{lane}", Address(bits_of(total, 4, 2) + bits_of("wrp1", 2), (sp, 2)),
               m)
        g.rule_group(f"x{s}.res{lane}.load", [
            Rule((run,) + access_is(s, Op.LD, None) + (((m, i), 1),),
                 (((f"x{s}.res{lane}", i), 1),)) for i in range(WORD)])
