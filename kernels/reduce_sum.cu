// Library "sum": strided partial sums, then a shared tree reduction (blockDim.x == 16).
extern "C" __global__ void reduce_sum(const int* x, int* out, int n)
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
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) {
            s[t] += s[t + k];
        }
        __syncthreads();
    }
    if (t == 0) {
        out[0] = s[0];
    }
}
