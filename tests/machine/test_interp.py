"""Reference interpreter semantics on hand-built machine programs (no compiler involved)."""

import pytest

from qgpu.errors import LaunchError, ResourceError
from qgpu.machine import limits
from qgpu.machine.interp import EXITED, MASK32, alu, atomic, run_program, s32
from qgpu.machine.isa import (
    INDEXED,
    NO_GUARD,
    Atom,
    Cmp,
    Instr,
    Op,
    PredOp,
    Program,
    Shfl,
    Space,
    SReg,
    Term,
    TermKind,
    format_instr,
    guard_code,
)
from tests.machine.helpers import EXIT, block, imm, program


def run(prog: Program, block=(4, 1), grid=(1, 1), params=(4,), **kw):
    return run_program(prog, grid=grid, block=block, params=list(params),
                       memory=[0] * limits.GLOBAL_WORDS, **kw)


def store_tid_times(k: int) -> tuple[Instr, ...]:
    """out[tid] = k: r1 = &out[tid] (param 0 + 4*tid), r3 = tid, r2 = k."""
    return (
        Instr(Op.LD, 1, 0, imm=0, mod=Space.PARAM),
        Instr(Op.S2R, 3, mod=SReg.TID_X),
        Instr(Op.MAD, 1, 3, imm=4, bi=True, c=1),
        imm(Op.ADD, 2, 0, k),
    )


U = MASK32


@pytest.mark.parametrize("op,a,b,want", [
    (Op.SHL, 1, 31, 0x80000000), (Op.SHL, 1, 32, 0), (Op.SHL, 1, U, 0),
    (Op.SHR, 0x80000000, 31, 1), (Op.SHR, U, 32, 0),
    (Op.SRA, 0x80000000, 31, U), (Op.SRA, 0x80000000, 40, U), (Op.SRA, 0x40000000, 99, 0),
    (Op.MULHI, U, U, 0), (Op.MULHIU, U, U, 0xFFFFFFFE), (Op.MULHI, 0x80000000, 2, U),
    (Op.MUL, 0x10000, 0x10000, 0), (Op.MIN, U, 1, U), (Op.MINU, U, 1, 1),
    (Op.MAX, 0x80000000, 0, 0), (Op.MAXU, 0x80000000, 0, 0x80000000),
    (Op.ABS, 0x80000000, 0, 0x80000000), (Op.ABS, U, 0, 1), (Op.NEG, 1, 0, U),
    (Op.CLZ, 0, 0, 32), (Op.CLZ, 1, 0, 31), (Op.POPC, U, 0, 32), (Op.BREV, 1, 0, 0x80000000),
    (Op.SUB, 0, 1, U), (Op.NOT, 0, 0, U),
])
def test_alu(op: Op, a: int, b: int, want: int) -> None:
    assert alu(op, a, b) == want


@pytest.mark.parametrize("kind,old,b,c,want", [
    (Atom.INC, 3, 3, 0, 0), (Atom.INC, 2, 3, 0, 3), (Atom.INC, 7, 3, 0, 0),
    (Atom.DEC, 0, 5, 0, 5), (Atom.DEC, 9, 5, 0, 5), (Atom.DEC, 4, 5, 0, 3),
    (Atom.CAS, 4, 4, 9, 9), (Atom.CAS, 4, 5, 9, 4), (Atom.MIN, U, 3, 0, U),
    (Atom.MINU, U, 3, 0, 3), (Atom.ADD, U, 1, 0, 0),
])
def test_atomics(kind: Atom, old: int, b: int, c: int, want: int) -> None:
    assert atomic(kind, old, b, c) == want


