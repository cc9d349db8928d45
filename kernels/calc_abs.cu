// Calculator abs(): y = |x| elementwise, exact or flagged: flag[0] = 1 for |INT_MIN| = 2^31,
// which leaves int32 (the negation wraps back to INT_MIN, still negative).
extern "C" __global__ void calc_abs(const int* x, int* y, int* flag, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = x[i];
        int m = v < 0 ? (int)(0u - (unsigned)v) : v;
        y[i] = m;
        if (m < 0) {
            flag[0] = 1;
        }
    }
}
