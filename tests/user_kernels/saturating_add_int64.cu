// Saturating add: compute in 64 bits, then clamp to the int range.
__global__ void sat_add(const int *a, const int *b, int *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        long long s = (long long)a[i] + b[i];
        if (s > 2147483647LL) s = 2147483647LL;
        else if (s < (-2147483647LL - 1)) s = (-2147483647LL - 1);
        c[i] = (int)s;
    }
}