def test_divergent_paths_meet_again_at_the_first_block_both_reach() -> None:
    # B0: p0 = tid odd; bra p0 ? B1 : B2
    # B1: out[tid] = 1 ; B2: out[tid] = 2 ; B4, B5: out[tid] += 10 ; B3: exit
    head = store_tid_times(0)
    prog = program(
        block((Instr(Op.S2R, 3, mod=SReg.TID_X), imm(Op.AND, 3, 3, 1),
               imm(Op.SETP, 0, 3, 1, mod=Cmp.EQ)), Term(TermKind.BRA, 1, 2, 0)),
        block(head[:3] + (imm(Op.ADD, 2, 0, 1),), Term(TermKind.JMP, 4)),
        block(head[:3] + (imm(Op.ADD, 2, 0, 2),), Term(TermKind.JMP, 4)),
        block((), EXIT),
        block((Instr(Op.ST, 0, 1, 2, mod=Space.GLOBAL), imm(Op.ADD, 2, 2, 10)),
              Term(TermKind.JMP, 5)),
        block((Instr(Op.ST, 0, 1, 2, mod=Space.GLOBAL),), Term(TermKind.JMP, 3)),
    )
    res = run(prog)
    assert res.memory[1:5] == [12, 11, 12, 11]
    # the lowest block first: odd lanes at B1, then even lanes at B2; all lanes are at B4 then
    assert [(r.block, r.mask) for r in res.trace] == [
        (0, 0b1111), (1, 0b1010), (2, 0b0101), (4, 0b1111), (5, 0b1111), (3, 0b1111)]
    assert res.trace[0].pcs == (2, 1, 2, 1) and res.trace[1].pcs == (2, 4, 2, 4)
    assert res.trace[1].regs[0][0] == 1 and res.trace[-1].pcs == (EXITED,) * 4


def test_exited_threads_do_not_block_a_barrier_but_divergence_does() -> None:
    # lanes >= 2 exit early; the rest pass a barrier
    prog = program(
        block((Instr(Op.S2R, 3, mod=SReg.TID_X), imm(Op.SETP, 0, 3, 2, mod=Cmp.GE)),
              Term(TermKind.BRA, 1, 2, 0)),
        block((), EXIT),
        block((), Term(TermKind.BAR, 3)),
        block(store_tid_times(5)[:3] + (imm(Op.ADD, 2, 0, 5),), Term(TermKind.JMP, 4)),
        block((Instr(Op.ST, 0, 1, 2, mod=Space.GLOBAL),), EXIT),
    )
    assert run(prog).memory[1:5] == [5, 5, 0, 0]
    # a barrier inside an if that other lanes skip
    bad = program(
        block((Instr(Op.S2R, 3, mod=SReg.TID_X), imm(Op.SETP, 0, 3, 2, mod=Cmp.GE)),
              Term(TermKind.BRA, 1, 2, 0)),
        block((), Term(TermKind.BAR, 2)),
        block((), EXIT),
    )
    with pytest.raises(LaunchError, match="divergent"):
        run(bad)


def test_barrier_orders_warps() -> None:
    # 8 threads: each writes tid into shared, barrier, then reads its neighbour's slot
    prog = program(
        block((Instr(Op.S2R, 1, mod=SReg.TID_X), imm(Op.SHL, 2, 1, 2),
               Instr(Op.ST, 0, 2, 1, mod=Space.SHARED)), Term(TermKind.BAR, 1)),
        block((Instr(Op.LD, 5, 0, imm=0, mod=Space.PARAM), imm(Op.ADD, 3, 1, 1),
               imm(Op.AND, 3, 3, 7), imm(Op.SHL, 3, 3, 2)), Term(TermKind.JMP, 2)),
        block((Instr(Op.LD, 4, 3, mod=Space.SHARED), Instr(Op.ADD, 5, 5, 2),
               Instr(Op.ST, 0, 5, 4, mod=Space.GLOBAL)), EXIT),
        shared=32,
    )
    res = run(prog, block=(8, 1))
    assert res.memory[1:9] == [1, 2, 3, 4, 5, 6, 7, 0]
    assert [r.warp for r in res.trace] == [0, 1, 0, 0, 1, 1]


def test_step_limit_stops_runaway_launch() -> None:
    prog = program(block((), Term(TermKind.JMP, 0)))
    with pytest.raises(LaunchError, match="did not finish within 50 block executions") as err:
        run(prog, step_limit=50)
    assert err.value.fault is None  # the runtime's step limit, not a fault the model reports


