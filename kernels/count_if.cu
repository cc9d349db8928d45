// Library "count_if": count elements greater than a threshold with a global atomicAdd.
extern "C" __global__ void count_if(const int* x, int* out, int threshold, int n)
{
    int stride = gridDim.x * blockDim.x;
    #pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (x[i] > threshold) {
            atomicAdd(out, 1);
        }
    }
}
