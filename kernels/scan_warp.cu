// Inclusive scan of up to 16 elements: a shuffle-up scan inside each 4-lane warp, warp totals
// through shared memory, then each warp adds the totals of the warps before it.
extern "C" __global__ void scan_warp(const int* x, int* y, int n)
{
    __shared__ int wsum[4];
    int t = threadIdx.x;
    int lane = t & 3;
    int w = t >> 2;
    int v = t < n ? x[t] : 0;
    for (int d = 1; d < 4; d <<= 1) {
        int u = __shfl_up_sync(0xffffffff, v, d, 4);
        if (lane >= d) {
            v += u;
        }
    }
    if (lane == 3) {
        wsum[w] = v;
    }
    __syncthreads();
    int off = 0;
    #pragma unroll 1
    for (int k = 0; k < w; ++k) {
        off += wsum[k];
    }
    if (t < n) {
        y[t] = v + off;
    }
}
