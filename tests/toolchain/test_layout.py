"""ROM layout: basic blocks cut into blocks whose slots fit the slot units."""

import random

import pytest

from qgpu.machine import limits
from qgpu.machine.isa import (
    HIGH_MULTIPLY_SLOTS,
    NOP,
    SLOT_UNITS,
    Atom,
    Block,
    Cmp,
    Instr,
    Op,
    Space,
    SReg,
    Term,
    TermKind,
    guard_code,
    slot_allows,
    unit_of,
)
from qgpu.toolchain.lower.layout import hoist_into_branches, must_follow, pack_slots

LD_G = Instr(Op.LD, 1, 2, mod=Space.GLOBAL)


def test_units_of_instructions() -> None:
    assert unit_of(Instr(Op.MAD, 1, 2, 3, 4)) == "multiply"
    assert unit_of(LD_G) == unit_of(Instr(Op.ATOMS, 1, 2, 3, mod=Atom.ADD)) == "memory"
    assert unit_of(Instr(Op.LD, 1, 0, imm=4, mod=Space.PARAM)) == "alu"  # every slot reads params
    assert [slot_allows(s, LD_G) for s in range(limits.BLOCK_SLOTS)] == \
        [u == "memory" for u in SLOT_UNITS]


def test_block_rejects_an_instruction_its_slot_cannot_run() -> None:
    with pytest.raises(ValueError, match="slot 0 has no multiply unit for MUL"):
        Block((Instr(Op.MUL, 1, 2, 3),), Term(TermKind.EXIT))
    with pytest.raises(ValueError, match="slot 3's multiplier gives no high half for MULHI"):
        Block((NOP, NOP, NOP, Instr(Op.MULHI, 1, 2, 3)), Term(TermKind.EXIT))
    Block((NOP, Instr(Op.MULHIU, 1, 2, 3), NOP, Instr(Op.MAD, 4, 2, 3, 1)), Term(TermKind.EXIT))


def test_high_multiplies_take_only_the_slots_with_a_high_half() -> None:
    assert [s for s in range(limits.BLOCK_SLOTS)
            if slot_allows(s, Instr(Op.MULHI, 1, 2, 3))] == list(HIGH_MULTIPLY_SLOTS) == [1]
    hi, hu, lo = Instr(Op.MULHI, 3, 2, 2), Instr(Op.MULHIU, 5, 2, 2), Instr(Op.MUL, 4, 2, 2)
    # two independent high multiplies: one block each; the low one fills slot 3 beside the first
    assert pack_slots([hi, hu, lo]) == [[NOP, hi, NOP, lo], [NOP, hu]]


def test_independent_work_fills_the_slots_a_unit_skips() -> None:
    mul = Instr(Op.MUL, 3, 2, 2)
    add = Instr(Op.ADD, 4, 5, 5)
    # mul cannot take slot 0: the later, independent add does; the load waits for slot 2
    assert pack_slots([mul, add, LD_G]) == [[add, mul, LD_G]]
    # a load of the product's address takes the memory slot after the multiplier
    dep = Instr(Op.LD, 6, 3, mod=Space.GLOBAL)
    assert pack_slots([mul, dep]) == [[NOP, mul, dep]]
    # two multiplies in a row: slots 1 and 3, the second block gets the third
    assert pack_slots([mul] * 3) == [[NOP, mul, NOP, mul], [NOP, mul]]


def test_empty_block_is_one_empty_rom_block() -> None:
    assert pack_slots([]) == [[]]


def _random_instr(rng: random.Random) -> Instr:
    op = rng.choice([Op.ADD, Op.MUL, Op.MAD, Op.LD, Op.ST, Op.SETP, Op.SEL, Op.ATOMG, Op.S2R])
    r = [rng.randrange(4) for _ in range(4)]
    guard = guard_code(rng.randrange(2)) if rng.random() < 0.3 else 0
    if op == Op.SETP:
        return Instr(op, r[0] % 2, r[1], r[2], mod=Cmp.LT, guard=guard)
    if op == Op.LD:
        return Instr(op, r[0], r[1], mod=rng.choice([Space.GLOBAL, Space.PARAM]), guard=guard)
    return Instr(op, r[0], r[1], r[2], r[3] % 2 if op == Op.SEL else r[3], guard=guard)


@pytest.mark.parametrize("seed", range(200))
def test_packing_keeps_every_dependence_and_fits_every_slot(seed: int) -> None:
    rng = random.Random(seed)
    instrs = [_random_instr(rng) for _ in range(rng.randrange(1, 12))]
    chunks = pack_slots(instrs)
    placed = [ins for chunk in chunks for ins in chunk]
    for chunk in chunks:
        Block(tuple(chunk), Term(TermKind.EXIT))  # raises when a slot cannot run its instruction
        assert chunk and chunk[-1] is not NOP
    order = [next(k for k, p in enumerate(placed) if p is ins) for ins in instrs]
    assert sorted(order) == [k for k, p in enumerate(placed) if p is not NOP]
    for j, later in enumerate(instrs):
        for i in range(j):
            if must_follow(later, instrs[i]):
                assert order[i] < order[j], (instrs[i], later)


def test_no_memory_access_follows_a_store_in_its_block() -> None:
    """The model writes memory back after the block, so a later load in the same block could
    not see the store: the packer starts a new block, and Block refuses such a block."""
    st = Instr(Op.ST, 0, 1, 2, mod=Space.GLOBAL)
    add = Instr(Op.ADD, 5, 5, 5)
    assert pack_slots([st, LD_G, add]) == [[st, add], [LD_G]]
    with pytest.raises(ValueError, match="accesses memory after a store"):
        Block((st, NOP, LD_G), Term(TermKind.EXIT))


