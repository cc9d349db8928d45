// Library "conv1d": valid 1-D correlation y[i] = sum_j w[j] * x[i + j], i < n - k + 1.
extern "C" __global__ void conv1d(const int* x, int n, const int* w, int k, int* y)
{
    int stride = gridDim.x * blockDim.x;
    #pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n - k + 1; i += stride) {
        int acc = 0;
        #pragma unroll 1
        for (int j = 0; j < k; ++j) {
            acc += w[j] * x[i + j];
        }
        y[i] = acc;
    }
}
