"""Slots execute inside the EXEC pass: operands (register file copies, in-block patches,
immediates), guards, and the units built so far give, per slot and lane, the values the
reference machine computes (weight-free evaluator over real suite launches)."""

import itertools

import pytest

from qgpu import protocol as T
from qgpu.circuits.gpu import encoding, machine
from qgpu.compiler.evaluate import Evaluator
from qgpu.machine import limits
from qgpu.machine.interp import MASK32, _plop, alu, atomic, compare, s32, shuffle_lane
from qgpu.machine.isa import (
    ATOMIC_OPS,
    INDEX_UNSIGNED,
    INDEXED,
    Op,
    Space,
    TermKind,
    guard_parts,
    writes_memory,
)
from tests.circuits.helpers import launch_stream, value

KERNELS = ("dot", "vec_max", "index_2d", "copy", "reduce_multiblock", "minmax_abs", "count_if",
           "bits_shift_var", "xorshift32", "divergent_if_else", "gray_code", "bits_masks",
           "reduce_sum", "nested_loops", "loop_break_continue", "dot_shared",
           "matmul4_regs", "bits_popc_clz", "shfl_broadcast", "warp_sum_down", "mulhi")  # fmt: skip
"""Launches with several warps and thread blocks, 2-D shapes, divergence, loops and both
high multiplies."""
STORING = ("reduce_sum", "dot_shared", "matmul4_regs", "dot")  # known stores / atomics: checked
BRANCHING = ("dot", "divergent_if_else", "index_2d", "loop_break_continue")  # known predicates


@pytest.fixture(scope="module")
def graph():
    return machine.build()


