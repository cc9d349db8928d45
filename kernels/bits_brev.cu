// Bit reversal twice: the __brev builtin and a 32-step shift-and-or loop by hand.
extern "C" __global__ void bits_brev(const unsigned* x, unsigned* fast, unsigned* slow, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned v = x[i];
        fast[i] = __brev(v);
        unsigned r = 0;
        #pragma unroll 1
        for (int k = 0; k < 32; ++k) {
            r = (r << 1) | (v & 1u);
            v >>= 1;
        }
        slow[i] = r;
    }
}
