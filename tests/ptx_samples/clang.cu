// Compiled by clang (see regen.sh): LBB labels, 64-bit shared addresses, immediate shfl operands.
extern "C" __global__ void vadd(const int* a, const int* b, int* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void reduce16(const int* a, int* out) {
    __shared__ int s[16];
    int t = threadIdx.x;
    s[t] = a[blockIdx.x * 16 + t];
    __syncthreads();
    for (int k = 8; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) atomicAdd(out, s[0]);
}
extern "C" __global__ void warpsum(const int* a, int* out) {
    int v = a[threadIdx.x];
    for (int o = 2; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o, 4);
    if ((threadIdx.x & 3) == 0) out[threadIdx.x / 4] = v / 7 + (v < 3);
}
extern "C" __global__ void collatz(int* out) {
    int t = threadIdx.x;
    unsigned x = t + 1; int steps = 0;
    while (x != 1) { x = (x & 1) ? 3 * x + 1 : x >> 1; steps++; }
    out[t] = steps;
}
