// Library "fill": out[i] = value for i < n; words past n are left untouched.
extern "C" __global__ void fill(int* out, int value, int n)
{
    int stride = gridDim.x * blockDim.x;
    #pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = value;
    }
}
