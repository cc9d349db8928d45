// Signed atomicMin/atomicMax on global words that the caller seeds with INT_MAX / INT_MIN.
extern "C" __global__ void atomic_minmax(const int* x, int* mm, int n)
{
    int stride = gridDim.x * blockDim.x;
    #pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        atomicMin(&mm[0], x[i]);
        atomicMax(&mm[1], x[i]);
    }
}
