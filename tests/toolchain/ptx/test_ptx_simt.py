"""Control flow, SIMT reconvergence, barriers, scheduling, faults and launch checks."""

from __future__ import annotations

import pytest

from qgpu.errors import LaunchError, ResourceError, UsageError
from qgpu.machine import limits
from qgpu.toolchain.ptx.cfg import EXIT, build_cfg, label_pcs
from qgpu.toolchain.ptx.interp import find_kernel, run_kernel, shared_layout
from qgpu.toolchain.ptx.parser import parse_module

from .helpers import Memory, alu, entry, launch, module, read


def branch_pc(kernel, target: str) -> int:
    return next(pc for pc, i in enumerate(kernel.instructions)
                if i.opcode == "bra" and i.operands[0].name == target)


# -- control-flow graph ------------------------------------------------------------------------
def test_if_else_reconverges_at_the_join():
    k = find_kernel(module("basics.ptx"), "ifelse")
    cfg, labels = build_cfg(k), label_pcs(k)
    assert cfg.reconvergence_pc(branch_pc(k, "$L__BB2_2")) == labels["$L__BB2_3"]


def test_loop_break_and_back_edge_reconverge_after_the_loop():
    k = find_kernel(module("basics.ptx"), "loopbreak")
    cfg, labels = build_cfg(k), label_pcs(k)
    exit_block = labels["$L__BB3_4"]
    assert cfg.reconvergence_pc(branch_pc(k, "$L__BB3_4")) == exit_block
    assert cfg.reconvergence_pc(branch_pc(k, "$L__BB3_2")) == exit_block


def test_return_paths_and_endless_loops_go_to_the_virtual_exit():
    body = """
    .reg .pred %p<3>;
    .reg .b32 %r<3>;
    mov.u32 %r1, %tid.x;
    setp.eq.s32 %p1, %r1, 0;
    @%p1 ret;
    setp.eq.s32 %p2, %r1, 1;
    @%p2 bra $L_spin;
    add.s32 %r2, %r1, 1;
    ret;
$L_spin:
    bra.uni $L_spin;
    """
    k = parse_module(entry(body)).kernels[0]
    cfg = build_cfg(k)
    n = len(k.instructions)
    assert cfg.blocks[0].succs == (EXIT, 1)
    assert cfg.reconvergence_pc(2) == n  # @%p1 ret: one side returns
    # lanes that can never finish do not hold the others back: the join is the finishing side
    assert cfg.reconvergence_pc(4) == 5
    assert cfg.ipdom[cfg.block_of[7]] == EXIT


# -- SIMT execution ----------------------------------------------------------------------------
def test_divergent_if_else():
    a = [5, -3, 8, 0, 7, 1, 2, 3, -9, 10, 11, 12, 13, 14, 15, 16]
    mem = Memory()
    pa, out = mem.array(a), mem.array(16)
    run = launch("basics.ptx", "ifelse", [pa, out], mem)
    assert read(run, out, 16) == [(3 * v + 1 if v & 1 else int(v / 2)) + 7 for v in a]
    assert run.stats["divergent_branches"] == 4


def test_lanes_reconverge_before_a_shuffle():
    a = [3, 4, 9, 10, 1, 1, 2, 2, 7, 8, 5, 6, 0, -1, -2, -3]
    mem = Memory()
    pa, out = mem.array(a), mem.array(16)
    run = launch("basics.ptx", "reconverge", [pa, out], mem)
    v = [3 * x + 1 if x & 1 else int(x / 2) for x in a]
    assert read(run, out, 16) == [v[t ^ 1] for t in range(16)]


def test_loop_with_break():
    a = [5, -3, 8, 0, 7, 1, 2, 3, -9, 10, 11, 12, 13, 14, 15, 16]
    mem = Memory()
    pa, out = mem.array(a), mem.array(16)
    run = launch("basics.ptx", "loopbreak", [pa, out, 16], mem)
    expect = []
    for t in range(16):
        s = 0
        for i in range(16):
            if a[(t + i) % 16] < 0:
                break
            s += a[(t + i) % 16]
        expect.append(s)
    assert read(run, out, 16) == expect


