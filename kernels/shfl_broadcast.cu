// __shfl_sync index broadcast: every lane adds lane (src mod 4)'s value of its own 4-lane
// warp (a source lane past the width wraps modulo the width).
extern "C" __global__ void shfl_broadcast(const int* x, int* out, int n, int src)
{
    int t = threadIdx.x;
    int v = t < n ? x[t] : 0;
    int b = __shfl_sync(0xffffffff, v, src, 4);
    if (t < n) {
        out[t] = v + b;
    }
}
