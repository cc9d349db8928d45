// Read-only data through __restrict__ and __ldg.
__global__ void axpb(const int *__restrict__ x, int *__restrict__ y, int a, int b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * __ldg(&x[i]) + b;
}
