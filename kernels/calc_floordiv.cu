// Calculator "//": q = a // b elementwise with Python's floor semantics (the quotient rounds
// toward minus infinity); masks broadcast a scalar as in calc_add. flag[0] = 1 where the
// quotient leaves int32 (only INT_MIN // -1), flag[1] = 1 where b is 0; C's truncating
// division is never asked for either.
extern "C" __global__ void calc_floordiv(const int* a, const int* b, int* q, int* flag, int n,
                                         int ma, int mb)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int x = a[i & ma];
        int y = b[i & mb];
        if (y == 0) {
            flag[1] = 1;
        } else if (y == -1) {
            if (x == -2147483647 - 1) {
                flag[0] = 1;
            }
            q[i] = (int)(0u - (unsigned)x);
        } else {
            int t = x / y;
            if ((x ^ y) < 0 && t * y != x) {
                t -= 1;
            }
            q[i] = t;
        }
    }
}