@pytest.mark.parametrize("address,message,fault", [
    (0, "null pointer", "null"), (2, "misaligned", "misaligned"),
    (512, "outside memory", "global_bounds"), (64, "every argument", "global_bounds"),
])
def test_bad_global_addresses(address: int, message: str, fault: str) -> None:
    prog = program(block((imm(Op.ADD, 1, 0, address), Instr(Op.LD, 2, 1, mod=Space.GLOBAL)),
                         EXIT))
    with pytest.raises(LaunchError, match=message) as err:
        run(prog, block=(1, 1), allocations=[(4, 16)])
    assert "threadIdx=(0,0)" in err.value.message and "ld.global" in err.value.message
    # what the model reports, and where: (thread block, ROM block, warp, active lanes)
    assert err.value.fault == fault and err.value.block == (0, 0, 0, 1) and err.value.trace == []


def test_shared_and_local_bounds() -> None:
    prog = program(block((imm(Op.ADD, 1, 0, 8), Instr(Op.ST, 0, 1, 1, mod=Space.SHARED)), EXIT),
                   shared=8)
    with pytest.raises(LaunchError, match="shared address 8 is out of bounds") as err:
        run(prog, block=(1, 1))
    assert err.value.fault == "shared_bounds"
    prog = program(block((Instr(Op.ST, 0, 0, 0, imm=4 * limits.LOCAL_WORDS, mod=Space.LOCAL),),
                         EXIT))
    with pytest.raises(LaunchError, match="local address") as err:
        run(prog, block=(1, 1))
    assert err.value.fault == "local_bounds"


def shuffle_program(mode: Shfl, b: int, shape: int) -> Program:
    # r2 = tid * 10; r3 = shfl(r2); out[tid] = r3
    return program(
        block((Instr(Op.S2R, 1, mod=SReg.TID_X), imm(Op.MUL, 2, 1, 10),
               Instr(Op.SHFL, 3, 2, imm=b, bi=True, c=shape, mod=mode),
               Instr(Op.LD, 4, 0, mod=Space.PARAM)), Term(TermKind.JMP, 1)),
        block((Instr(Op.MAD, 4, 1, imm=4, bi=True, c=4), Instr(Op.ST, 0, 4, 3,
                                                                mod=Space.GLOBAL)), EXIT),
    )


@pytest.mark.parametrize("mode,b,shape,want", [
    (Shfl.DOWN, 1, 0b0011, [10, 20, 30, 30, 50, 60, 70, 70]),
    (Shfl.UP, 1, 0b0000, [0, 0, 10, 20, 40, 40, 50, 60]),
    (Shfl.BFLY, 1, 0b0011, [10, 0, 30, 20, 50, 40, 70, 60]),
    (Shfl.IDX, 2, 0b0011, [20, 20, 20, 20, 60, 60, 60, 60]),
    (Shfl.DOWN, 1, 0b1011, [10, 10, 30, 30, 50, 50, 70, 70]),  # width 2
])
def test_shuffles_follow_ptx_within_a_warp(mode, b, shape, want) -> None:
    assert run(shuffle_program(mode, b, shape), block=(8, 1)).memory[1:9] == want


def test_shuffle_across_warps_is_an_error() -> None:
    with pytest.raises(LaunchError, match="outside this thread's 4-lane warp"):
        run(shuffle_program(Shfl.BFLY, 4, 0b0011), block=(8, 1))


def test_atomics_apply_in_lane_then_warp_order() -> None:
    # every thread: old = atomicExch(out, tid+1); out[1 + tid] = old
    prog = program(
        block((Instr(Op.S2R, 1, mod=SReg.TID_X), imm(Op.ADD, 2, 1, 1),
               Instr(Op.LD, 3, 0, mod=Space.PARAM), imm(Op.SHL, 5, 1, 2)),
              Term(TermKind.JMP, 1)),
        block((Instr(Op.ATOMG, 4, 3, 2, mod=Atom.EXCH), Instr(Op.ADD, 5, 5, 3)),
              Term(TermKind.JMP, 2)),
        block((Instr(Op.ST, 0, 5, 4, imm=4, mod=Space.GLOBAL),), EXIT),
    )
    res = run(prog, block=(8, 1))
    assert res.memory[1] == 8
    assert res.memory[2:10] == [0, 1, 2, 3, 4, 5, 6, 7]