def test_an_atomics_result_is_read_in_a_later_block() -> None:
    """The model computes an atomic's old values after the block's slots: a reader waits for
    the next block, an independent instruction still fills the slot."""
    atom = Instr(Op.ATOMG, 4, 1, 2, mod=Atom.ADD)
    use, other = Instr(Op.ADD, 6, 4, 4), Instr(Op.ADD, 7, 3, 3)
    assert pack_slots([atom, use, other]) == [[atom, other], [use]]


def _guard_then(moved: tuple[Instr, ...], loop: bool = False) -> list[Block]:
    """B0: p0 = r1 < r2, branch to B1 (then B2) or B3; B1 holds `moved`; B2 stores r3 (reading
    what B1 wrote); with `loop`, B2 branches back to B0."""
    tail = Term(TermKind.BRA, 0, 3, pred=0) if loop else Term(TermKind.JMP, 3)
    return [
        Block((Instr(Op.SETP, 0, 1, 2, mod=Cmp.LT),), Term(TermKind.BRA, 1, 3, pred=0)),
        Block(moved, Term(TermKind.JMP, 2)),
        Block((Instr(Op.ST, 0, 4, 3, mod=Space.GLOBAL),), tail),
        Block((), Term(TermKind.EXIT)),
    ]


NTID = Instr(Op.S2R, 3, mod=SReg.NTID_X)


def test_a_uniform_block_goes_up_into_the_branch_before_it() -> None:
    """dot's `s2r ntid` block: one ROM block (one EXEC token) less on the path through it."""
    out = hoist_into_branches(_guard_then((NTID,)))
    assert len(out) == 3 and NTID in out[0].instrs
    assert out[0].term == Term(TermKind.BRA, 1, 2, pred=0) and out[1].term.target == 2


@pytest.mark.parametrize("moved,loop", [
    ((Instr(Op.S2R, 3, mod=SReg.TID_X),), False),  # differs per lane: more write-back frames
    ((Instr(Op.LD, 3, 5, mod=Space.GLOBAL),), False),  # a load may fault
    ((NTID,), True),  # the branch runs every iteration, the block perhaps never
    ((NTID, Instr(Op.S2R, 5, mod=SReg.CTAID_X), Instr(Op.S2R, 6, mod=SReg.NCTAID_X),
      Instr(Op.S2R, 7, mod=SReg.NTID_Y)), False),  # does not fit the branch's ROM block
])
def test_blocks_that_stay(moved: tuple[Instr, ...], loop: bool) -> None:
    blocks = _guard_then(moved, loop)
    assert hoist_into_branches(blocks) == blocks


def test_a_write_the_other_path_reads_stays() -> None:
    blocks = _guard_then((NTID,))
    blocks[3] = Block((Instr(Op.ST, 0, 4, 3, mod=Space.GLOBAL),), Term(TermKind.EXIT))
    assert hoist_into_branches(blocks) == blocks


def test_a_write_the_other_path_reads_after_a_guarded_write_stays() -> None:
    """A guarded write may not happen: the value before it is still live on that path."""
    blocks = _guard_then((NTID,))
    blocks[3] = Block((Instr(Op.ADD, 3, 1, 2, guard=guard_code(1, False)), NOP,
                       Instr(Op.ST, 0, 4, 3, mod=Space.GLOBAL)), Term(TermKind.EXIT))
    assert hoist_into_branches(blocks) == blocks


LOOP_EXIT_LAST = r"""
__device__ __forceinline__ unsigned srem_(unsigned a, unsigned b) { int x = (int)a, y = (int)b;
  return y == 0 || (y == -1 && a == 0x80000000u) ? a : (unsigned)(x % y); }
extern "C" __global__ void fuzz(const unsigned* in, unsigned* out, unsigned* acc, unsigned n) {
  unsigned tid = threadIdx.x + threadIdx.y * blockDim.x;
  unsigned gid = tid + (blockIdx.x + blockIdx.y * gridDim.x) * (blockDim.x * blockDim.y);
  unsigned base = gid * 3u;
  unsigned v1 = 0u;
  #pragma unroll 1
  for (unsigned i0 = 0; i0 < min(1u, 4u); ++i0) {
    for (unsigned i1 = 0; i1 < min(srem_(gid, i0), 4u); ++i1) {
      out[base + 0] = 0u;
    }
  }
  v1 = __shfl_sync(0xffffffffu, 0u, 1u, 4);
}
"""


def test_lanes_that_leave_a_loop_wait_after_all_of_it() -> None:
    """NVRTC gave this loop its body as the header branch's target and its exit as the
    fall-through; in plain reverse post-order the exit came first, so the lanes that had left
    the loop ran it, shuffle included, without the others ("shuffle source lane 1 is inactive";
    a barrier there was "divergent"). Found by ``python -m qgpu fuzz``."""
    from qgpu.driver import compile_source

    kernel = compile_source(LOOP_EXIT_LAST).kernel()
    blocks = kernel.program.blocks
    shfl = next(i for i, b in enumerate(blocks) if any(x.op == Op.SHFL for x in b.instrs))
    store = next(i for i, b in enumerate(blocks) if any(x.op == Op.ST for x in b.instrs))
    assert store < shfl  # the loop's body before the block after the loop
    args = [[0] * 8, {"zeros": 12}, [0] * 4, 0]
    runs = [kernel.launch(grid=(1, 1), block=(4, 1), args=args, backend=b).args
            for b in ("ptx", "interp")]
    assert runs[0] == runs[1]
