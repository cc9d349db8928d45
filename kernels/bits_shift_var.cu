// Shifts by a per-element amount s in 0..31: rotate left (the right shift uses (32 - s) & 31
// so it stays below 32), arithmetic right shift of a signed value, logical right shift.
extern "C" __global__ void bits_shift_var(const unsigned* x, const int* s, unsigned* rot,
                                          int* sra, unsigned* srl, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned v = x[i];
        int k = s[i] & 31;
        rot[i] = (v << k) | (v >> ((32 - k) & 31));
        sra[i] = (int)v >> k;
        srl[i] = v >> k;
    }
}
