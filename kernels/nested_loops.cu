// Nested loops with a data-dependent inner bound: out = sum_{a=1..k} sum_{b=1..a} a * b.
extern "C" __global__ void nested_loops(const int* k, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int kk = k[i];
        int s = 0;
        #pragma unroll 1
        for (int a = 1; a <= kk; ++a) {
            #pragma unroll 1
            for (int b = 1; b <= a; ++b) {
                s += a * b;
            }
        }
        out[i] = s;
    }
}