def test_launch_shape_limits() -> None:
    prog = program(block((), EXIT))
    with pytest.raises(ResourceError, match="at most 16"):
        run(prog, block=(17, 1))
    with pytest.raises(ResourceError, match="thread blocks"):
        run(prog, grid=(5, 4))


def test_grid_runs_blocks_in_order() -> None:
    # shared[0] = 0; barrier; shared[0] += ctaid+1 via atomics; out[ctaid] = shared[0] after a
    # barrier
    prog = program(
        block((Instr(Op.ST, 0, 0, 0, mod=Space.SHARED),), Term(TermKind.BAR, 1)),
        block((Instr(Op.S2R, 1, mod=SReg.CTAID_X), imm(Op.ADD, 2, 1, 1),
               Instr(Op.ATOMS, 0, 0, 2, mod=Atom.ADD), Instr(Op.LD, 4, 0, mod=Space.PARAM)),
              Term(TermKind.BAR, 2)),
        block((Instr(Op.LD, 3, 0, mod=Space.SHARED), Instr(Op.MAD, 4, 1, imm=4, bi=True, c=4),
               Instr(Op.ST, 0, 4, 3, mod=Space.GLOBAL)), EXIT),
        shared=4,
    )
    res = run(prog, block=(2, 1), grid=(3, 1))
    assert res.memory[1:4] == [2, 4, 6]
    assert res.stats["thread_blocks"] == 3


def test_s32() -> None:
    assert s32(0xFFFFFFFF) == -1 and s32(5) == 5 and s32(1 << 31) == -(1 << 31)


# --- undefined state: registers, predicates, shared and local memory start undefined in every
# thread block (the model does not clear them); reading before writing is a launch error


def per_block_value(first: Instr) -> Program:
    """B0: r1 = ctaid.x; p0 = ctaid == 0; `first`; r2 = param 0.  B1: out[ctaid] = r5."""
    return program(
        block((Instr(Op.S2R, 1, mod=SReg.CTAID_X), imm(Op.SETP, 0, 1, 0, mod=Cmp.EQ), first,
               Instr(Op.LD, 2, 0, mod=Space.PARAM)), Term(TermKind.JMP, 1)),
        block((Instr(Op.MAD, 2, 1, imm=4, bi=True, c=2), Instr(Op.ST, 0, 2, 5,
                                                               mod=Space.GLOBAL)), EXIT),
    )


def test_register_written_only_by_the_first_thread_block_is_undefined_in_the_second() -> None:
    # r5 is written under @p0 (ctaid == 0): block 1 would see block 0's value on the model
    prog = per_block_value(imm(Op.ADD, 5, 0, 7, guard=guard_code(0)))
    with pytest.raises(LaunchError) as err:
        run(prog, block=(1, 1), grid=(2, 1))
    assert err.value.message == (
        "read of r5 before any write in this thread block (or of a value computed from such a "
        "read) at test, block B1 in `st.global [r2+0], r5`, blockIdx=(1,0), threadIdx=(0,0)")
    # the same kernel writing r5 in every thread block runs
    assert run(per_block_value(imm(Op.ADD, 5, 0, 7)), block=(1, 1),
               grid=(2, 1)).memory[1:3] == [7, 7]


def test_shared_word_written_only_by_the_first_thread_block_is_undefined_in_the_second() -> None:
    def prog(guard: int) -> Program:
        # @p0 shared[3] = 9; r5 = shared[3]; out[ctaid] = r5
        return program(
            block((Instr(Op.S2R, 1, mod=SReg.CTAID_X), imm(Op.SETP, 0, 1, 0, mod=Cmp.EQ),
                   imm(Op.ADD, 3, 0, 9), Instr(Op.LD, 2, 0, mod=Space.PARAM)),
                  Term(TermKind.JMP, 1)),
            block((Instr(Op.ST, 0, 0, 3, imm=12, mod=Space.SHARED, guard=guard),
                   Instr(Op.MAD, 2, 1, imm=4, bi=True, c=2)), Term(TermKind.JMP, 2)),
            block((Instr(Op.LD, 5, 0, imm=12, mod=Space.SHARED),), Term(TermKind.JMP, 3)),
            block((Instr(Op.ST, 0, 2, 5, mod=Space.GLOBAL),), EXIT),
            shared=16,
        )
    with pytest.raises(LaunchError) as err:
        run(prog(guard_code(0)), block=(1, 1), grid=(2, 1))
    assert err.value.message == (
        "read of shared memory word 3 (address 12) before any write in this thread block at "
        "test, block B2 in `ld.shared r5, [r0+12]`, blockIdx=(1,0), threadIdx=(0,0)")
    assert run(prog(NO_GUARD), block=(1, 1), grid=(2, 1)).memory[1:3] == [9, 9]


