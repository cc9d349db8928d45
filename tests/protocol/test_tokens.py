"""The token protocol: vocabulary, frames, the prompt, the expected launch and its decoding."""

import random

import pytest

from qgpu import protocol as T
from qgpu.driver import SUITE_DIR, compile_file, place_arguments
from qgpu.errors import LaunchError, UsageError
from qgpu.machine import limits
from qgpu.machine.interp import run_program


def test_vocabulary_is_unique_and_parses() -> None:
    vocab = T.vocabulary()
    assert len(vocab) == len(set(vocab)) == 107_390
    assert all(T.name(T.body(t)) == t for t in vocab)
    names = set(vocab)
    for seq in (T.frame("val:r5:all:{}", 0xDEADBEEF), T.frame("mem:s3:{}", 7),
                T.part_frame("rom:127:4:2", 0xABCDEF), T.frame("prow:{}", 0xFFFF)):
        assert set(seq) <= names


@pytest.mark.parametrize("value, length", [(0, 1), (255, 1), (256, 2), (0xFFFF, 2),
                                           (0x10000, 3), (1 << 24, 4), (-1, 4)])
def test_frames_drop_leading_zero_bytes(value: int, length: int) -> None:
    seq = T.frame("val:r1:0:{}", value)
    assert len(seq) == length
    (event,) = T.decode(seq)
    assert (event.kind, event.fields, event.value) == ("val", ("r1", "0"), value & 0xFFFFFFFF)


def test_decode_round_trips_random_frames() -> None:
    rng = random.Random(0)
    seq, want = [], []
    for _ in range(200):
        value = rng.choice([rng.randrange(256), rng.randrange(1 << 16), rng.randrange(1 << 32)])
        if rng.random() < 0.5:
            seq += T.frame(f"mem:g{rng.randrange(128)}:{{}}", value)
            want.append(value)
        else:
            part = value & 0xFFFFFF
            frame = T.part_frame(f"rom:{rng.randrange(128)}:0:1", part)
            seq += frame
            if frame:
                want.append(part)
    assert [e.value for e in T.decode(seq)] == want


def test_decode_rejects_broken_frames() -> None:
    with pytest.raises(UsageError, match="inside a frame"):
        T.decode([T.name("d1:3")])
    with pytest.raises(UsageError, match="cannot follow data"):
        T.decode([T.name("d1:3"), T.name("end")])
    with pytest.raises(UsageError, match="not a qgpu token"):
        T.decode(["hello"])


def dot_launch(a: list[int], b: list[int]):
    kernel = compile_file(SUITE_DIR / "dot.cu").kernel()
    prog = kernel.program
    args = [a, b, {"zeros": 1}, len(a)]
    place = place_arguments(kernel.ptx.params, args)
    run = run_program(prog, grid=(1, 1), block=(4, 1), params=place.params,
                      memory=place.memory, allocations=place.allocations)
    launch = T.Launch.checked(prog, (1, 1), (4, 1), place)
    return launch, run


def test_dot_product_launch_is_30_generated_tokens() -> None:
    """[1,2,3].[4,5,6]: the issue's yardstick (reference system: 47 tokens). Blocks follow the
    slot units (isa.SLOT_UNITS): the product cannot join the atomic in one block. Lane 3 has no
    element: it parks at the exit block until the others get there. blockDim.x is read in the
    entry branch's block (layout.hoist_into_branches)."""
    launch, run = dot_launch([1, 2, 3], [4, 5, 6])
    events = [str(e) for e in T.decode(T.expected_tokens(launch, run.trace))]
    assert events == [
        "exec:0:w0:m15", "val:r1:all = 4", "val:r2:all = 20", "val:r3:all = 36",
        "val:r4:all = 3",
        "exec:1:w0:m15", "val:r5:0 = 0", "val:r5:1 = 1", "val:r5:2 = 2", "val:r5:3 = 3",
        "val:r6:all = 4", "park:5:w0:m8",
        "exec:2:w0:m7", "val:r8:0 = 4", "val:r8:1 = 8", "val:r8:2 = 12", "val:r7:0 = 20",
        "val:r7:1 = 24", "val:r7:2 = 28",
        "exec:3:w0:m7", "val:r5:0 = 4", "val:r5:1 = 5", "val:r5:2 = 6", "val:r7:0 = 4",
        "val:r7:1 = 10", "val:r7:2 = 18",
        "exec:4:w0:m7", "mem:g9 = 32", "exec:5:w0:m15", "end",
    ]
    assert len(T.expected_tokens(launch, run.trace)) == 30


