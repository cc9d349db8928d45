// Warp-level sum with shuffles, default width (32 lanes).
__inline__ __device__ int warpReduceSum(int val)
{
    for (int offset = 16; offset > 0; offset /= 2)
        val += __shfl_down_sync(0xffffffff, val, offset);
    return val;
}

__global__ void warp_sum(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int sum = (i < n) ? in[i] : 0;
    sum = warpReduceSum(sum);
    if ((threadIdx.x % 32) == 0)
        atomicAdd(out, sum);
}
