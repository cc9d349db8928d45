// "SAXPY" on ints with size_t indexing.
__global__ void saxpy(size_t n, int a, const int *x, int *y)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