def test_shared_atomic_reads_the_old_word() -> None:
    prog = program(block((imm(Op.ADD, 2, 0, 1), Instr(Op.ATOMS, 3, 0, 2, imm=4, mod=Atom.ADD)),
                         EXIT), shared=8)
    with pytest.raises(LaunchError, match=r"^read of shared memory word 1 \(address 4\) before "
                       r"any write in this thread block at .*atom\.shared\.add"):
        run(prog, block=(1, 1))


def test_local_memory_is_per_thread_and_undefined_until_written() -> None:
    # lane 0 alone stores local word 2; then every lane loads it: lane 1 has never written it,
    # and loads an undefined value (a spill slot may hold one), which it then stores
    def prog(guard: int) -> Program:
        return program(
            block((Instr(Op.S2R, 1, mod=SReg.TID_X), imm(Op.SETP, 0, 1, 0, mod=Cmp.EQ),
                   Instr(Op.LD, 2, 0, mod=Space.PARAM)), Term(TermKind.JMP, 1)),
            block((Instr(Op.ST, 0, 0, 1, imm=8, mod=Space.LOCAL, guard=guard),
                   Instr(Op.MAD, 2, 1, imm=4, bi=True, c=2)), Term(TermKind.JMP, 2)),
            block((Instr(Op.LD, 5, 0, imm=8, mod=Space.LOCAL),), Term(TermKind.JMP, 3)),
            block((Instr(Op.ST, 0, 2, 5, mod=Space.GLOBAL),), EXIT),
        )
    with pytest.raises(LaunchError) as err:
        run(prog(guard_code(0)), block=(2, 1))
    assert err.value.message == (
        "read of r5 before any write in this thread block (or of a value computed from such a "
        "read) at test, block B3 in `st.global [r2+0], r5`, blockIdx=(0,0), threadIdx=(1,0)")
    assert run(prog(NO_GUARD), block=(2, 1)).memory[1:3] == [0, 1]


@pytest.mark.parametrize("ins,what", [
    (Instr(Op.ST, 0, 1, 4, mod=Space.GLOBAL), "r4"),  # the stored value
    (Instr(Op.LD, 2, 3, mod=Space.SHARED), "r3"),  # an address
    (Instr(Op.LD, 2, 1, 7, mod=Space.GLOBAL | INDEXED), "r7"),  # the index
    (Instr(Op.ATOMG, 2, 1, 0, 8, mod=Atom.CAS), "r8"),  # cas reads c
    (imm(Op.ADD, 2, 0, 1, guard=guard_code(1)), "p1"),  # the guard
    (Instr(Op.SHFL, 2, 9, imm=0, bi=True, c=0b0011, mod=Shfl.BFLY), "r9 of source lane 0"),
])
def test_each_operand_read_before_write_is_named(ins: Instr, what: str) -> None:
    # r1 = &out[0], p0 = true, then `ins` in a one-thread block
    prog = program(block((Instr(Op.LD, 1, 0, mod=Space.PARAM),
                          imm(Op.SETP, 0, 0, 0, mod=Cmp.EQ), ins), EXIT))
    with pytest.raises(LaunchError) as err:
        run(prog, block=(1, 1), allocations=[(4, 16)])
    assert err.value.message.startswith(
        f"read of {what} before any write in this thread block (or of a value computed from "
        f"such a read) at test, block B0 in "
        f"`{format_instr(ins)}`, blockIdx=(0,0), threadIdx=(0,0)")


