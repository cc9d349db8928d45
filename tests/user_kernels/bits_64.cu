// 64-bit bit counting on values assembled from two words.
__global__ void bits64(const int *hi, const int *lo, int *out)
{
    int i = threadIdx.x;
    long long x = ((long long)hi[i] << 32) | (unsigned int)lo[i];
    out[i] = __popcll(x) + 100 * __clzll(x) + 10000 * __ffsll(x);
}
