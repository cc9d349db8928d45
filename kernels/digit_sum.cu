// Decimal digit sum: % 10 and / 10 by a constant in a loop (the compiler's multiply-high path).
extern "C" __global__ void digit_sum(const int* x, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = x[i];
        int s = 0;
        #pragma unroll 1
        while (v != 0) {
            s += v % 10;
            v /= 10;
        }
        out[i] = s;
    }
}
