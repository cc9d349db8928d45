// Signed division and modulo by constants, negative dividends included (C truncates toward
// zero): out[4i..] = x / 3, x % 7, x / 10, x % 10.
extern "C" __global__ void div_const_signed(const int* x, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = x[i];
        out[4 * i] = v / 3;
        out[4 * i + 1] = v % 7;
        out[4 * i + 2] = v / 10;
        out[4 * i + 3] = v % 10;
    }
}
