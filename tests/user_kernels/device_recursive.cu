// Recursive device function.
__device__ int fib(int n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__global__ void fib_kernel(const int *in, int *out)
{
    int i = threadIdx.x;
    out[i] = fib(in[i]);
}
