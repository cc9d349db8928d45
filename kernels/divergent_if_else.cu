// Divergent if/else inside a warp: odd values take 3x + 1, even values are halved.
extern "C" __global__ void divergent_if_else(const int* x, int* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = x[i];
        if (v & 1) {
            y[i] = 3 * v + 1;
        } else {
            y[i] = v / 2;
        }
    }
}
