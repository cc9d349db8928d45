// Library "sign": y = -1, 0 or 1 from a nested ternary (select chains, no branches needed).
extern "C" __global__ void sign(const int* x, int* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = x[i];
        y[i] = v > 0 ? 1 : (v < 0 ? -1 : 0);
    }
}
