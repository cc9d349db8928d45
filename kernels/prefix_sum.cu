// Library "prefix_sum": inclusive scan. 16-element chunks are scanned Hillis-Steele style in a
// double-buffered shared array (barrier per step); a running carry links the chunks.
extern "C" __global__ void prefix_sum(const int* x, int* y, int n)
{
    __shared__ int buf[2][16];
    int t = threadIdx.x;
    int carry = 0;
    #pragma unroll 1
    for (int base = 0; base < n; base += 16) {
        int i = base + t;
        int cur = 0;
        buf[0][t] = i < n ? x[i] : 0;
        __syncthreads();
        for (int off = 1; off < 16; off <<= 1) {
            int s = buf[cur][t];
            if (t >= off) {
                s += buf[cur][t - off];
            }
            buf[cur ^ 1][t] = s;
            cur ^= 1;
            __syncthreads();
        }
        if (i < n) {
            y[i] = buf[cur][t] + carry;
        }
        carry += buf[cur][15];
        __syncthreads();
    }
}
