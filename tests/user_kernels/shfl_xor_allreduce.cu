// Butterfly all-reduce: every lane ends with the warp's maximum.
__global__ void warp_max(const int *in, int *out)
{
    int v = in[threadIdx.x];
    for (int mask = 16; mask > 0; mask >>= 1)
        v = max(v, __shfl_xor_sync(0xffffffff, v, mask));
    out[threadIdx.x] = v;
}
