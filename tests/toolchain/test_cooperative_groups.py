"""#include <cooperative_groups.h> and <cuda_runtime.h> compile (NVRTC gets the headers of the
pinned wheels); thread-block groups and tiles of up to 4 threads run exactly, wider tiles are
rejected naming the 4-lane warp."""

from __future__ import annotations

import pytest

from qgpu.toolchain.cuda import cuda_include_dirs

from .both import error_both, needs_compiler, run_both

pytestmark = [needs_compiler, pytest.mark.skipif(not cuda_include_dirs(), reason="no CUDA "
                                                 "header wheels (nvidia-cuda-runtime, -cccl)")]

SRC = """
#include <cooperative_groups.h>
#include <cuda_runtime.h>
namespace cg = cooperative_groups;

extern "C" __global__ void block_sum(const int *in, int *out) {
    __shared__ int s[16];
    cg::thread_block cta = cg::this_thread_block();
    unsigned r = cta.thread_rank();
    s[r] = in[blockIdx.x * cta.size() + r];
    cg::sync(cta);
    for (unsigned k = cta.size() / 2; k > 0; k /= 2) {
        if (r < k) s[r] += s[r + k];
        cta.sync();
    }
    if (r == 0) out[blockIdx.x] = s[0] * 100 + cta.size();
}

template <typename Tile>
__device__ int tile_sum(const Tile &t, int v) {
    for (int o = t.size() / 2; o > 0; o /= 2) v += t.shfl_down(v, o);
    return v;
}

extern "C" __global__ void tiles4(const int *in, int *out) {
    cg::thread_block cta = cg::this_thread_block();
    cg::thread_block_tile<4> t = cg::tiled_partition<4>(cta);
    int v = tile_sum(t, in[cta.thread_rank()]);
    t.sync();
    if (t.thread_rank() == 0) out[t.meta_group_rank()] = v;
}

extern "C" __global__ void tiles2(const int *in, int *out) {
    cg::thread_block cta = cg::this_thread_block();
    auto t = cg::tiled_partition<2>(cta);
    int v = in[cta.thread_rank()];
    v += t.shfl_xor(v, 1);
    t.sync();
    out[cta.thread_rank()] = v * 10 + t.thread_rank();
}

extern "C" __global__ void tiles8(const int *in, int *out) {
    cg::thread_block cta = cg::this_thread_block();
    auto t = cg::tiled_partition<8>(cta);
    t.sync();
    out[cta.thread_rank()] = in[cta.thread_rank()] + t.thread_rank();
}

extern "C" __global__ void tiles32(const int *in, int *out) {
    cg::thread_block cta = cg::this_thread_block();
    auto t = cg::tiled_partition<32>(cta);
    out[cta.thread_rank()] = tile_sum(t, in[cta.thread_rank()]);
}

extern "C" __global__ void divergent_tile(int *out) {
    auto t = cg::tiled_partition<4>(cg::this_thread_block());
    if (t.thread_rank() < 2) t.sync();
    out[threadIdx.x] = 1;
}
"""


@pytest.mark.parametrize("block", [(8,), (4, 2), (2, 2, 2)])
def test_a_thread_block_group_in_1d_2d_and_3d_blocks(block):
    data = list(range(3, 19))
    r = run_both(SRC, "block_sum", [data, {"zeros": 2}], grid=(2,), block=block)
    assert r.args[1] == [sum(data[0:8]) * 100 + 8, sum(data[8:16]) * 100 + 8]


def test_tiles_of_four_are_the_machines_warps():
    data = [5, -3, 8, 1, 0, 9, -7, 2, 4, 4, 4, 4]
    r = run_both(SRC, "tiles4", [data, {"zeros": 3}], block=(12,))
    assert r.args[1] == [sum(data[i:i + 4]) for i in range(0, 12, 4)]


def test_tiles_of_two():
    data = [1, 2, 3, 4, 5, 6, 7, 8]
    out = run_both(SRC, "tiles2", [data, {"zeros": 8}], block=(8,)).args[1]
    assert out == [(data[i] + data[i ^ 1]) * 10 + i % 2 for i in range(8)]


@pytest.mark.parametrize(("kernel", "words"), [("tiles8", "over 8 threads"),
                                               ("tiles32", "32-lane segments")])
def test_tiles_wider_than_a_warp_are_rejected(kernel, words):
    for err in error_both(SRC, kernel, [[1] * 8, {"zeros": 8}], block=(8,)):
        assert err.kind == "unsupported" and words in err.message and "4 lanes" in err.message


def test_a_tile_sync_reached_by_part_of_the_tile_faults():
    for err in error_both(SRC, "divergent_tile", [{"zeros": 4}], block=(4,)):
        assert err.kind == "launch"
