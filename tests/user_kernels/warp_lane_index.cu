// Per-warp partial sums using warpSize for lane / warp ids (no shuffles).
__global__ void per_warp_sums(const int *in, int *warp_sums)
{
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    int warp = tid / warpSize;
    atomicAdd(&warp_sums[warp], in[tid]);
}
