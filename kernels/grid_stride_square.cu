// Grid-stride loop over many small blocks: each thread squares every (gridDim*blockDim)-th value.
extern "C" __global__ void grid_stride_square(const int* x, int* y, int n)
{
    #pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = x[i] * x[i];
    }
}
