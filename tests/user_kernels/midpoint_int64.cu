// Overflow-safe midpoint the long long way: (lo + hi) / 2 computed in 64 bits.
__global__ void midpoint(const int *lo, const int *hi, int *mid, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) mid[i] = (int)(((long long)lo[i] + hi[i]) / 2);
}