@pytest.mark.slow
@pytest.mark.parametrize("name", KERNELS)
def test_slots_compute_what_the_machine_computes(graph, name: str) -> None:
    launch, run, stream = launch_stream(name)
    ev = Evaluator(graph)
    regs: dict[tuple, int] = {}  # (cta, warp, lane, reg) -> value after the blocks so far
    preds: dict[tuple, bool] = {}
    memory = {("global", 4 * i): v & MASK32 for i, v in enumerate(launch.memory)}
    trace = iter(run.trace)
    checked = stores_checked = branches = 0
    for token in stream:
        vals = ev.step(encoding.features(token))
        if not T.body(token).startswith("exec:"):
            continue
        rec = next(trace)
        assert vals["x.fault"] == [0] * len(T.FAULTS), (name, rec.block)  # no false alarm
        key = (rec.cta, rec.warp)
        r = {(ln, i): regs.get((*key, ln, i), 0) for ln in range(4) for i in range(16)}
        p = {(ln, i): preds.get((*key, ln, i), False) for ln in range(4) for i in range(4)}
        block_words: dict[tuple, int] = {}  # words the block's atomic wrote so far
        for s, ins in enumerate(launch.program.blocks[rec.block].instrs):
            if writes_memory(ins):
                assert store_records(vals, s) == [(sp, a, v & MASK32) for sp, a, v in rec.mem]
                stores_checked += 1
            outs = [value(vals[f"x{s}.out{ln}"]) for ln in range(limits.WARP_LANES)]
            for ln in range(limits.WARP_LANES):  # the digits the outbox's lane tests compare
                assert vals[f"x{s}.rpk{ln}"] == [outs[ln] >> 4 * k & 15 for k in range(8)], \
                    (name, rec.block, s, ln)
            gp = guard_parts(ins.guard)
            for ln in range(limits.WARP_LANES):
                ex = bool(rec.mask >> ln & 1) and (gp is None or p[(ln, gp[0])] != gp[1])
                assert vals[f"x{s}.ex{ln}"] == [int(ex)], (name, rec.block, s, ln)
                if not ex:
                    continue
                source = ln  # whose register a the lane reads
                if ins.op == Op.SHFL:
                    bval = (ins.imm if ins.bi else r[(ln, ins.b)]) & 31
                    source = shuffle_lane(ins.mod, bval, ins.c, 4 * rec.warp + ln) - 4 * rec.warp
                a, b = r[(ln, ins.a)], ins.imm & MASK32 if ins.bi else r[(ln, ins.b)]
                if ins.op == Op.ST:
                    pass  # its memory records are checked for the whole warp above
                elif ins.op in ATOMIC_OPS:  # lanes in order, each after the ones before
                    where = ("global" if ins.op == Op.ATOMG else "shared", (a + ins.imm) & MASK32)
                    old = block_words.get(where, memory.get(where))
                    new = atomic(ins.mod, old, r[(ln, ins.b)], r[(ln, ins.c)]) & MASK32
                    block_words[where] = new
                    assert (value(vals[f"a.o{ln}"]), value(vals[f"a.n{ln}"])) == (old, new), \
                        (name, rec.block, s, ln, ins)
                    if ins.d:
                        r[(ln, ins.d)] = old
                elif ins.op == Op.S2R:
                    t, (bx, by), (gx, gy) = 4 * rec.warp + ln, launch.block, launch.grid
                    want = (t % bx, t // bx, bx, by, rec.cta % gx, rec.cta // gx, gx, gy)[ins.mod]
                    assert value(vals[f"x{s}.out{ln}"]) == want, (name, rec.block, s, ln, ins)
                    if ins.d:
                        r[(ln, ins.d)] = want
                elif ins.op == Op.LD:
                    space = Space(ins.mod & 3)
                    if space == Space.PARAM:
                        want = launch.params[ins.imm // 4] & MASK32
                    else:
                        where = (r[(ln, ins.a)] + ins.imm) & MASK32
                        if ins.mod & INDEXED:  # a + 4 * index (signed unless marked)
                            index = r[(ln, ins.b)]
                            index = index if ins.mod & INDEX_UNSIGNED else s32(index)
                            where = (r[(ln, ins.a)] + 4 * index) & MASK32
                        owner = (rec.warp, ln) if space == Space.LOCAL else ()
                        want = memory[(space.name.lower(), where, *owner)]
                    assert value(vals[f"x{s}.out{ln}"]) == want, (name, rec.block, s, ln, ins)
                    if ins.d:
                        r[(ln, ins.d)] = want
                elif ins.op in (Op.SETP, Op.PLOP):
                    want = compare(ins, a, b) if ins.op == Op.SETP else \
                        _plop(ins, [p[(ln, i)] for i in range(limits.NUM_PREDS)])
                    assert vals[f"x{s}.pres{ln}"] == [int(want)], (name, rec.block, s, ln)
                    p[(ln, ins.d)] = want
                else:
                    if ins.op == Op.SHFL:
                        want = r[(source, ins.a)]
                    elif ins.op == Op.SEL:
                        want = a if p[(ln, ins.c)] != bool(ins.mod & 1) else b
                    else:
                        want = alu(ins.op, a, b, r[(ln, ins.c)]) & MASK32
                    assert value(vals[f"x{s}.out{ln}"]) == want, (name, rec.block, s, ln, ins)
                    if ins.d:
                        r[(ln, ins.d)] = want
                assert vals[f"x{s}.wr{ln}"] == [int(ins.op not in (Op.SETP, Op.PLOP)
                                                    and ins.d != 0)]
                checked += 1
        term = launch.program.blocks[rec.block].term
        if term.kind == TermKind.BRA:
            taken = [int(bool(rec.mask >> ln & 1) and p[(ln, term.pred)] != term.negated)
                     for ln in range(limits.WARP_LANES)]
            assert vals["t.taken"] == taken, (name, rec.block)
            branches += 1
        for ln, reg, v, _ in rec.regs:
            regs[(*key, ln, reg)] = v & MASK32
        for ln, q, v in rec.preds:
            preds[(*key, ln, q)] = v
        for space, where, v in rec.mem:
            if space == "local":  # lane * LOCAL_WORDS * 4 + address
                lane, where = divmod(where, 4 * limits.LOCAL_WORDS)
                memory[(space, where, rec.warp, lane)] = v & MASK32
            else:
                memory[(space, where)] = v & MASK32
    assert checked > 0
    if name in BRANCHING:
        assert branches > 0
    if name in STORING:
        assert stores_checked > 0


def store_records(vals: dict, s: int) -> list[tuple[str, int, int]]:
    """The records slot s's store or atomic leaves (memory.store_records), as the trace states
    them."""
    out = []
    stored = "a.n{}" if vals[f"x{s}.atm"] == [1] else f"x{s}.v{{}}"
    for ln in range(limits.WARP_LANES):
        if vals[f"x{s}.keep{ln}"] == [1]:
            space = ("global", "shared", "local")[vals[f"x{s}.sp{ln}"].index(1)]
            where = 4 * value(vals[f"x{s}.sum{ln}"][2:9])
            if space == "local":
                where += ln * limits.LOCAL_WORDS * 4
            out.append((space, where, value(vals[stored.format(ln)])))
    return out


def test_shuffle_sources_cover_every_case() -> None:
    """The SHFL unit's table (memory.shuffle_sources) against the interpreter on every mode,
    bval, shape, warp and lane."""
    from qgpu.circuits.gpu.memory import shuffle_sources
    from qgpu.machine.isa import Shfl

    for lane in range(limits.WARP_LANES):
        table = shuffle_sources(lane)
        for mode, bval, shape, warp in itertools.product(Shfl, range(32), range(16), range(4)):
            have = {"mode": int(mode), "w0": warp & 1, "w1": warp >> 1,
                    **{f"b{i}": bval >> i & 1 for i in range(5)},
                    **{f"c{i}": shape >> i & 1 for i in range(4)}}
            hits = [src for conds, src in table if all(have[k] == v for k, v in conds)]
            j = shuffle_lane(mode, bval, shape, 4 * warp + lane) - 4 * warp
            want = j if 0 <= j < limits.WARP_LANES else None
            assert hits == ([] if want == lane else [want]), (lane, mode, bval, shape, warp)


def _faults():
    """Small programs that fault, with the launch shape and the allocations (words 1..4)."""
    from qgpu.machine.isa import Instr, Shfl, SReg, Term, TermKind
    from tests.machine.helpers import EXIT, block, imm, program

    tid = Instr(Op.S2R, 1, mod=SReg.TID_X)

    def load(address: int) -> tuple:
        return (imm(Op.ADD, 1, 0, address), Instr(Op.LD, 2, 1, mod=Space.GLOBAL))

    return {
        "null": (program(block(load(0), EXIT)), (1, 1)),
        "misaligned": (program(block(load(6), EXIT)), (1, 1)),
        "global_bounds": (program(block(load(512), EXIT)), (1, 1)),
        "unallocated": (program(block(load(64), EXIT)), (1, 1)),
        # lanes 0, 1 load words 2, 1; lane 2 the null word, lane 3 beyond memory: lane 2 first
        "lane_order": (program(block((tid, imm(Op.ADD, 3, 0, 8)), Term(TermKind.JMP, 1)),
                               block((Instr(Op.MAD, 1, 1, imm=-4, bi=True, c=3),
                                      Instr(Op.LD, 2, 1, mod=Space.GLOBAL)), EXIT)), (4, 1)),
        # slot 0's load is fine, slot 2's is not
        "second_slot": (program(block((Instr(Op.LD, 2, 0, imm=4, mod=Space.GLOBAL),
                                       Instr(Op.LD, 3, 0, imm=1, mod=Space.GLOBAL)), EXIT)),
                        (1, 1)),
        "shared_bounds": (program(block((imm(Op.ADD, 1, 0, 8),
                                         Instr(Op.ST, 0, 1, 1, mod=Space.SHARED)), EXIT),
                                  shared=8), (1, 1)),
        "local_bounds": (program(block((Instr(Op.ST, 0, 0, 0, imm=64, mod=Space.LOCAL),), EXIT)),
                         (1, 1)),
        "shuffle_inactive": (program(block((tid, Instr(Op.SHFL, 2, 1, imm=3, bi=True, c=0b0011,
                                                       mod=Shfl.IDX)), EXIT)), (2, 1)),
        "shuffle_outside": (program(block((tid, Instr(Op.SHFL, 2, 1, imm=4, bi=True, c=0b0011,
                                                      mod=Shfl.BFLY)), EXIT)), (8, 1)),
    }


@pytest.mark.parametrize("case", ["null", "misaligned", "global_bounds", "unallocated",
                                  "lane_order", "second_slot", "shared_bounds", "local_bounds",
                                  "shuffle_inactive", "shuffle_outside"])
def test_faults_are_found_in_the_exec_pass(graph, case: str) -> None:
    """The block's first fault (slot order, then lane order) is the interpreter's."""
    from qgpu.errors import LaunchError
    from qgpu.machine.interp import run_program

    prog, shape = _faults()[case]
    memory, allocations = [0] * limits.GLOBAL_WORDS, [(4, 16)]
    with pytest.raises(LaunchError) as err:
        run_program(prog, grid=(1, 1), block=shape, params=[4], memory=memory,
                    allocations=allocations)
    launch = T.Launch(prog, (1, 1), shape, [4], memory, allocations, prog.shared_bytes(0) // 4)
    stream = T.prompt_tokens(launch) + T.fault_tokens(launch, err.value)
    assert stream[-1] == T.name(f"fault:{err.value.fault}")
    ev = Evaluator(graph)
    for token in stream[:-1]:
        vals = ev.step(encoding.features(token))
    want = [int(f == err.value.fault) for f in T.FAULTS]
    assert vals["x.fault"] == want, (case, err.value.message)


def test_store_records_keep_the_last_lane_per_word(graph) -> None:
    """Lanes storing to one word: one record, the last lane's, at that lane's place."""
    from qgpu.machine.interp import run_program
    from qgpu.machine.isa import Instr, SReg, Term, TermKind
    from tests.machine.helpers import EXIT, block, imm, program

    tid, base = Instr(Op.S2R, 1, mod=SReg.TID_X), Instr(Op.LD, 2, 0, mod=Space.PARAM)
    cases = {  # address of each lane -> the records in lane order
        "one word": (imm(Op.ADD, 3, 2, 0), [("global", 4, 3)]),
        "two words": (imm(Op.AND, 3, 1, 1), [("global", 4, 2), ("global", 8, 3)]),
    }
    for what, (address, want) in cases.items():
        code = [tid, base, address]
        if what == "two words":  # r3 = base + 4 * (tid & 1)
            code += [imm(Op.SHL, 3, 3, 2)]
            prog = program(block(tuple(code), Term(TermKind.JMP, 1)),
                           block((Instr(Op.ADD, 3, 3, 2), Instr(Op.ST, 0, 3, 1,
                                                                 mod=Space.GLOBAL)), EXIT))
        else:
            prog = program(block(tuple(code), Term(TermKind.JMP, 1)),
                           block((Instr(Op.ST, 0, 3, 1, mod=Space.GLOBAL),), EXIT))
        memory, allocations = [0] * limits.GLOBAL_WORDS, [(4, 16)]
        run = run_program(prog, grid=(1, 1), block=(4, 1), params=[4], memory=memory,
                          allocations=allocations)
        assert [list(r.mem) for r in run.trace if r.mem] == [want]
        launch = T.Launch(prog, (1, 1), (4, 1), [4], memory, allocations, 0)
        ev, trace = Evaluator(graph), iter(run.trace)
        for token in T.prompt_tokens(launch) + T.expected_tokens(launch, run.trace):
            vals = ev.step(encoding.features(token))
            if T.body(token).startswith("exec:"):
                rec = next(trace)
                for s, ins in enumerate(prog.blocks[rec.block].instrs):
                    if ins.op == Op.ST:
                        assert store_records(vals, s) == want, what
