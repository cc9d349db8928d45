// High 32 bits of the 64-bit product: __mulhi (signed) and __umulhi (unsigned) on full-range words.
extern "C" __global__ void mulhi(const int* x, const int* y, int* hi, unsigned* uhi, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        hi[i] = __mulhi(x[i], y[i]);
        uhi[i] = __umulhi((unsigned)x[i], (unsigned)y[i]);
    }
}
