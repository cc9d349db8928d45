// Calculator max(): out[0] = the largest element of x (n >= 1). Each lane of one warp
// (blockDim.x 1, 2 or 4) takes the max of its elements, then xor shuffles merge the lanes.
extern "C" __global__ void calc_max(const int* x, int* out, int n)
{
    int t = threadIdx.x;
    int m = -2147483647 - 1;
    const int* end = x + n;
    #pragma unroll 1
    for (x += t; x < end; x += blockDim.x) {
        m = max(m, *x);
    }
    #pragma unroll 1
    for (int k = 1; k < blockDim.x; k <<= 1) {
        m = max(m, __shfl_xor_sync(0xffffffff, m, k, 4));
    }
    if (t == 0) {
        out[0] = m;
    }
}
