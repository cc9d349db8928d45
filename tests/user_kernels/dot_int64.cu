// Dot product with a 64-bit accumulator, written to a 64-bit result.
__global__ void dot64(const int *a, const int *b, long long *result, int n)
{
    long long sum = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        sum += (long long)a[i] * b[i];
    atomicAdd((unsigned long long *)result, (unsigned long long)sum);
}