UNDEFINED_R2 = ("read of r2 before any write in this thread block (or of a value computed from "
                "such a read) at test, block B{} in `st.global [r1+0], r2`")


def one_per_block(*instrs: Instr) -> Program:
    """Each instruction in a block of its own, run in order."""
    n = len(instrs)
    return program(*(block((ins,), Term(TermKind.JMP, i + 1) if i + 1 < n else EXIT)
                     for i, ins in enumerate(instrs)))


@pytest.mark.parametrize("compute", [
    (imm(Op.ADD, 2, 3, 1),),  # r3 was never written
    (Instr(Op.MAD, 2, 0, 0, 6),),  # c is read by mad
    (Instr(Op.ADD, 2, 0, imm=0, bi=True, undefined=True),),  # the lowering's marked 0
    (imm(Op.SEL, 2, 3, 1, c=0),),  # p0 is true: SEL takes r3
    (imm(Op.SETP, 1, 3, 0, mod=Cmp.EQ), imm(Op.SEL, 2, 0, 1, c=1)),  # an undefined predicate
    (Instr(Op.PLOP, 1, 3, 0, mod=PredOp.OR), imm(Op.SEL, 2, 0, 1, c=1)),  # p3 never written
    (imm(Op.SETP, 1, 0, 0, mod=Cmp.NE, undefined=True), imm(Op.SEL, 2, 0, 1, c=1)),  # marked
    (Instr(Op.ST, 0, 0, 3, imm=4, mod=Space.LOCAL),  # a spill slot keeps it undefined
     Instr(Op.LD, 2, 0, imm=4, mod=Space.LOCAL)),
])
def test_an_undefined_value_flows_into_results_and_stops_the_launch_where_it_is_stored(
        compute: tuple[Instr, ...]) -> None:
    """Computing from an undefined register is no error (PTX may do it where the value cannot
    matter); the result is undefined, and storing it is the error."""
    first = (Instr(Op.LD, 1, 0, mod=Space.PARAM), imm(Op.SETP, 0, 0, 0, mod=Cmp.EQ))
    store = Instr(Op.ST, 0, 1, 2, mod=Space.GLOBAL)
    with pytest.raises(LaunchError) as err:
        run(one_per_block(*first, *compute, store), block=(1, 1))
    at = len(first) + len(compute)
    assert err.value.message.startswith(UNDEFINED_R2.format(at)), err.value.message
    run(one_per_block(*first, *compute), block=(1, 1))  # without the store: no error
    rewritten = (*first, *compute, imm(Op.ADD, 2, 0, 7), store)
    assert run(one_per_block(*rewritten), block=(1, 1)).memory[1] == 7


def test_sel_reads_only_the_operand_it_selects() -> None:
    # p0 = true; r2 = p0 ? 5 : r3 (r3 never written) takes 5; negated (mod 1) it takes r3
    prog = [one_per_block(Instr(Op.LD, 1, 0, mod=Space.PARAM), imm(Op.SETP, 0, 0, 0, mod=Cmp.EQ),
                          imm(Op.ADD, 4, 0, 5), Instr(Op.SEL, 2, 4, 3, c=0, mod=negate),
                          Instr(Op.ST, 0, 1, 2, mod=Space.GLOBAL)) for negate in (0, 1)]
    assert run(prog[0], block=(1, 1)).memory[1] == 5
    with pytest.raises(LaunchError, match=r"^read of r2 before any write"):
        run(prog[1], block=(1, 1))


