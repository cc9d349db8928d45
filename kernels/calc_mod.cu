// Calculator "%": r = a % b elementwise with Python's floor semantics (a nonzero remainder
// has the divisor's sign, so a == (a // b) * b + r); masks broadcast a scalar as in calc_add.
// flag[1] = 1 where b is 0 (flag[0], overflow, never happens: |r| < |b|).
extern "C" __global__ void calc_mod(const int* a, const int* b, int* r, int* flag, int n,
                                    int ma, int mb)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int x = a[i & ma];
        int y = b[i & mb];
        if (y == 0) {
            flag[1] = 1;
        } else if (y == -1) {
            r[i] = 0;
        } else {
            int t = x % y;
            if (t != 0 && (t ^ y) < 0) {
                t += y;
            }
            r[i] = t;
        }
    }
}