def test_early_return_and_data_dependent_loops():
    a = [0, 1, 0, 3, 4, 0, 0, 7, 8, 9, 0, 11, 12, 0, 14, 0]
    mem = Memory()
    pa, out = mem.array(a), mem.array([-1] * 16)
    run = launch("basics.ptx", "earlyret", [pa, out], mem)
    assert read(run, out, 16) == [2 * x if x else -1 for x in a]

    def steps(x: int) -> int:
        n = 0
        while x != 1:
            x, n = (3 * x + 1 if x & 1 else x >> 1), n + 1
        return n

    mem = Memory()
    out = mem.array(16)
    run = launch("basics.ptx", "collatz", [out], mem)
    assert read(run, out, 16) == [steps(t + 1) for t in range(16)]


def test_two_dimensional_blocks_and_grids():
    mem = Memory()
    out = mem.array(32)
    run = launch("basics.ptx", "index2d", [out, 8], mem, grid=(2, 2), block=(4, 2))
    words = read(run, out, 32)
    assert words == [x * 100 + y + 2000 + 20000 + 1 for y in range(4) for x in range(8)]
    assert run.stats["blocks_run"] == 4


def test_grid_stride_loop_over_several_blocks():
    a = list(range(-10, 20))
    mem = Memory()
    pa, out = mem.array(a), mem.array(30)
    run = launch("basics.ptx", "gridstride", [pa, out, 30], mem, grid=(3, 1), block=(4, 1))
    assert read(run, out, 30) == [x * x for x in a]


def test_taken_path_runs_first():
    lines = """
    and.b32 %r6, %r1, 1;
    setp.eq.s32 %p1, %r6, 1;
    @%p1 bra $L_odd;
    atom.global.add.u32 %r10, [%rd2], 1;
    bra.uni $L_join;
$L_odd:
    atom.global.add.u32 %r10, [%rd2], 1;
$L_join:
    """
    assert [row[0] for row in alu(lines, [0] * 4)] == [2, 0, 3, 1]


# -- barriers and scheduling -------------------------------------------------------------------
def test_tree_reduction_with_syncthreads_over_4_warps():
    a = [(7 * i) % 23 - 11 for i in range(32)]
    mem = Memory()
    pa, out = mem.array(a), mem.array(2)
    run = launch("shared.ptx", "reduce16", [pa, out], mem, grid=(2, 1))
    assert read(run, out, 2) == [sum(a[:16]), sum(a[16:])]
    assert run.stats["barriers"] == 10 and run.stats["blocks_run"] == 2


