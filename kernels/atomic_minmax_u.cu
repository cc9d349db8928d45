// Unsigned atomicMin/atomicMax on shared words (seeded by thread 0 behind a barrier): values
// with the top bit set count as large, unlike the signed version.
extern "C" __global__ void atomic_minmax_u(const unsigned* x, unsigned* mm, int n)
{
    __shared__ unsigned lo;
    __shared__ unsigned hi;
    int t = threadIdx.x;
    if (t == 0) {
        lo = 0xffffffffu;
        hi = 0u;
    }
    __syncthreads();
    #pragma unroll 1
    for (int i = t; i < n; i += blockDim.x) {
        atomicMin(&lo, x[i]);
        atomicMax(&hi, x[i]);
    }
    __syncthreads();
    if (t == 0) {
        mm[0] = lo;
        mm[1] = hi;
    }
}
