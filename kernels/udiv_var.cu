// Unsigned division and modulo by a variable nonzero divisor over the full 32-bit range.
extern "C" __global__ void udiv_var(const unsigned* a, const unsigned* b, unsigned* q,
                                    unsigned* r, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        q[i] = a[i] / b[i];
        r[i] = a[i] % b[i];
    }
}
