// Grid-stride loop with a 64-bit signed index (large-array habit).
__global__ void scale_inplace(int *data, long long n, int factor)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x)
        data[i] *= factor;
}
