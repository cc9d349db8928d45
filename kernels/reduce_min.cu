// Library "min": shared tree reduction with min(); slots past n hold INT_MAX, the identity.
extern "C" __global__ void reduce_min(const int* x, int* out, int n)
{
    __shared__ int s[16];
    int t = threadIdx.x;
    int m = 2147483647;
    #pragma unroll 1
    for (int i = t; i < n; i += blockDim.x) {
        m = min(m, x[i]);
    }
    s[t] = m;
    __syncthreads();
    for (int k = 8; k > 0; k >>= 1) {
        if (t < k) {
            s[t] = min(s[t], s[t + k]);
        }
        __syncthreads();
    }
    if (t == 0) {
        out[0] = s[0];
    }
}
