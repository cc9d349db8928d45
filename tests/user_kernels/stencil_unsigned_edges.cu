// 3-point blur with unsigned indices that forgets the edges: thread 0 reads in[i - 1].
__global__ void blur3(int *out, const int *in, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > 0 && i < n - 1) out[i] = in[i - 1] + in[i] + in[i + 1];
    if (i == 0) out[i] = in[i - 1] + in[i];  // meant in[i + 1]
}
