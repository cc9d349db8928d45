// Library "iota": out[i] = start + i * step for i < n (an arithmetic sequence).
extern "C" __global__ void iota(int* out, int start, int step, int n)
{
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = start + i * step;
    }
}
