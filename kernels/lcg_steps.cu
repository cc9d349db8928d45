// Linear congruential generator (Numerical Recipes constants) run k steps from each seed,
// wrapping mod 2^32 in unsigned arithmetic.
extern "C" __global__ void lcg_steps(const unsigned* seed, unsigned* out, int k, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned v = seed[i];
        #pragma unroll 1
        for (int j = 0; j < k; ++j) {
            v = 1664525u * v + 1013904223u;
        }
        out[i] = v;
    }
}
