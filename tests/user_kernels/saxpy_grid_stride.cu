// Grid-stride SAXPY with unsigned indices.
__global__ void saxpy_gs(unsigned int n, int a, const int *x, int *y)
{
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += blockDim.x * gridDim.x)
        y[i] = a * x[i] + y[i];
}
