// Average of two scaled values, summed in 64 bits so that the sum cannot overflow.
__global__ void average_scaled(const int *a, const int *b, int *avg, int scale, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int x = a[i] * scale;
        int y = b[i] * scale;
        long long sum = (long long)x + y;
        avg[i] = (int)(sum >> 1);
    }
}
