// Collatz step counts: a data-dependent while loop with a divergent if/else inside, so lanes
// of one warp finish at very different times.
extern "C" __global__ void collatz(const int* x, int* steps, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = x[i];
        int c = 0;
        #pragma unroll 1
        while (v > 1) {
            if (v & 1) {
                v = 3 * v + 1;
            } else {
                v >>= 1;
            }
            ++c;
        }
        steps[i] = c;
    }
}
