// Timing a loop inside the kernel with clock64().
__global__ void timed_loop(int *out, long long *cycles)
{
    long long start = clock64();
    int s = 0;
    for (int k = 0; k < 10; ++k) s += k * threadIdx.x;
    long long stop = clock64();
    out[threadIdx.x] = s;
    if (threadIdx.x == 0) *cycles = stop - start;
}
