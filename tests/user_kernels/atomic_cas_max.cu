// atomicMax built from an atomicCAS retry loop, plus a block-wide counter.
__device__ int atomicMaxCAS(int *address, int val)
{
    int old = *address, assumed;
    do {
        assumed = old;
        old = atomicCAS(address, assumed, max(assumed, val));
    } while (assumed != old);
    return old;
}

__global__ void max_and_count(const int *in, int *result, int *counter, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicMaxCAS(result, in[i]);
        atomicAdd(counter, 1);
    }
}
