// Library "max": each 4-lane warp folds its lanes' maxima with xor (butterfly) shuffles, one
// lane per warp merges into a shared word with atomicMax, then thread 0 publishes it.
extern "C" __global__ void reduce_max(const int* x, int* out, int n)
{
    __shared__ int best;
    int t = threadIdx.x;
    int m = -2147483647 - 1;
    if (t == 0) {
        best = m;
    }
    __syncthreads();
    #pragma unroll 1
    for (int i = t; i < n; i += blockDim.x) {
        m = max(m, x[i]);
    }
    m = max(m, __shfl_xor_sync(0xffffffff, m, 2, 4));
    m = max(m, __shfl_xor_sync(0xffffffff, m, 1, 4));
    if ((t & 3) == 0) {
        atomicMax(&best, m);
    }
    __syncthreads();
    if (t == 0) {
        out[0] = best;
    }
}
