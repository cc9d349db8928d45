// Calculator "*": c = a * b elementwise, exact or flagged; masks broadcast a scalar as in
// calc_add. The low word is the product mod 2^32, __mulhi gives the high word of the 64-bit
// product, and flag[0] = 1 where the product left int32: the high word is not the low word's
// sign extension.
extern "C" __global__ void calc_mul(const int* a, const int* b, int* c, int* flag, int n,
                                    int ma, int mb)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int x = a[i & ma];
        int y = b[i & mb];
        int lo = (int)((unsigned)x * (unsigned)y);
        c[i] = lo;
        if (__mulhi(x, y) != (lo >> 31)) {
            flag[0] = 1;
        }
    }
}
