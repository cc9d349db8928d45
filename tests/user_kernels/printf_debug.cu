// Debug printing from the kernel.
__global__ void add_debug(const int *a, const int *b, int *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
        printf("thread %d: %d + %d = %d\n", i, a[i], b[i], c[i]);
    }
}
