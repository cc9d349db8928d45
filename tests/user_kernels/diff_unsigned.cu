// Backward difference with an unsigned index and no edge check: thread 0 reads in[0u - 1].
__global__ void backward_diff(int *out, const int *in, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] - in[i - 1];
}
