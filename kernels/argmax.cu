// Library "argmax": (value, index) pairs reduced in shared memory; ties go to the smaller
// index, so the answer is the first maximum whatever the reduction order. blockDim.x == 16.
extern "C" __global__ void argmax(const int* x, int* out, int n)
{
    __shared__ int sv[16];
    __shared__ int si[16];
    int t = threadIdx.x;
    int bv = -2147483647 - 1;
    int bi = 2147483647;
    #pragma unroll 1
    for (int i = t; i < n; i += blockDim.x) {
        int v = x[i];
        if (v > bv || (v == bv && i < bi)) {
            bv = v;
            bi = i;
        }
    }
    sv[t] = bv;
    si[t] = bi;
    __syncthreads();
    #pragma unroll 1
    for (int k = 8; k > 0; k >>= 1) {
        if (t < k) {
            int v = sv[t + k];
            int j = si[t + k];
            if (v > sv[t] || (v == sv[t] && j < si[t])) {
                sv[t] = v;
                si[t] = j;
            }
        }
        __syncthreads();
    }
    if (t == 0) {
        out[0] = si[0];
    }
}
