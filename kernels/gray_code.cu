// Gray code both ways: g = x ^ (x >> 1), and decoding x as a Gray code by a prefix xor
// over doubling shifts (1, 2, 4, 8, 16).
extern "C" __global__ void gray_code(const unsigned* x, unsigned* g, unsigned* inv, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned v = x[i];
        g[i] = v ^ (v >> 1);
        unsigned b = v;
        for (int s = 1; s < 32; s <<= 1) {
            b ^= b >> s;
        }
        inv[i] = b;
    }
}
