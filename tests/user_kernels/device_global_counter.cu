// Stream compaction with a __device__ global counter.
__device__ int d_count;

__global__ void compact_positive(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && in[i] > 0) {
        int pos = atomicAdd(&d_count, 1);
        out[pos] = in[i];
    }
}
