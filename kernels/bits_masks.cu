// Mask idioms on unsigned words: out[4i..] = lowest set bit (x & -x), x with its lowest set bit
// cleared, parity by xor folding, and the bit field x[4..7].
extern "C" __global__ void bits_masks(const unsigned* x, unsigned* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned v = x[i];
        unsigned p = v ^ (v >> 16);
        p ^= p >> 8;
        p ^= p >> 4;
        p ^= p >> 2;
        p ^= p >> 1;
        out[4 * i] = v & (0u - v);
        out[4 * i + 1] = v & (v - 1u);
        out[4 * i + 2] = p & 1u;
        out[4 * i + 3] = (v >> 4) & 0xFu;
    }
}
