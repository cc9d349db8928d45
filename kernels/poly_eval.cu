// Library "poly": y = sum_k coef[k] * x^k by Horner's rule (coef has deg + 1 entries).
extern "C" __global__ void poly_eval(const int* coef, int deg, const int* x, int* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = x[i];
        int acc = coef[deg];
        #pragma unroll 1
        for (int k = deg - 1; k >= 0; --k) {
            acc = acc * v + coef[k];
        }
        y[i] = acc;
    }
}