def test_prompt_states_rom_params_memory_and_shape() -> None:
    launch, _ = dot_launch([1, 2, 300], [4, 5, 6])
    prompt = T.prompt_tokens(launch)
    events = T.decode(prompt)
    assert prompt[-4:] == [T.name("block:4x1"), T.name("grid:1x1"), T.name("shared:0"),
                           T.name("go")]
    mem = {e.fields[0]: e.value for e in events if e.kind == "mem"}
    # a at words 1..3, guard word 4, b at 5..7, guard 8, out at 9 (zero, but allocated)
    assert mem == {"g1": 1, "g2": 2, "g3": 300, "g5": 4, "g6": 5, "g7": 6, "g9": 0}
    params = [e.value for e in events if e.kind == "param"]
    assert params == launch.params == [4, 20, 36, 3]
    rom_rows: dict[tuple[str, str], int] = {}
    for e in events:
        if e.kind == "rom":
            block, slot, part = e.fields
            rom_rows[(block, slot)] = rom_rows.get((block, slot), 0) | e.value << (24 * int(part))
    from qgpu.machine import rom
    assert {(int(b), int(s)): v for (b, s), v in rom_rows.items()} == rom.rows(launch.program)


def test_memory_rows_cover_every_space() -> None:
    rows = T.memory_rows()
    assert len(rows) == len(set(rows)) == limits.GLOBAL_WORDS + limits.SHARED_WORDS \
        + limits.WARP_LANES * limits.LOCAL_WORDS
    assert T.memory_row("global", 36) == "g9"
    assert T.memory_row("shared", 8) == "s2"
    assert T.memory_row("local", 4 * (limits.LOCAL_WORDS * 2 + 3)) == "l2.3"


def test_predicates_and_uniform_values() -> None:
    """A divergent write is per lane; a uniform one is one frame; predicates go back as the
    warp's whole predicate row."""
    from qgpu.machine.isa import Block, Cmp, Instr, Op, Program, SReg, Term, TermKind

    def imm(op, d, a, v, **kw):
        return Instr(op, d, a, imm=v, bi=True, **kw)

    prog = Program("t", (
        Block((Instr(Op.S2R, 1, mod=SReg.TID_X), imm(Op.SETP, 2, 1, 2, mod=Cmp.LT),
               imm(Op.ADD, 2, 0, 9)), Term(TermKind.JMP, 1)),
        Block((Instr(Op.SEL, 3, 1, 2, c=2), imm(Op.ADD, 4, 0, 1, guard=3)),
              Term(TermKind.JMP, 2)),
        Block((Instr(Op.ST, 0, 0, 3, imm=4),), Term(TermKind.JMP, 3)),
        Block((Instr(Op.ST, 0, 0, 4, imm=8, guard=3),), Term(TermKind.EXIT)),
    ), 1, 0, 0, 0)
    run = run_program(prog, grid=(1, 1), block=(4, 1), params=[4],
                      memory=[0] * limits.GLOBAL_WORDS)
    launch = T.Launch(prog, (1, 1), (4, 1), [4], [0] * limits.GLOBAL_WORDS, [], 0)
    events = [str(e) for e in T.decode(T.expected_tokens(launch, run.trace))]
    assert events[:5] == ["exec:0:w0:m15", "val:r1:0 = 0", "val:r1:1 = 1", "val:r1:2 = 2",
                          "val:r1:3 = 3"]
    # p2 holds for lanes 0 and 1: bits 4 * lane + 2 of the warp's predicate row (one token,
    # as lanes 2-3 have none set)
    assert "val:r2:all = 9" in events and "prow = 68" in events
    assert T.pred_row([(3, 1, True), (0, 0, True), (0, 0, False)], 0b1) == 1 << 13
    assert "val:r4:0 = 1" in events and "val:r4:1 = 1" in events  # guarded by p2: lanes 0, 1


