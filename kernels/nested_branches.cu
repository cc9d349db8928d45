// Nested divergent branches: four leaves in two levels, so a warp can split three ways.
extern "C" __global__ void nested_branches(const int* x, int* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = x[i];
        int r;
        if (v > 0) {
            if (v % 2 == 0) {
                r = v / 2;
            } else {
                r = 3 * v;
            }
        } else {
            if (v < -10) {
                r = -v;
            } else if (v == 0) {
                r = 100;
            } else {
                r = v - 5;
            }
        }
        y[i] = r;
    }
}
