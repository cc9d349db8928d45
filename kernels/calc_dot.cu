// Calculator "@" of two vectors (and norm2(x) as x @ x): out[0] = a . b, exact or flagged.
// Each lane of one warp (blockDim.x 1, 2 or 4) sums its products as 64-bit: __mulhi gives a
// product's high word, the low words add with a carry. The lanes' sums meet by xor shuffles
// (with the guard below) and lane 0 writes the low word. flag[0] = 1 when the result leaves
// int32 (the high word is not the low word's sign), or when a partial sum, in any lane or
// where lanes meet, leaves [-2^62, 2^62): from there a 64-bit sum could wrap, and no int32
// result is that far away.
__device__ __forceinline__ void add64(int& hi, unsigned& lo, int& far, int bhi, unsigned blo)
{
    lo += blo;
    hi += bhi + (lo < blo ? 1 : 0);
    far |= hi ^ (hi << 1);
}

extern "C" __global__ void calc_dot(const int* a, const int* b, int* out, int* flag, int n)
{
    int t = threadIdx.x;
    int hi = 0;
    unsigned lo = 0;
    int far = 0;
    const int* end = a + n;
    #pragma unroll 1
    for (a += t, b += t; a < end; a += blockDim.x, b += blockDim.x) {
        int x = *a;
        int y = *b;
        add64(hi, lo, far, __mulhi(x, y), (unsigned)x * (unsigned)y);
    }
    #pragma unroll 1
    for (int m = 1; m < blockDim.x; m <<= 1) {
        far |= __shfl_xor_sync(0xffffffff, far, m, 4);
        add64(hi, lo, far, __shfl_xor_sync(0xffffffff, hi, m, 4),
              __shfl_xor_sync(0xffffffff, lo, m, 4));
    }
    if (t == 0) {
        out[0] = (int)lo;
        if (far < 0 || hi != ((int)lo >> 31)) {
            flag[0] = 1;
        }
    }
}
