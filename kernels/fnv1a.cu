// FNV-1a over the 4 little-endian bytes of each word (unsigned multiply wraps mod 2^32);
// all[0] is the xor of every hash, an order-independent combine via atomicXor.
extern "C" __global__ void fnv1a(const unsigned* x, unsigned* h, unsigned* all, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned v = x[i];
        unsigned hash = 2166136261u;
        for (int k = 0; k < 4; ++k) {
            hash ^= (v >> (8 * k)) & 0xFFu;
            hash *= 16777619u;
        }
        h[i] = hash;
        atomicXor(all, hash);
    }
}