def test_warps_run_until_a_barrier_in_order():
    mem = Memory()
    counter, out = mem.array(1), mem.array(48)
    run = launch("atomics.ptx", "schedule", [counter, out], mem)
    words = read(run, out, 48)
    w, lane = [t // 4 for t in range(16)], [t % 4 for t in range(16)]
    assert words[0::3] == [8 * w[t] + lane[t] for t in range(16)]
    assert words[1::3] == [8 * w[t] + 4 + lane[t] for t in range(16)]
    assert words[2::3] == [32 + t for t in range(16)]


def test_blocks_run_in_order():
    mem = Memory()
    counter, out = mem.array(1), mem.array(16)
    run = launch("atomics.ptx", "ticket", [counter, out], mem, grid=(2, 1), block=(8, 1))
    assert read(run, out, 16) == list(range(16))


def test_shared_atomics_follow_the_schedule():
    mem = Memory()
    out = mem.array(20)
    run = launch("shared.ptx", "sharedatom", [out], mem)
    assert read(run, out, 20) == [27, 28, 32, 36] + [0, 3, 3, 3] + [7] * 4 + [15] * 4 + [27] * 4


def test_exited_threads_do_not_block_a_barrier():
    a = [10 + t for t in range(16)]
    mem = Memory()
    pa, out = mem.array(a), mem.array([-1] * 16)
    run = launch("shared.ptx", "exitbarrier", [pa, out, 6], mem)
    assert read(run, out, 16) == [a[(t + 1) % 6] for t in range(6)] + [-1] * 10


def test_divergent_barrier_is_a_launch_error():
    mem = Memory()
    out = mem.array(16)
    with pytest.raises(LaunchError) as err:
        launch("shared.ptx", "divbarrier", [out], mem)
    msg = err.value.message
    assert "divergent barrier" in msg and "bar.sync 0" in msg and "tid=(0,0)" in msg
    assert "threads [0, 1]" in msg and "threads [2, 3]" in msg


def test_shared_layout_static_then_dynamic():
    two = find_kernel(module("shared.ptx"), "twoarrays")
    layout = shared_layout(two, module("shared.ptx"))
    assert layout.offsets == {"_ZZ9twoarraysE1x": 0, "_ZZ9twoarraysE1y": 16, "dyn": 48}
    dyn = find_kernel(module("shared.ptx"), "dynshared")
    assert shared_layout(dyn, module("shared.ptx"), 32).total_bytes == 32
    a = list(range(8))
    mem = Memory()
    pa, out = mem.array(a), mem.array(8)
    run = launch("shared.ptx", "dynshared", [pa, out, 8], mem, block=(8, 1), dynamic_shared=32)
    assert read(run, out, 8) == a[::-1]
    with pytest.raises(LaunchError, match=r"outside the block's 8 bytes of shared memory at "
                                          r"shared address 8 .*tid=\(2,0\)"):
        launch("shared.ptx", "dynshared", [pa, out, 8], mem, block=(8, 1), dynamic_shared=8)
    with pytest.raises(ResourceError, match="needs 260 bytes"):
        launch("shared.ptx", "dynshared", [pa, out, 8], mem, dynamic_shared=260)


# -- undefined state: registers, predicates and shared memory start undefined in every block ---
_PER_BLOCK = """
    .reg .pred %p<4>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b8 s[16];
    ld.param.u64 %rd1, [k_param_0];
    mov.u32 %r1, %ctaid.x;
    setp.eq.u32 %p1, %r1, 0;
    {first}
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
"""


def per_block(first: str) -> list[int]:
    """Run ``first`` (which should set %r2) in blocks 0 and 1; out[ctaid] = %r2."""
    mem = Memory()
    out = mem.array([-1, -1])
    m = parse_module(entry(_PER_BLOCK.replace("{first}", first)))
    return read(launch(m, None, [out], mem, grid=(2, 1), block=(1, 1)), out, 2)


def test_register_written_only_in_the_first_block_is_undefined_in_the_second():
    with pytest.raises(LaunchError) as err:
        per_block("@%p1 mov.u32 %r2, 7;")
    assert err.value.message == (
        "line 18: `st.global.u32 [%rd3], %r2`: read of %r2 before any write in this thread "
        "block (or of a value computed from such a read) (block ctaid=(1,0), thread tid=(0,0))")
    assert per_block("mov.u32 %r2, 7;") == [7, 7]


def test_shared_word_written_only_in_the_first_block_is_undefined_in_the_second():
    with pytest.raises(LaunchError) as err:
        per_block("@%p1 st.shared.u32 [s+12], 9;\n    ld.shared.u32 %r2, [s+12];")
    assert err.value.message == (
        "line 16: `ld.shared.u32 %r2, [s+12]`: read of shared memory word 3 (address 12) before "
        "any write in this thread block (block ctaid=(1,0), thread tid=(0,0))")
    assert per_block("st.shared.u32 [s+12], 9;\n    ld.shared.u32 %r2, [s+12];") == [9, 9]
    with pytest.raises(LaunchError, match=r"atom\.shared.*read of shared memory word 1 \(address "
                       r"4\) before any write in this thread block \(block ctaid=\(0,0\)"):
        per_block("atom.shared.add.u32 %r2, [s+4], 1;")


@pytest.mark.parametrize("first,what", [
    ("@%p2 mov.u32 %r2, 1;", "%p2"),  # a guard
    ("@%p2 bra $L__skip;\n    mov.u32 %r2, 1;\n$L__skip:", "%p2"),  # a branch
    ("shfl.sync.idx.b32 %r2, %r6, 0, 0x1c1f, -1;", "%r6 of source lane 0"),
    # computing from an undefined value is no error; storing the result is
    ("selp.b32 %r2, 1, 2, %p3;", "%r2"),
    ("add.s32 %r2, %r5, 1;", "%r2"),
    ("setp.eq.s32 %p2, %r5, 0;\n    selp.b32 %r2, 1, 2, %p2;", "%r2"),
    ("cvt.u64.u32 %rd3, %r5;\n    cvt.u32.u64 %r2, %rd3;", "%r2"),
])
def test_reading_before_writing_names_the_register(first: str, what: str):
    with pytest.raises(LaunchError, match=f"read of {what} before any write in this thread block "
                       r"\(or of a value computed from such a read\) \(block ctaid=\(0,0\)"):
        per_block(first)


def test_selp_reads_only_the_operand_it_selects():
    # %p1 holds in block 0 only: there selp takes 7, in block 1 the never-written %r5
    assert per_block("selp.b32 %r2, 7, %r5, %p1;\n    mov.u32 %r2, 5;") == [5, 5]
    with pytest.raises(LaunchError, match=r"^line 18: .*read of %r2 .*ctaid=\(1,0\)"):
        per_block("selp.b32 %r2, 7, %r5, %p1;")


def test_lanes_whose_guard_is_false_read_nothing():
    # %p1 holds only in block 0; the guarded-off add in block 1 does not read %r5
    assert per_block("mov.u32 %r2, 3;\n    @%p1 mov.u32 %r5, 4;\n    "
                     "@%p1 add.s32 %r2, %r5, 1;") == [5, 3]


def test_shuffle_reads_a_only_from_the_source_lane():
    body = """
    .reg .pred %p<4>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [k_param_0];
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 mov.u32 %r6, 42;
    shfl.sync.idx.b32 %r2, %r6, {src}, 0x1c1f, -1;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    """
    mem = Memory()
    out = mem.array(4)
    run = launch(parse_module(entry(body.replace("{src}", "0"))), None, [out], mem, block=(4, 1))
    assert read(run, out, 4) == [42] * 4
    with pytest.raises(LaunchError, match=r"read of %r6 of source lane 1 before .* thread "
                       r"tid=\(0,0\)"):
        launch(parse_module(entry(body.replace("{src}", "1"))), None, [out], mem, block=(4, 1))


# -- faults ------------------------------------------------------------------------------------
def test_null_pointer():
    mem = Memory()
    pa = mem.array([1])
    with pytest.raises(LaunchError) as err:
        launch("basics.ptx", "vadd", [pa, pa, 0, 1], mem, block=(1, 1))
    msg = err.value.message
    assert "null pointer dereference at global address 0" in msg
    assert "st.global.u32 [%rd10], %r8" in msg and "ctaid=(0,0), thread tid=(0,0)" in msg
    assert err.value.kind == "launch"


def test_out_of_bounds_of_every_argument_array():
    mem = Memory()
    pa, pb, pc = mem.array([1] * 4), mem.array([2] * 4), mem.array(4)
    with pytest.raises(LaunchError, match=r"out of bounds of every argument array at global "
                                          r"address 52 .*tid=\(4,0\)"):
        launch("basics.ptx", "vadd", [pa, pb, pc, 16], mem)
    run = launch("basics.ptx", "vadd", [pa, pb, pc, 4], mem)
    assert read(run, pc, 4) == [3] * 4


def test_outside_global_memory_and_misaligned():
    mem = Memory()
    with pytest.raises(LaunchError, match="address outside global memory .* at global address 512"):
        launch("basics.ptx", "vadd", [4, 4, 460, 32], mem, allocations=None)
    with pytest.raises(LaunchError, match="misaligned 32-bit access at global address 6"):
        launch("basics.ptx", "vadd", [6, 8, 40, 1], mem, allocations=None, block=(1, 1))
    with pytest.raises(LaunchError, match="misaligned 32-bit access at shared address 2"):
        alu(".shared .align 4 .b8 sh[8];\n    ld.shared.u32 %r10, [sh+2];", [0])


def test_negative_index_is_reported_as_a_negative_address():
    body = """
    .reg .b32 %r<3>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [k_param_0];
    mov.u32 %r1, -2;
    mul.wide.s32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r2, [%rd3];
    """
    with pytest.raises(LaunchError, match="outside global memory .* at global address -4"):
        launch(parse_module(entry(body)), None, [4], Memory(), block=(1, 1), allocations=None)


def test_step_limit_stops_an_endless_loop():
    mem = Memory()
    flag, out = mem.array([0]), mem.array(16)
    with pytest.raises(LaunchError, match="did not finish within 1000 warp instructions"):
        launch("basics.ptx", "spin", [flag, out], mem, step_limit=1000)
    mem.words[flag // 4] = 1
    run = launch("basics.ptx", "spin", [flag, out], mem, step_limit=1000)
    assert read(run, out, 16) == [1] * 16
    assert run.stats["warp_instructions"] <= 1000
    # 13 instructions a thread; the not-taken `@%p1 bra` is not counted for a lane
    assert run.stats["thread_instructions"] == 16 * 12


def test_fences_are_no_ops_and_nc_loads_are_plain_loads():
    mem = Memory()
    out = mem.array(2)
    assert read(launch("basics.ptx", "fences", [out], mem, block=(1, 1)), out, 2) == [1, 2]
    mem = Memory()
    pa, out = mem.array([5, 6, 7, 8]), mem.array(4)
    run = launch("basics.ptx", "restrict_nc", [pa, out], mem, block=(4, 1))
    assert read(run, out, 4) == [10, 11, 12, 13]


# -- launch checks and kernel lookup -----------------------------------------------------------
@pytest.mark.parametrize(
    ("kw", "error", "words"),
    [
        ({"block": (17, 1)}, ResourceError, "17 threads"),
        ({"block": (4, 5)}, ResourceError, "20 threads"),
        ({"grid": (17, 1)}, ResourceError, "17 blocks"),
        ({"block": (0, 1)}, UsageError, "two or three positive integers"),
        ({"params": [4, 4, 4]}, UsageError, "takes 4 parameters, 3 were given"),
        ({"params": [4, 4, 4, 1 << 32]}, UsageError, "parameter 3 (vadd_param_3)"),
        ({"memory": [0] * 5}, UsageError, f"must have {limits.GLOBAL_WORDS} words"),
        ({"dynamic_shared": -1}, UsageError, "dynamic_shared"),
    ],
)
def test_launch_checks(kw, error, words):
    m = module("basics.ptx")
    args = {"grid": (1, 1), "block": (4, 1), "params": [4, 4, 4, 0],
            "memory": [0] * limits.GLOBAL_WORDS} | kw
    with pytest.raises(error) as err:
        run_kernel(find_kernel(m, "vadd"), m, **args)
    assert words in err.value.message


def test_memory_words_come_back_signed():
    m = module("basics.ptx")
    memory = [0] * limits.GLOBAL_WORDS
    memory[1], memory[2] = 0xFFFFFFFF, 0x7FFFFFFF
    run = run_kernel(find_kernel(m, "vadd"), m, grid=(1, 1), block=(1, 1),
                     params=[4, 8, 12, 1], memory=memory)
    assert run.memory[1:4] == [-1, 0x7FFFFFFF, 0x7FFFFFFE]
    assert memory[3] == 0  # the caller's list is not modified


def test_find_kernel():
    m = module("basics.ptx")
    assert find_kernel(m, "vadd").name == "vadd"
    with pytest.raises(UsageError, match="11 kernels, name one of: vadd, index2d"):
        find_kernel(m, None)
    with pytest.raises(UsageError, match="no kernel named 'nope'"):
        find_kernel(m, "nope")
    mangled = parse_module(entry("ret;").replace(".entry k(", ".entry _Z4scanPii("))
    assert find_kernel(mangled, "scan").name == "_Z4scanPii"
    assert find_kernel(mangled, None).name == "_Z4scanPii"
    with pytest.raises(UsageError, match="no kernel named 'sca'"):
        find_kernel(mangled, "sca")


def test_clang_output_runs_like_the_source_says():
    a = [(5 * i) % 13 - 4 for i in range(32)]
    mem = Memory()
    pa, pb, out = mem.array(a[:16]), mem.array(a[16:]), mem.array(16)
    run = launch("clang.ptx", "vadd", [pa, pb, out, 16], mem)
    assert read(run, out, 16) == [x + y for x, y in zip(a[:16], a[16:], strict=True)]
    mem = Memory()
    pa, total = mem.array(a), mem.array(1)
    run = launch("clang.ptx", "reduce16", [pa, total], mem, grid=(2, 1))
    assert read(run, total, 1) == [sum(a)]
    mem = Memory()
    pa, out = mem.array(a[:16]), mem.array(16)
    run = launch("clang.ptx", "warpsum", [pa, out], mem)
    sums = [sum(a[4 * g : 4 * g + 4]) for g in range(4)]
    assert read(run, out, 4) == [int(s / 7) + (s < 3) for s in sums]


def test_narrow_and_wide_scalar_parameters():
    body = """
    .reg .b16 %rs<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [k_param_0];
    ld.param.s8 %r1, [k_param_1];
    ld.param.u16 %rs1, [k_param_2];
    cvt.u32.u16 %r2, %rs1;
    ld.param.u64 %rd2, [k_param_3];
    cvt.u32.u64 %r3, %rd2;
    st.global.u32 [%rd1], %r1;
    st.global.u32 [%rd1+4], %r2;
    st.global.u32 [%rd1+8], %r3;
    """
    types = ["u64", "s8", "u16", "u64"]
    params = ", ".join(f".param .{t} k_param_{i}" for i, t in enumerate(types))
    mem = Memory()
    out = mem.array(3)
    run = launch(parse_module(entry(body, params)), None, [out, 0x1FE, -1, 12345], mem,
                 block=(1, 1))
    assert read(run, out, 3) == [-2, 0xFFFF, 12345]
