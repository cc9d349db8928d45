// Warp shuffles over 4-lane segments (width 4), the only width the machine accepts.
extern "C" __global__ void shfl4(const int* a, int* out) {
    int t = threadIdx.x; int v = a[t];
    out[4*t] = __shfl_down_sync(0xffffffff, v, 1, 4);
    out[4*t+1] = __shfl_up_sync(0xffffffff, v, 1, 4);
    out[4*t+2] = __shfl_xor_sync(0xffffffff, v, 2, 4);
    out[4*t+3] = __shfl_sync(0xffffffff, v, 3, 4);
}
extern "C" __global__ void warpsum(const int* a, int* out) {
    int v = a[threadIdx.x];
    for (int o = 2; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o, 4);
    if ((threadIdx.x & 3) == 0) out[threadIdx.x / 4] = v;
}
extern "C" __global__ void shflpartial(const int* a, int* out) {
    int t = threadIdx.x; int v = a[t];
    if (t & 1) v = __shfl_down_sync(0xffffffff, v, 2, 4);
    out[t] = v;
}
