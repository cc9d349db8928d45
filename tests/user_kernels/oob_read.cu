// Off-by-one: the loop reads a[n].
__global__ void shift_left(const int *a, int *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = a[i + 1];
}

// Same bug, but the array that is read past is the last argument.
__global__ void shift_left_last(int *b, const int *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = a[i + 1];
}
