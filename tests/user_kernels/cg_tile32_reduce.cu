// The same tile reduction as cg_tile_reduce.cu, written for a 32-thread warp tile.
// (a real GPU warp); TILE is 32 here.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#ifndef TILE
#define TILE 32
#endif

__global__ void tile_reduce(const int *in, int *total, int n)
{
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<TILE> tile = cg::tiled_partition<TILE>(block);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = (i < n) ? in[i] : 0;
    for (int offset = tile.size() / 2; offset > 0; offset /= 2)
        v += tile.shfl_down(v, offset);
    if (tile.thread_rank() == 0) atomicAdd(total, v);
}
