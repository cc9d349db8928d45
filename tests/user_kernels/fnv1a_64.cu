// 64-bit FNV-1a hash of each prefix; both halves of the hash are written out.
__global__ void fnv1a64(const int *in, unsigned int *lo, unsigned int *hi, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long h = 14695981039346656037ull;
    for (int k = 0; k <= i; ++k) {
        h ^= (unsigned int)in[k];
        h *= 1099511628211ull;
    }
    lo[i] = (unsigned int)h;
    hi[i] = (unsigned int)(h >> 32);
}
