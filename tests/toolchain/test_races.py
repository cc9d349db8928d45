"""Race warnings from CUDA kernels on both interpreters: the PTX interpreter and the machine
running the lowered program see the same launch, so they report the same races (kind, space,
word, the two threads and blocks); race-free kernels report none (the suite's 111 kernels:
tests/suite/test_suite.py)."""

import functools

import pytest

from qgpu.driver import compile_source
from qgpu.machine.races import RAW, WAR, WAW
from qgpu.toolchain.cuda import available_compilers

pytestmark = pytest.mark.skipif(not available_compilers(), reason="no CUDA compiler")

WARP_REDUCE = r"""
// A tree sum whose last steps run "as one warp": threads 0..7 fold s[] without barriers,
// trusting a 32-lane warp's lockstep. On 4-lane warps, warp 0 finishes all four steps
// before warp 1 has added its part.
__device__ void fold_without_barriers(volatile int *s, int t) {
    s[t] += s[t + 8];
    s[t] += s[t + 4];
    s[t] += s[t + 2];
    s[t] += s[t + 1];
}

extern "C" __global__ void sum_unrolled(const int *in, int *out) {
    __shared__ int s[16];
    int t = threadIdx.x;
    s[t] = in[t];
    __syncthreads();
    if (t < 8) fold_without_barriers(s, t);
    if (t == 0) out[0] = s[0];
}

extern "C" __global__ void sum_synced(const int *in, int *out) {
    __shared__ int s[16];
    int t = threadIdx.x;
    s[t] = in[t];
    __syncthreads();
    for (int half = 8; half > 0; half >>= 1) {
        if (t < half) s[t] += s[t + half];
        __syncthreads();
    }
    if (t == 0) out[0] = s[0];
}
"""

ATOMICS = r"""
extern "C" __global__ void histogram4(const int *in, int *bins) {
    __shared__ int local[4];
    int t = threadIdx.x;
    if (t < 4) local[t] = 0;
    __syncthreads();
    atomicAdd(&local[in[blockIdx.x * blockDim.x + t] & 3], 1);
    __syncthreads();
    if (t < 4) atomicAdd(&bins[t], local[t]);
}

extern "C" __global__ void cas_max(const int *in, int *best) {
    int v = in[blockIdx.x * blockDim.x + threadIdx.x];
    int old = *best, guess;  // a guess the compare-and-swap checks: no race
    do {
        guess = old;
        old = atomicCAS(best, guess, max(guess, v));
    } while (old != guess);
}

extern "C" __global__ void peek(int *counter, int *seen) {
    int t = threadIdx.x;
    if (t < 4) atomicAdd(counter, 1);  // warp 0
    else seen[t - 4] = *counter;        // warp 1, no barrier: depends on the order
}
"""

SHUFFLES = r"""
extern "C" __global__ void warp_sums(const int *in, int *out) {
    int t = threadIdx.x;
    int v = in[t];
    v += __shfl_down_sync(0xffffffff, v, 2, 4);
    v += __shfl_down_sync(0xffffffff, v, 1, 4);
    if ((t & 3) == 0) out[t >> 2] = v;
}
"""

BLOCKS = r"""
extern "C" __global__ void last_block_wins(int *out) {
    if (threadIdx.x == 0) out[0] = blockIdx.x;
}

extern "C" __global__ void reads_other_block(int *buf) {
    int t = threadIdx.x;
    if (blockIdx.x == 0) buf[t] = t + 1;
    else buf[4 + t] = buf[t];
}

extern "C" __global__ void any_negative(const int *in, int *flag) {
    if (in[blockIdx.x * blockDim.x + threadIdx.x] < 0) flag[0] = 1;
}
"""

BYTES = r"""
extern "C" __global__ void interleave(unsigned char *out) {
    int t = threadIdx.x;  // warp 0 stores bytes 0, 2, 4, 6 and warp 1 bytes 1, 3, 5, 7
    out[(t & 3) * 2 + (t >> 2)] = t + 1;
}

extern "C" __global__ void bytes_then_read(unsigned char *buf, int *seen) {
    int t = threadIdx.x;
    if (t < 4) buf[t] = t + 1;
    else seen[t - 4] = buf[t - 4];
}
"""


@functools.cache
def kernel(source: str, name: str):
    return compile_source(source).kernel(name)


def launch_both(source: str, name: str, grid: tuple, block: tuple, args: list):
    """Run on both interpreters; both must give the same values and the same races."""
    k = kernel(source, name)
    ptx = k.launch(grid=grid, block=block, args=args, backend="ptx")
    machine = k.launch(grid=grid, block=block, args=args, backend="interp")
    assert ptx.args == machine.args
    assert [r.key() for r in ptx.races] == [r.key() for r in machine.races]
    assert [r.name for r in ptx.races] == [r.name for r in machine.races]
    return ptx, machine


