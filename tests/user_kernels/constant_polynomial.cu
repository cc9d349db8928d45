// Polynomial evaluation with coefficients in constant memory (Horner's rule).
constexpr int DEGREE = 4;
__constant__ int coeffs[DEGREE + 1] = {3, -2, 0, 5, 1};  // c0 + c1 x + ... + c4 x^4

__global__ void poly_eval(const int *x, int *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int acc = coeffs[DEGREE];
        for (int k = DEGREE - 1; k >= 0; --k) acc = acc * x[i] + coeffs[k];
        y[i] = acc;
    }
}
