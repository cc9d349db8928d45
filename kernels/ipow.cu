// Library "pow": base^exp by square-and-multiply; the base is only squared while bits remain,
// so no intermediate exceeds the result's magnitude range (|base| <= 6, exp <= 11).
extern "C" __global__ void ipow(const int* base, const int* exp, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int b = base[i];
        int e = exp[i];
        int r = 1;
        #pragma unroll 1
        while (e != 0) {
            if (e & 1) {
                r *= b;
            }
            e >>= 1;
            if (e != 0) {
                b *= b;
            }
        }
        out[i] = r;
    }
}
