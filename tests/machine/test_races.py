"""Data races between warps and thread blocks (qgpu.machine.races): the detector's rules on
scripted accesses, and the machine interpreter reporting them on hand-built programs."""

import pytest

from qgpu.machine import limits
from qgpu.machine.interp import _race_op, run_program
from qgpu.machine.isa import Atom, Instr, Op, Program, Space, SReg, Term, TermKind
from qgpu.machine.races import ATOMIC, CAS, RAW, READ, WAR, WAW, WRITE, RaceDetector
from tests.machine.helpers import EXIT, block, imm, program


def detector() -> RaceDetector:
    found = RaceDetector(lambda site: f"site {site}", blocks=2)
    found.start_block(0)
    return found


def kinds(found: RaceDetector) -> list[tuple]:
    """(kind, space, word, first warp, second warp, first op, second op) of each race."""
    return [(r.kind, r.space, r.word, r.first.warp, r.second.warp, r.first.op, r.second.op)
            for r in found.races]


@pytest.mark.parametrize(("first", "second", "want"), [
    (WRITE, READ, RAW), (WRITE, WRITE, WAW), (READ, WRITE, WAR), (READ, READ, None),
    (ATOMIC, ATOMIC, None), (ATOMIC, READ, RAW), (ATOMIC, WRITE, WAW), (WRITE, ATOMIC, WAW),
    (READ, ATOMIC, WAR),
])
def test_two_warps_race_unless_both_read_or_both_are_atomic(first, second, want) -> None:
    found = detector()
    found.access(first, False, [(1, 5)], 10)  # thread 1: warp 0
    found.access(second, False, [(6, 5)], 11)  # thread 6: warp 1
    assert kinds(found) == ([] if want is None else
                            [(want, "shared", 5, 0, 1, ("write", "read", "atomic")[first],
                              ("write", "read", "atomic")[second])])
    if want is not None:
        race = found.races[0]
        assert (race.first.thread, race.first.where, race.second.thread, race.second.where) == \
            (1, "site 10", 6, "site 11")


def test_one_warp_never_races_with_itself_and_a_barrier_orders_warps() -> None:
    found = detector()
    found.access(WRITE, True, [(0, 3), (1, 3), (2, 4)], 0)
    found.access(READ, True, [(3, 3)], 1)
    found.barrier()
    found.access(WRITE, True, [(4, 3)], 2)
    found.access(READ, False, [(12, 3)], 3)  # another space: shared word 3
    assert found.races == []


def test_one_race_per_word_and_kind_the_first_found() -> None:
    found = detector()
    found.access(WRITE, False, [(0, 1), (1, 2)], 0)
    for site in (1, 2):
        found.access(READ, False, [(4, 1), (5, 2)], site)
    found.access(WRITE, False, [(8, 1)], 3)  # warp 2: write-after-write with warp 0
    assert kinds(found) == [(RAW, "shared", 1, 0, 1, "write", "read"),
                            (RAW, "shared", 2, 0, 1, "write", "read"),
                            (WAW, "shared", 1, 0, 2, "write", "write")]
    assert {r.second.where for r in found.races[:2]} == {"site 1"}


def test_a_store_that_leaves_its_word_unchanged_races_only_with_atomics() -> None:
    """The flag idiom: every thread that finds something stores flag = 1."""
    found = detector()
    found.access(WRITE, True, [(0, 7)], 0)
    found.access(READ, True, [(4, 8)], 1)
    found.access(WRITE, True, [(5, 7), (6, 8)], 2, unchanged=True)
    assert found.races == []
    found.access(WRITE, True, [(8, 7)], 3)  # warp 2 stores another value: races with both
    assert kinds(found) == [(WAW, "global", 7, 0, 2, "write", "write")]
    found.access(ATOMIC, True, [(12, 9)], 4)
    found.access(WRITE, True, [(0, 9)], 5, unchanged=True)
    assert kinds(found)[1] == (WAW, "global", 9, 3, 0, "atomic", "write")


def test_a_cas_vouches_for_its_warps_reads_of_the_word() -> None:
    """A CAS loop (old = *p; do ... while (atomicCAS(p, old, new) != old)) in two warps and two
    thread blocks races with nothing; a read no CAS checks, or another warp's, still races."""
    found = RaceDetector(lambda site: f"site {site}", blocks=2)
    for cta in (0, 1):
        found.start_block(cta)
        for t in (0, 4):  # warps 0 and 1
            found.access(READ, True, [(t, 30)], 0)
            found.access(CAS, True, [(t, 30)], 1)
    assert found.races == []
    found.access(ATOMIC, True, [(8, 31)], 2)  # warp 2 adds
    found.access(READ, True, [(12, 31)], 3)  # warp 3 reads, never compare-and-swaps
    found.access(READ, True, [(0, 32)], 4)  # warp 0 reads for its own use
    found.access(CAS, True, [(4, 32)], 5)  # warp 1's CAS: warp 0's read is no guess of it
    assert kinds(found) == [(WAR, "global", 32, 0, 1, "read", "atomic"),
                            (RAW, "global", 31, 2, 3, "atomic", "read")]  # at the epoch's end