def test_a_warp_synchronous_reduction_is_reported_on_both_interpreters() -> None:
    values = list(range(1, 17))
    ptx, machine = launch_both(WARP_REDUCE, "sum_unrolled", (1,), (16,), [values, {"zeros": 1}])
    assert ptx.args[1] != [sum(values)]  # the wrong sum, which nothing else would say
    assert [(r.kind, r.space, r.word, r.name, r.first.op, r.first.thread, r.second.op,
             r.second.thread) for r in ptx.races] == \
        [(WAR, "shared", 4 + i, f"s[{4 + i}]", "read", i, "write", 4 + i) for i in range(4)]
    for result in (ptx, machine):
        (message, *_) = result.warnings
        assert "on a 32-lane GPU these threads may share a warp" in message
        assert "__syncthreads()" in message and "s[4]" in message
    # the PTX line; the machine block and slot, with the PTX it came from
    for where in (ptx.races[0].first.where, machine.races[0].first.where):
        assert "`ld.volatile.shared.u32 " in where and "+16]`" in where
    assert ptx.races[0].first.where.startswith("line ")
    assert machine.races[0].first.where.startswith("B")


def test_the_same_reduction_with_barriers_is_race_free() -> None:
    values = list(range(1, 17))
    ptx, machine = launch_both(WARP_REDUCE, "sum_synced", (1,), (16,), [values, {"zeros": 1}])
    assert ptx.args[1] == [sum(values)]
    assert ptx.races == machine.races == [] and ptx.warnings == []


def test_atomics_only_histogram_is_race_free() -> None:
    values = [7, 2, 3, 0, 1, 1, 5, 6, 8, 3, 2, 2, 0, 4, 9, 11] * 2
    ptx, _ = launch_both(ATOMICS, "histogram4", (2,), (16,), [values, {"zeros": 4}])
    assert ptx.args[1] == [sum(1 for v in values if v & 3 == b) for b in range(4)]
    assert ptx.races == []


def test_a_compare_and_swap_loops_first_guess_is_no_race() -> None:
    values = [3, 9, -4, 27, 8, 1, 0, 5, 6, 2, 7, 11, 30, 4, 12, 13]
    ptx, _ = launch_both(ATOMICS, "cas_max", (2,), (8,), [values, [-100]])
    assert ptx.args[1] == [30] and ptx.races == []


def test_an_atomic_and_a_plain_read_of_one_word_race() -> None:
    ptx, _ = launch_both(ATOMICS, "peek", (1,), (8,), [{"zeros": 1}, {"zeros": 4}])
    assert [(r.kind, r.name, r.first.op, r.first.warp, r.second.op, r.second.warp)
            for r in ptx.races] == [(RAW, "arg 0[0]", "atomic", 0, "read", 1)]


def test_shuffles_exchange_registers_not_memory() -> None:
    ptx, _ = launch_both(SHUFFLES, "warp_sums", (1,), (16,), [list(range(16)), {"zeros": 4}])
    assert ptx.args[1] == [6, 22, 38, 54] and ptx.races == []


def test_thread_blocks_race_on_global_memory() -> None:
    ptx, _ = launch_both(BLOCKS, "last_block_wins", (3,), (4,), [{"zeros": 1}])
    assert [(r.kind, r.between_blocks, r.first.block, r.second.block) for r in ptx.races] == \
        [(WAW, True, 0, 1)]  # block 0 stored the 0 already there; block 1's 1 changed it
    assert "no fixed order" in ptx.warnings[0]
    ptx, _ = launch_both(BLOCKS, "reads_other_block", (2,), (4,), [{"zeros": 8}])
    assert [(r.kind, r.name, r.first.block, r.first.thread, r.second.block, r.second.thread)
            for r in ptx.races] == [(RAW, f"arg 0[{i}]", 0, i, 1, i) for i in range(4)]


def test_a_flag_every_finder_sets_to_one_is_no_race() -> None:
    values = [1, -2, 3, -4] * 8
    ptx, _ = launch_both(BLOCKS, "any_negative", (2,), (16,), [values, {"zeros": 1}])
    assert ptx.args[1] == [1] and ptx.races == []


def test_bytes_of_one_word_from_two_warps_do_not_race_but_a_read_does() -> None:
    ptx, _ = launch_both(BYTES, "interleave", (1,), (8,), [{"u8": [0] * 8}])
    assert ptx.args[0] == [1, 5, 2, 6, 3, 7, 4, 8] and ptx.races == []
    ptx, _ = launch_both(BYTES, "bytes_then_read", (1,), (8,), [{"u8": [0] * 4}, {"zeros": 4}])
    assert [(r.kind, r.name, r.first.op, r.first.thread, r.second.op) for r in ptx.races] == \
        [(RAW, "arg 0[0..3]", "atomic", 0, "read")]


def test_the_fuzzers_race_free_programs_report_none_on_either_interpreter() -> None:
    """Random kernels whose shared exchanges and atomics sit between barriers, with CAS loops
    on global words from every warp and block, shuffles, divergence (qgpu.suite.fuzz)."""
    from qgpu.errors import QgpuError
    from qgpu.suite.fuzz.generate import generate
    from qgpu.suite.fuzz.run import compile_program

    ran = 0
    for index in range(30):
        p = generate(0, index)
        try:
            k = compile_program(p)
            for backend in ("ptx", "interp"):
                result = k.launch(grid=p.grid, block=p.block, args=p.args(), backend=backend)
                assert result.races == [], f"program {index}: {result.warnings[0]}"
        except QgpuError:
            continue  # over a machine limit, or a fault: the fuzzer generates another
        ran += 1
    assert ran >= 20
