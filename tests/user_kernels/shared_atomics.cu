// Block-wide min / max / or / exchange through shared-memory atomics.
__global__ void block_stats(const int *in, int *out)
{
    __shared__ int smin, smax, sor, slast;
    int tid = threadIdx.x;
    if (tid == 0) {
        smin = 0x7fffffff;
        smax = -0x7fffffff - 1;
        sor = 0;
        slast = -1;
    }
    __syncthreads();
    int v = in[blockIdx.x * blockDim.x + tid];
    atomicMin(&smin, v);
    atomicMax(&smax, v);
    atomicOr(&sor, v & 0xFF);
    atomicExch(&slast, tid);
    __syncthreads();
    if (tid == 0) {
        out[blockIdx.x * 4 + 0] = smin;
        out[blockIdx.x * 4 + 1] = smax;
        out[blockIdx.x * 4 + 2] = sor;
        out[blockIdx.x * 4 + 3] = slast;
    }
}
