// Trial division: modulo by a loop variable with an early break at the first divisor.
extern "C" __global__ void prime_check(const int* x, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = x[i];
        int r = v >= 2 ? 1 : 0;
        #pragma unroll 1
        for (int d = 2; d * d <= v; ++d) {
            if (v % d == 0) {
                r = 0;
                break;
            }
        }
        out[i] = r;
    }
}
