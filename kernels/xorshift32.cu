// Marsaglia xorshift32 advanced `rounds` times in place: unsigned shifts and xors, wrapping.
extern "C" __global__ void xorshift32(unsigned* state, int rounds, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned v = state[i];
        #pragma unroll 1
        for (int k = 0; k < rounds; ++k) {
            v ^= v << 13;
            v ^= v >> 17;
            v ^= v << 5;
        }
        state[i] = v;
    }
}
