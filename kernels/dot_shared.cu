// Library "dot_shared": per-thread partial dot products, then a shared-memory tree reduction
// (sequential addressing, halving stride) with a barrier after every level. Needs blockDim.x == 16.
extern "C" __global__ void dot_shared(const int* a, const int* b, int* out, int n)
{
    __shared__ int part[16];
    int t = threadIdx.x;
    int s = 0;
    #pragma unroll 1
    for (int i = t; i < n; i += blockDim.x) {
        s += a[i] * b[i];
    }
    part[t] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) {
            part[t] += part[t + k];
        }
        __syncthreads();
    }
    if (t == 0) {
        out[0] = part[0];
    }
}
