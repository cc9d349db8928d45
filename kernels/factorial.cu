// Library "factorial": out[i] = k[i]! by a counted loop; k <= 12 fits in int32.
extern "C" __global__ void factorial(const int* k, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int f = 1;
        #pragma unroll 1
        for (int j = 2; j <= k[i]; ++j) {
            f *= j;
        }
        out[i] = f;
    }
}
