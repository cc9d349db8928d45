// Tree reduction with interleaved addressing: the stride doubles and only threads with
// t % (2 * stride) == 0 work, a divergent modulo test by a variable. blockDim.x == 16.
extern "C" __global__ void reduce_interleaved(const int* x, int* out, int n)
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
    #pragma unroll 1
    for (int stride = 1; stride < (int)blockDim.x; stride *= 2) {
        if (t % (2 * stride) == 0) {
            s[t] += s[t + stride];
        }
        __syncthreads();
    }
    if (t == 0) {
        out[0] = s[0];
    }
}
