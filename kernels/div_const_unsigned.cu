// Unsigned division and modulo by constants over the full 32-bit range:
// out[4i..] = x / 3, x % 7, x / 10, x / 1000.
extern "C" __global__ void div_const_unsigned(const unsigned* x, unsigned* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned v = x[i];
        out[4 * i] = v / 3u;
        out[4 * i + 1] = v % 7u;
        out[4 * i + 2] = v / 10u;
        out[4 * i + 3] = v / 1000u;
    }
}
