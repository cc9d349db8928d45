// Library "argmin": (value, index) pairs folded by xor shuffles inside each 4-lane warp, then
// the four warp winners are merged by thread 0 through shared memory. Ties: smaller index.
__device__ __forceinline__ void take_min(int& v, int& i, int ov, int oi)
{
    if (ov < v || (ov == v && oi < i)) {
        v = ov;
        i = oi;
    }
}

extern "C" __global__ void argmin(const int* x, int* out, int n)
{
    __shared__ int wv[4];
    __shared__ int wi[4];
    int t = threadIdx.x;
    int bv = 2147483647;
    int bi = 2147483647;
    #pragma unroll 1
    for (int i = t; i < n; i += blockDim.x) {
        take_min(bv, bi, x[i], i);
    }
    #pragma unroll 1
    for (int m = 1; m < 4; m <<= 1) {
        int ov = __shfl_xor_sync(0xffffffff, bv, m, 4);
        int oi = __shfl_xor_sync(0xffffffff, bi, m, 4);
        take_min(bv, bi, ov, oi);
    }
    if ((t & 3) == 0) {
        wv[t >> 2] = bv;
        wi[t >> 2] = bi;
    }
    __syncthreads();
    if (t == 0) {
        #pragma unroll 1
        for (int w = 1; w < 4; ++w) {
            take_min(bv, bi, wv[w], wi[w]);
        }
        out[0] = bi;
    }
}
