// Lock-free read-modify-write loops built on atomicCAS alone: out[0] += x (a sum) and
// out[1] = max(out[1], x). The first guess is 0, so no plain (racy) read is needed.
extern "C" __global__ void atomic_cas(const int* x, int* out, int n)
{
    #pragma unroll 1
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        int v = x[i];
        int old = 0;
        while (true) {
            int prev = atomicCAS(&out[0], old, old + v);
            if (prev == old) {
                break;
            }
            old = prev;
        }
        old = 0;
        while (true) {
            int want = max(old, v);
            int prev = atomicCAS(&out[1], old, want);
            if (prev == old) {
                break;
            }
            old = prev;
        }
    }
}
