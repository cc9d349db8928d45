// atomicExch as a one-shot flag: every hit swaps in 1 and exactly one sees the old 0, so
// flag = [any hit, winners (0 or 1), hit count], independent of thread order.
extern "C" __global__ void atomic_exch_flag(const int* x, int* flag, int threshold, int n)
{
    int stride = gridDim.x * blockDim.x;
    #pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (x[i] > threshold) {
            int old = atomicExch(&flag[0], 1);
            if (old == 0) {
                atomicAdd(&flag[1], 1);
            }
            atomicAdd(&flag[2], 1);
        }
    }
}
