// Butterfly (xor) all-reduce inside each 4-lane warp: after two steps every lane holds the
// warp's sum and max. Lanes past n contribute the identities 0 and INT_MIN.
extern "C" __global__ void warp_allreduce_xor(const int* x, int* sum, int* mx, int n)
{
    int t = threadIdx.x;
    int v = t < n ? x[t] : 0;
    int m = t < n ? x[t] : -2147483647 - 1;
    for (int mask = 1; mask < 4; mask <<= 1) {
        v += __shfl_xor_sync(0xffffffff, v, mask, 4);
        m = max(m, __shfl_xor_sync(0xffffffff, m, mask, 4));
    }
    if (t < n) {
        sum[t] = v;
        mx[t] = m;
    }
}
