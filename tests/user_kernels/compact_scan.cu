// Order-preserving stream compaction: flags, a shared-memory inclusive scan, then scatter.
__global__ void compact(const int *in, int *out, int *count, int n)
{
    __shared__ int flags[16];
    int tid = threadIdx.x;
    int keep = (tid < n && in[tid] % 3 == 0) ? 1 : 0;
    flags[tid] = keep;
    __syncthreads();
    for (int offset = 1; offset < blockDim.x; offset <<= 1) {
        int add = (tid >= offset) ? flags[tid - offset] : 0;
        __syncthreads();
        flags[tid] += add;
        __syncthreads();
    }
    if (keep) out[flags[tid] - 1] = in[tid];
    if (tid == blockDim.x - 1) *count = flags[tid];
}
