// In-place reverse of up to blockDim.x values through dynamically sized shared memory (the
// launch passes 4 * blockDim.x bytes); the barrier separates all reads from all writes.
extern "C" __global__ void reverse_dyn(int* a, int n)
{
    extern __shared__ int buf[];
    int t = threadIdx.x;
    if (t < n) {
        buf[t] = a[t];
    }
    __syncthreads();
    if (t < n) {
        a[t] = buf[n - 1 - t];
    }
}
