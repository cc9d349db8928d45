// Single-pass sum: each block writes a partial sum, the last block to finish adds them up.
__device__ unsigned int retirementCount = 0;

__global__ void sum_single_pass(const int *in, int *partial, int *total, int n)
{
    __shared__ int sdata[8];
    __shared__ bool amLast;
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + tid;
    sdata[tid] = (i < n) ? in[i] : 0;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) {
        partial[blockIdx.x] = sdata[0];
        __threadfence();
        unsigned int ticket = atomicInc(&retirementCount, gridDim.x);
        amLast = (ticket == gridDim.x - 1);
    }
    __syncthreads();
    if (amLast && tid == 0) {
        int sum = 0;
        for (int b = 0; b < gridDim.x; ++b) sum += partial[b];
        *total = sum;
        retirementCount = 0;
    }
}
