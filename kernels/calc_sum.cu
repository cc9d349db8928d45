// Calculator sum(): out[0] = the sum of x, exact or flagged. Each lane of one warp (blockDim.x
// 1, 2 or 4) adds its elements as 64-bit (high word: the sign, plus the low word's carry),
// the lanes' sums meet by xor shuffles, and lane 0 writes the low word; flag[0] = 1 when the
// sum leaves int32 (its high word is not the low word's sign). 127 words never come near 2^63.
__device__ __forceinline__ void add64(int& hi, unsigned& lo, int bhi, unsigned blo)
{
    lo += blo;
    hi += bhi + (lo < blo ? 1 : 0);
}

extern "C" __global__ void calc_sum(const int* x, int* out, int* flag, int n)
{
    int t = threadIdx.x;
    int hi = 0;
    unsigned lo = 0;
    const int* end = x + n;
    #pragma unroll 1
    for (x += t; x < end; x += blockDim.x) {
        int v = *x;
        add64(hi, lo, v >> 31, (unsigned)v);
    }
    #pragma unroll 1
    for (int m = 1; m < blockDim.x; m <<= 1) {
        add64(hi, lo, __shfl_xor_sync(0xffffffff, hi, m, 4),
              __shfl_xor_sync(0xffffffff, lo, m, 4));
    }
    if (t == 0) {
        out[0] = (int)lo;
        if (hi != ((int)lo >> 31)) {
            flag[0] = 1;
        }
    }
}
