// Per-thread sliding window in a local array; constant indices once the loops are unrolled.
#define K 3

__global__ void box3(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int buf[K];
    for (int k = 0; k < K; ++k) {
        int j = i + k - 1;
        buf[k] = (j >= 0 && j < n) ? in[j] : 0;
    }
    int s = 0;
    for (int k = 0; k < K; ++k) s += buf[k] * (k + 1);
    out[i] = s;
}
