// Calculator argmin(): out[0] = the index of the smallest element of x (n >= 1), the first one
// on ties. Each lane of one warp (blockDim.x 1, 2 or 4) keeps its best (value, index) pair,
// then xor shuffles merge the lanes' pairs: the better value wins, equal values the smaller
// index, so the answer does not depend on the order the pairs meet in.
__device__ __forceinline__ void take(int& v, int& i, int ov, int oi)
{
    bool better = ov < v || (ov == v && oi < i);
    v = better ? ov : v;
    i = better ? oi : i;
}

extern "C" __global__ void calc_argmin(const int* x, int* out, int n)
{
    int t = threadIdx.x;
    int bv = 2147483647;
    int bi = 2147483647;
    #pragma unroll 1
    for (int i = t; i < n; i += blockDim.x) {
        take(bv, bi, x[i], i);
    }
    #pragma unroll 1
    for (int k = 1; k < blockDim.x; k <<= 1) {
        int ov = __shfl_xor_sync(0xffffffff, bv, k, 4);
        int oi = __shfl_xor_sync(0xffffffff, bi, k, 4);
        take(bv, bi, ov, oi);
    }
    if (t == 0) {
        out[0] = bi;
    }
}