@pytest.mark.parametrize("ins", [
    imm(Op.ADD, 2, 0, 5),  # r0 is always defined
    Instr(Op.ADD, 2, 0, 0),
    Instr(Op.ST, 0, 1, 0, mod=Space.GLOBAL),
    Instr(Op.NEG, 2, 0, 9),  # unary ops do not read b
    Instr(Op.ADD, 2, 0, 9, imm=3, bi=True),  # an immediate replaces b
    Instr(Op.ATOMG, 2, 1, 0, 8, mod=Atom.ADD),  # only cas reads c
    Instr(Op.ST, 0, 1, 5, imm=0, mod=Space.GLOBAL, guard=guard_code(0, negated=True)),
    imm(Op.ADD, 2, 6, 1, guard=guard_code(0, negated=True)),  # guarded off: reads nothing
    Instr(Op.LD, 2, 0, imm=0, mod=Space.SHARED, guard=guard_code(0, negated=True)),
])
def test_what_is_not_read_does_not_need_a_write(ins: Instr) -> None:
    prog = program(block((Instr(Op.LD, 1, 0, mod=Space.PARAM),
                          imm(Op.SETP, 0, 0, 0, mod=Cmp.EQ), ins), EXIT), shared=4)
    run(prog, block=(1, 1), grid=(2, 1), allocations=[(4, 16)])


def test_branch_reads_its_predicate_only_in_active_lanes() -> None:
    # p0 = tid odd; only odd lanes set p1 = tid == 3; inside `if (p0)` they branch on p1: the
    # even lanes never wrote p1 and are not active there
    def prog(first: Term) -> Program:
        return program(
            block((Instr(Op.S2R, 1, mod=SReg.TID_X), imm(Op.AND, 2, 1, 1),
                   imm(Op.SETP, 0, 2, 1, mod=Cmp.EQ),
                   imm(Op.SETP, 1, 1, 3, mod=Cmp.EQ, guard=guard_code(0))), first),
            block((), Term(TermKind.BRA, 2, 3, 1)),
            block((imm(Op.ADD, 5, 0, 1),), Term(TermKind.JMP, 3)),
            block((), EXIT),
        )
    res = run(prog(Term(TermKind.BRA, 1, 3, 0)))
    assert [(r.block, r.mask) for r in res.trace] == [(0, 0b1111), (1, 0b1010), (2, 0b1000),
                                                      (3, 0b1111)]
    # all lanes reaching the inner branch: lane 0 has not written p1
    with pytest.raises(LaunchError) as err:
        run(prog(Term(TermKind.JMP, 1)))
    assert err.value.message == (
        "read of p1 before any write in this thread block (or of a value computed from such a "
        "read) at test, block B1 in "
        "`bra p1 ? B2 : B3`, blockIdx=(0,0), threadIdx=(0,0)")


def test_shuffle_reads_register_a_of_the_source_lane() -> None:
    # only lane 0 writes r9; shfl.idx 0 hands it to all lanes, shfl.idx 1 reads lane 1's r9
    def prog(src: int) -> Program:
        return program(
            block((Instr(Op.S2R, 1, mod=SReg.TID_X), imm(Op.SETP, 0, 1, 0, mod=Cmp.EQ),
                   imm(Op.ADD, 9, 0, 42, guard=guard_code(0)), Instr(Op.LD, 2, 0, mod=Space.PARAM)),
                  Term(TermKind.JMP, 1)),
            block((Instr(Op.SHFL, 5, 9, imm=src, bi=True, c=0b0011, mod=Shfl.IDX),
                   Instr(Op.MAD, 2, 1, imm=4, bi=True, c=2),
                   Instr(Op.ST, 0, 2, 5, mod=Space.GLOBAL)), EXIT),
        )
    assert run(prog(0)).memory[1:5] == [42] * 4
    with pytest.raises(LaunchError, match=r"^read of r9 of source lane 1 before any write .*"
                       r"threadIdx=\(0,0\)"):
        run(prog(1))


def test_lanes_whose_guard_is_false_read_nothing() -> None:
    # only lane 0 writes r6 and r2; the other lanes skip every instruction that reads them
    guard = guard_code(1)
    prog = program(
        block((Instr(Op.S2R, 1, mod=SReg.TID_X), imm(Op.SETP, 1, 1, 0, mod=Cmp.EQ),
               imm(Op.ADD, 6, 0, 5, guard=guard), imm(Op.ADD, 2, 6, 1, guard=guard)),
              Term(TermKind.JMP, 1)),
        block((Instr(Op.LD, 3, 0, mod=Space.PARAM), Instr(Op.ST, 0, 3, 2, mod=Space.GLOBAL,
                                                          guard=guard)), EXIT),
    )
    assert run(prog).memory[1] == 6
