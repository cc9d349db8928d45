// Endianness swap of 32-bit words with __byte_perm.
__global__ void bswap32(const unsigned int *in, unsigned int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __byte_perm(in[i], 0, 0x0123);
}
