// Sum over several blocks: grid-stride partials, a shared tree per block (blockDim.x == 8),
// then one atomicAdd per block into the global total.
extern "C" __global__ void reduce_multiblock(const int* x, int* out, int n)
{
    __shared__ int s[8];
    int t = threadIdx.x;
    int stride = gridDim.x * blockDim.x;
    int acc = 0;
    #pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += stride) {
        acc += x[i];
    }
    s[t] = acc;
    __syncthreads();
    for (int k = 4; k > 0; k >>= 1) {
        if (t < k) {
            s[t] += s[t + k];
        }
        __syncthreads();
    }
    if (t == 0) {
        atomicAdd(out, s[0]);
    }
}
