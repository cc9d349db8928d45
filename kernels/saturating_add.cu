// Unsigned saturating add: wraparound is detected by the sum coming out smaller than an operand.
extern "C" __global__ void saturating_add(const unsigned* a, const unsigned* b, unsigned* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned s = a[i] + b[i];
        out[i] = s < a[i] ? 0xffffffffu : s;
    }
}