def test_thread_blocks_race_on_global_words_only() -> None:
    found = detector()
    found.access(WRITE, True, [(0, 20), (1, 21)], 0)
    found.access(WRITE, False, [(0, 20)], 1)
    found.access(ATOMIC, True, [(2, 22)], 2)
    found.start_block(1)
    found.access(READ, True, [(3, 20)], 3)  # what block 0 wrote: read-after-write
    found.access(WRITE, True, [(0, 21)], 4, unchanged=True)  # the same value: no race
    found.access(WRITE, False, [(0, 20)], 5)  # its own shared memory
    found.access(ATOMIC, True, [(1, 22)], 6)
    assert [(r.kind, r.word, r.first.block, r.first.thread, r.second.block, r.second.thread,
             r.between_blocks) for r in found.races] == [(RAW, 20, 0, 0, 1, 3, True)]
    message = found.races[0].message()
    assert "between thread blocks" in message and "no fixed order" in message


def test_message_names_both_sides_and_the_fix() -> None:
    found = detector()
    found.access(READ, False, [(2, 4)], 7)
    found.access(WRITE, False, [(6, 4)], 8)
    (race,) = found.races
    assert race.kind == WAR and race.address == 16 and race.name is None
    message = race.message()
    for part in ("data race (write-after-read) on shared word 4", "thread 6 (warp 1) wrote it "
                 "at site 8 after thread 2 (warp 0) read it at site 7", "no __syncthreads()",
                 "on a 32-lane GPU these threads may share a warp", "__syncthreads()"):
        assert part in message
    assert race.to_json()["first"] == {"op": "read", "block": 0, "thread": 2, "where": "site 7",
                                       "warp": 0}
    assert race.to_json()["between"] == "warps"


def neighbour_program(barrier: bool) -> Program:
    """8 threads: shared[tid] = tid, then (with or without a barrier) out[tid] = shared[tid & 3]:
    warp 1 reads the words warp 0 wrote."""
    return program(
        block((Instr(Op.S2R, 1, mod=SReg.TID_X), imm(Op.SHL, 2, 1, 2),
               Instr(Op.ST, 0, 2, 1, mod=Space.SHARED)),
              Term(TermKind.BAR if barrier else TermKind.JMP, 1)),
        block((Instr(Op.LD, 5, 0, imm=0, mod=Space.PARAM), imm(Op.AND, 3, 1, 3),
               imm(Op.SHL, 3, 3, 2)), Term(TermKind.JMP, 2)),
        block((Instr(Op.LD, 4, 3, mod=Space.SHARED), Instr(Op.ADD, 5, 5, 2),
               Instr(Op.ST, 0, 5, 4, mod=Space.GLOBAL)), EXIT),
        shared=32,
    )


@pytest.mark.parametrize("barrier", [True, False])
def test_machine_reports_reads_of_another_warps_writes_without_a_barrier(barrier) -> None:
    res = run_program(neighbour_program(barrier), grid=(1, 1), block=(8, 1), params=[4],
                      memory=[0] * limits.GLOBAL_WORDS)
    assert res.memory[1:9] == [0, 1, 2, 3, 0, 1, 2, 3]  # the same either way on this machine
    if barrier:
        assert res.races == []
        return
    assert [(r.kind, r.space, r.word, r.first.op, r.first.thread, r.second.op, r.second.thread)
            for r in res.races] == [(RAW, "shared", i, "write", i, "read", 4 + i)
                                    for i in range(4)]
    assert res.races[0].first.where.startswith("B0 slot ")
    assert "`st.shared [r2+0], r1`" in res.races[0].first.where
    assert "`ld.shared r4, [r3+0]`" in res.races[0].second.where


def test_machine_counts_a_sub_word_stores_merge_load_as_atomic() -> None:
    """The lowering merges a byte store into its word with a load and a compare-and-swap loop;
    the load (its PTX comment is the store) belongs to that atomic update."""
    store = "@%p1 st.global.u8 [%rd4], %rs3"
    assert _race_op(Instr(Op.LD, 3, 2, mod=Space.GLOBAL, comment=store)) == ATOMIC
    assert _race_op(Instr(Op.ATOMG, 3, 2, 1, mod=Atom.CAS, comment=store)) == ATOMIC
    assert _race_op(Instr(Op.LD, 3, 2, mod=Space.GLOBAL, comment="ld.global.u8 %rs1, [%rd1]")) \
        == READ
    assert _race_op(Instr(Op.ATOMG, 3, 2, 1, mod=Atom.CAS)) == CAS  # the kernel's own CAS
    assert _race_op(Instr(Op.ATOMS, 3, 2, 1, mod=Atom.ADD)) == ATOMIC
    assert _race_op(Instr(Op.ST, 0, 2, 1, mod=Space.SHARED)) == WRITE
