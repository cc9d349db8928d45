// Library "clamp": y = min(max(x, lo), hi) for lo <= hi.
extern "C" __global__ void clamp(const int* x, int* y, int lo, int hi, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = min(max(x[i], lo), hi);
    }
}
