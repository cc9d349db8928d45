"""3-D grids and blocks: blockIdx/threadIdx/blockDim/gridDim .z on both interpreters."""

from __future__ import annotations

import itertools

import pytest

from qgpu.errors import ResourceError

from .both import error_both, needs_compiler, run_both

pytestmark = needs_compiler

SRC = """
extern "C" __global__ void ids(int *out) {
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    int n = blockDim.x * blockDim.y * blockDim.z;
    out[b * n + t] = threadIdx.z * 1000 + threadIdx.y * 100 + threadIdx.x * 10 + blockIdx.z
        + (blockIdx.y << 12) + (gridDim.z << 16) + (blockDim.z << 20) + (blockDim.y << 24);
}
extern "C" __global__ void plain2d(int *out) {
    out[(blockIdx.y * gridDim.x + blockIdx.x) * 4 + threadIdx.y * blockDim.x + threadIdx.x]
        = threadIdx.y * 10 + blockIdx.y;
}
"""


@pytest.mark.parametrize(("grid", "block"), [((2, 1, 2), (2, 2, 3)), ((1, 2, 3), (1, 3, 2)),
                                             ((3, 1, 1), (4, 1, 4))])
def test_every_thread_sees_its_3d_coordinates(grid, block):
    n = block[0] * block[1] * block[2]
    out = run_both(SRC, "ids", [{"zeros": n * grid[0] * grid[1] * grid[2]}],
                   grid=grid, block=block).args[0]
    for bz, by, bx in itertools.product(*(range(g) for g in reversed(grid))):
        b = bx + grid[0] * (by + grid[1] * bz)
        for z, y, x in itertools.product(*(range(d) for d in reversed(block))):
            t = x + block[0] * (y + block[1] * z)
            assert out[b * n + t] == (z * 1000 + y * 100 + x * 10 + bz + (by << 12)
                                      + (grid[2] << 16) + (block[2] << 20) + (block[1] << 24))


def test_a_2d_kernel_launched_with_a_z_extent():
    out = run_both(SRC, "plain2d", [{"zeros": 8}], grid=(1, 2, 2), block=(2, 2, 2)).args[0]
    assert out == [0, 0, 10, 10, 1, 1, 11, 11]


def test_the_totals_hold_in_three_dimensions():
    for err in error_both(SRC, "ids", [{"zeros": 24}], block=(4, 2, 3)):
        assert isinstance(err, ResourceError) and "24 threads" in err.message
    for err in error_both(SRC, "ids", [{"zeros": 4}], grid=(3, 3, 2), block=(1,)):
        assert isinstance(err, ResourceError) and "18 blocks" in err.message
