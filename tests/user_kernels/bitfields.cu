// Pack and unpack bit fields, rotate, and a switch on a nibble.
__global__ void bitfields(const unsigned int *in, unsigned int *out)
{
    int i = threadIdx.x;
    unsigned int x = in[i];
    unsigned int nib = (x >> 4) & 0xF;
    unsigned int packed = (x & ~0xF00u) | ((nib ^ 0x5) << 8);
    unsigned int rot = (x << 13) | (x >> 19);
    unsigned int v;
    switch (x & 7) {
    case 0: v = packed; break;
    case 1: v = rot; break;
    case 2: v = packed + rot; break;
    case 3: v = nib * 1000; break;
    case 4: v = ~x; break;
    case 5: v = x >> 3; break;
    default: v = 42; break;
    }
    out[i] = v ^ (rot & 0xFF);
}
