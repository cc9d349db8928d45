// atomicAdd and atomicSub from every thread of several blocks: acc[0] = sum, acc[1] = -sum.
extern "C" __global__ void atomic_add_sub(const int* x, int* acc, int n)
{
    int stride = gridDim.x * blockDim.x;
    #pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        atomicAdd(&acc[0], x[i]);
        atomicSub(&acc[1], x[i]);
    }
}
