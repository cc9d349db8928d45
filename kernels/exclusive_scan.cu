// Library "exclusive_scan": Blelloch work-efficient scan of up to 16 elements with 8 threads
// (two elements each): up-sweep builds partial sums in place, down-sweep distributes them.
extern "C" __global__ void exclusive_scan(const int* x, int* y, int n)
{
    __shared__ int s[16];
    int t = threadIdx.x;
    s[2 * t] = 2 * t < n ? x[2 * t] : 0;
    s[2 * t + 1] = 2 * t + 1 < n ? x[2 * t + 1] : 0;
    int off = 1;
    #pragma unroll 1
    for (int d = 8; d > 0; d >>= 1) {
        __syncthreads();
        if (t < d) {
            s[off * (2 * t + 2) - 1] += s[off * (2 * t + 1) - 1];
        }
        off <<= 1;
    }
    if (t == 0) {
        s[15] = 0;
    }
    #pragma unroll 1
    for (int d = 1; d < 16; d <<= 1) {
        off >>= 1;
        __syncthreads();
        if (t < d) {
            int ai = off * (2 * t + 1) - 1;
            int bi = off * (2 * t + 2) - 1;
            int tmp = s[ai];
            s[ai] = s[bi];
            s[bi] += tmp;
        }
    }
    __syncthreads();
    if (2 * t < n) {
        y[2 * t] = s[2 * t];
    }
    if (2 * t + 1 < n) {
        y[2 * t + 1] = s[2 * t + 1];
    }
}
