// Shuffles at width 2 and 4 side by side: swap within pairs (xor 1, width 2), shift down
// within pairs (the upper lane keeps its own value), rotate by one within a 4-lane warp.
extern "C" __global__ void shfl_width2(const int* x, int* swp, int* dwn, int* rot)
{
    int t = threadIdx.x;
    int lane = t & 3;
    int v = x[t];
    swp[t] = __shfl_xor_sync(0xffffffff, v, 1, 2);
    dwn[t] = __shfl_down_sync(0xffffffff, v, 1, 2);
    rot[t] = __shfl_sync(0xffffffff, v, (lane + 1) & 3, 4);
}
