// Several early exits: out-of-range threads, negative inputs, zeros.
__global__ void classify(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = in[i];
    if (v < 0) {
        out[i] = -1;
        return;
    }
    if (v == 0) return;
    int steps = 0;
    while (v != 1) {
        v = (v & 1) ? 3 * v + 1 : v / 2;
        ++steps;
    }
    out[i] = steps;
}
