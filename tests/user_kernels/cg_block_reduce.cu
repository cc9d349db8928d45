// Block reduction with cooperative groups: the thread block as a group, sync instead of
// __syncthreads.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__global__ void block_reduce_cg(const int *in, int *out, int n)
{
    extern __shared__ int partial[];
    cg::thread_block block = cg::this_thread_block();
    unsigned int rank = block.thread_rank();
    unsigned int i = blockIdx.x * block.size() + rank;
    partial[rank] = (i < n) ? in[i] : 0;
    block.sync();
    for (unsigned int stride = block.size() / 2; stride > 0; stride >>= 1) {
        if (rank < stride) partial[rank] += partial[rank + stride];
        cg::sync(block);
    }
    if (rank == 0) out[blockIdx.x] = partial[0];
}
