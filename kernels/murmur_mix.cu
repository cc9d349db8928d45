// MurmurHash3's 32-bit finalizer (fmix32): xor-shifts and wrapping multiplies by odd constants.
extern "C" __global__ void murmur_mix(const unsigned* x, unsigned* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned h = x[i];
        h ^= h >> 16;
        h *= 0x85ebca6bu;
        h ^= h >> 13;
        h *= 0xc2b2ae35u;
        h ^= h >> 16;
        out[i] = h;
    }
}
