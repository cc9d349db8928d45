// Waits for a flag that nobody ever sets.
__global__ void spin(volatile int *flag, int *out)
{
    while (flag[0] == 0) {
    }
    out[threadIdx.x] = flag[0];
}
