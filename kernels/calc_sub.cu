// Calculator "-" (and unary minus as 0 - b): c = a - b elementwise, exact or flagged; masks
// broadcast a scalar as in calc_add. The difference wraps in unsigned arithmetic, and
// flag[0] = 1 where it left int32: the operands' signs differ and the result's sign is not a's.
extern "C" __global__ void calc_sub(const int* a, const int* b, int* c, int* flag, int n,
                                    int ma, int mb)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int x = a[i & ma];
        int y = b[i & mb];
        int d = (int)((unsigned)x - (unsigned)y);
        c[i] = d;
        if (((x ^ y) & (x ^ d)) < 0) {
            flag[0] = 1;
        }
    }
}
