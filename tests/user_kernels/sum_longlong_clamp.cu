// Row sums accumulated in long long, then saturated to int.
__global__ void row_sums_saturated(const int *m, int *sums, int cols)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    long long acc = 0;
    for (int c = 0; c < cols; ++c)
        acc += m[row * cols + c];
    if (acc > 2147483647LL) acc = 2147483647LL;
    if (acc < -2147483648LL) acc = -2147483648LL;
    sums[row] = (int)acc;
}
