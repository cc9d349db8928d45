// Shared tree down to 4 partial sums, then the last warp-sized step with shuffles instead of
// barriers. Every thread runs the shuffles (uniform code); only warp 0's result is stored.
extern "C" __global__ void reduce_warp_tail(const int* x, int* out, int n)
{
    __shared__ int s[16];
    int t = threadIdx.x;
    int acc = 0;
    #pragma unroll 1
    for (int i = t; i < n; i += blockDim.x) {
        acc += x[i];
    }
    s[t] = acc;
    __syncthreads();
    if (t < 8) {
        s[t] += s[t + 8];
    }
    __syncthreads();
    if (t < 4) {
        s[t] += s[t + 4];
    }
    __syncthreads();
    int v = s[t & 3];
    v += __shfl_down_sync(0xffffffff, v, 2, 4);
    v += __shfl_down_sync(0xffffffff, v, 1, 4);
    if (t == 0) {
        out[0] = v;
    }
}
