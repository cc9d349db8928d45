// Per-warp sums with __shfl_down_sync at width 4: lane 0 of each 4-lane warp ends with the
// warp's total and stores it to out[warp]. Lanes past n contribute 0.
extern "C" __global__ void warp_sum_down(const int* x, int* out, int n)
{
    int gid = blockIdx.x * blockDim.x + threadIdx.x;
    int v = gid < n ? x[gid] : 0;
    v += __shfl_down_sync(0xffffffff, v, 2, 4);
    v += __shfl_down_sync(0xffffffff, v, 1, 4);
    if ((threadIdx.x & 3) == 0 && gid < n) {
        out[gid >> 2] = v;
    }
}
