// Bit tricks: population count, leading zeros, lowest set bit, power-of-two tests, reversal.
__global__ void bit_tricks(const unsigned int *in, unsigned int *out)
{
    int i = threadIdx.x;
    unsigned int x = in[i];
    unsigned int r = 0;
    r += __popc(x);
    r += __clz(x) << 6;
    r ^= (x & (~x + 1u)) << 3;                 // lowest set bit
    r += ((x != 0) && !(x & (x - 1))) ? 1000u : 0u;
    r ^= __brev(x);
    r += __ffs((int)x) << 12;
    int sx = (int)x;
    int mask = sx >> 31;
    r += (unsigned int)((sx + mask) ^ mask);   // branchless abs
    out[i] = r;
}
