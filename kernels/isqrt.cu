// Library "isqrt": floor(sqrt(x)) for any unsigned 32-bit x by the digit-by-digit method
// (shifts, compares and subtracts only; at most 16 rounds).
extern "C" __global__ void isqrt(const unsigned* x, unsigned* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned v = x[i];
        unsigned r = 0;
        unsigned bit = 1u << 30;
        #pragma unroll 1
        while (bit > v) {
            bit >>= 2;
        }
        #pragma unroll 1
        while (bit != 0) {
            if (v >= r + bit) {
                v -= r + bit;
                r = (r >> 1) + bit;
            } else {
                r >>= 1;
            }
            bit >>= 2;
        }
        out[i] = r;
    }
}