def test_a_faulting_launch_ends_with_its_exec_and_the_fault() -> None:
    kernel = compile_file(SUITE_DIR / "dot.cu").kernel()
    args = [[1, 2, 3], [4, 5, 6], {"zeros": 1}, 4]  # n = 4: a[3] is past the allocation
    place = place_arguments(kernel.ptx.params, args)
    with pytest.raises(LaunchError) as err:
        run_program(kernel.program, grid=(1, 1), block=(4, 1), params=place.params,
                    memory=place.memory, allocations=place.allocations)
    launch = T.Launch.checked(kernel.program, (1, 1), (4, 1), place)
    stream = T.fault_tokens(launch, err.value)
    cta, block, warp, mask = err.value.block
    assert stream[-2:] == [T.name(f"exec:{block}:w{warp}:m{mask}"), T.name("fault:global_bounds")]
    execs = [e for e in T.decode(stream) if e.kind == "exec"]
    assert len(execs) == len(err.value.trace) + 1


def test_the_schedule_parks_exits_and_sweeps_warps() -> None:
    """Two warps meet at a barrier (each parks there, a sweep hands over), exit (marked, as the
    other warp's sweep reads it), and the sweep that finds every warp done starts the next thread
    block; the last one ends the launch."""
    from qgpu.machine.isa import Block, Instr, Op, Program, Space, SReg, Term, TermKind

    prog = Program("t", (
        Block((Instr(Op.S2R, 1, mod=SReg.TID_X), Instr(Op.SHL, 2, 1, imm=2, bi=True),
               Instr(Op.ST, 0, 2, 1, mod=Space.SHARED)), Term(TermKind.BAR, 1)),
        Block((Instr(Op.LD, 3, 2, mod=Space.SHARED),), Term(TermKind.EXIT)),
    ), 0, 32, 0, 0)
    run = run_program(prog, grid=(2, 1), block=(6, 1), params=[],
                      memory=[0] * limits.GLOBAL_WORDS, dynamic_shared=0)
    launch = T.Launch(prog, (2, 1), (6, 1), [], [0] * limits.GLOBAL_WORDS, [], 8)
    control = [str(e) for e in T.decode(T.expected_tokens(launch, run.trace))
               if e.kind not in ("val", "mem", "prow")]
    cta = ["exec:0:w0:m15", "park:1:w0:m15", "warp:w1", "exec:0:w1:m3", "park:1:w1:m3",
           "warp:w0", "exec:1:w0:m15", "exit:w0:m15", "warp:w1", "exec:1:w1:m3", "exit:w1:m3",
           "warp:w0", "warp:w1"]
    assert control == cta + ["cta:1"] + cta + ["end"]


def test_a_lone_warp_passes_barriers_and_leaves_no_exit_marks() -> None:
    from qgpu.machine.isa import Block, Instr, Op, Program, SReg, Term, TermKind

    prog = Program("t", (
        Block((Instr(Op.S2R, 1, mod=SReg.TID_X),), Term(TermKind.BAR, 1)),
        Block((), Term(TermKind.EXIT)),
    ), 0, 0, 0, 0)
    run = run_program(prog, grid=(2, 1), block=(3, 1), params=[],
                      memory=[0] * limits.GLOBAL_WORDS)
    launch = T.Launch(prog, (2, 1), (3, 1), [], [0] * limits.GLOBAL_WORDS, [], 0)
    assert [str(e) for e in T.decode(T.expected_tokens(launch, run.trace))] == [
        "exec:0:w0:m7", "exec:1:w0:m7", "cta:1", "exec:0:w0:m7", "exec:1:w0:m7", "end"]


def test_a_float_program_is_refused_with_its_instruction_named() -> None:
    """The circuit has no float unit yet: the model's launch refuses float instructions
    instead of computing something else."""
    from qgpu.errors import UnsupportedError
    from qgpu.machine.float32 import Round
    from qgpu.machine.isa import Instr, Op, Space
    from tests.machine.helpers import EXIT, block, imm, program

    prog = program(block((Instr(Op.LD, 1, 0, mod=Space.PARAM), imm(Op.FADD, 2, 0, 0x3F80_0000,
                                                                  mod=Round.RN),
                          Instr(Op.ST, 0, 1, 2, mod=Space.GLOBAL)), EXIT))
    place = place_arguments((), [])
    with pytest.raises(UnsupportedError, match=r"fadd\.rn r2, r0, 0x3f800000.*no float unit"):
        T.Launch.checked(prog, (1, 1), (4, 1), place)
