// High words and fixed-point products through 64-bit intermediates.
__global__ void wide_mul(const int *a, const int *b, int *hi, unsigned int *uhi, int *fx)
{
    int i = threadIdx.x;
    hi[i] = (int)(((long long)a[i] * b[i]) >> 32);
    unsigned long long up = (unsigned long long)(unsigned int)a[i] * (unsigned int)b[i];
    uhi[i] = (unsigned int)(up >> 32);
    fx[i] = (int)(((long long)a[i] * b[i]) >> 16);   // Q16.16 multiply
}
