// Integer square root by binary search over [0, x]; 64-bit midpoint and square avoid overflow.
__global__ void isqrt_bs(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int x = in[i];
    int lo = 0, hi = x;
    while (lo < hi) {
        int mid = (int)(((long long)lo + hi + 1) / 2);
        if ((long long)mid * mid <= x)
            lo = mid;
        else
            hi = mid - 1;
    }
    out[i] = lo;
}
