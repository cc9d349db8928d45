// Calculator min(): out[0] = the smallest element of x (n >= 1). Each lane of one warp
// (blockDim.x 1, 2 or 4) takes the min of its elements, then xor shuffles merge the lanes.
extern "C" __global__ void calc_min(const int* x, int* out, int n)
{
    int t = threadIdx.x;
    int m = 2147483647;
    const int* end = x + n;
    #pragma unroll 1
    for (x += t; x < end; x += blockDim.x) {
        m = min(m, *x);
    }
    #pragma unroll 1
    for (int k = 1; k < blockDim.x; k <<= 1) {
        m = min(m, __shfl_xor_sync(0xffffffff, m, k, 4));
    }
    if (t == 0) {
        out[0] = m;
    }
}
