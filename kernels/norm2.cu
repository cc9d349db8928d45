// Library "norm2": squared L2 norm over several blocks: grid-stride partials, a shuffle-down
// sum inside each 4-lane warp, and one atomicAdd per warp into out[0].
extern "C" __global__ void norm2(const int* x, int* out, int n)
{
    int stride = gridDim.x * blockDim.x;
    int s = 0;
    #pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        s += x[i] * x[i];
    }
    s += __shfl_down_sync(0xffffffff, s, 2, 4);
    s += __shfl_down_sync(0xffffffff, s, 1, 4);
    if ((threadIdx.x & 3) == 0) {
        atomicAdd(out, s);
    }
}
