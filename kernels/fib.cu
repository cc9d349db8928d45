// Library "fib": out[i] = F(k[i]) by iteration (F(0) = 0, F(1) = 1); k <= 30 keeps it exact.
extern "C" __global__ void fib(const int* k, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int a = 0;
        int b = 1;
        #pragma unroll 1
        for (int j = 0; j < k[i]; ++j) {
            int t = a + b;
            a = b;
            b = t;
        }
        out[i] = a;
    }
}
