// Ternaries, min/max and a signed/unsigned compare mix.
__global__ void ternary_ops(const int *a, const int *b, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int x = a[i], y = b[i];
        int m = x > y ? x : y;
        int s = (x < 0) ? -x : x;
        unsigned int ux = (unsigned int)x;
        int big = ux > 1000u ? 1 : 0;
        out[i] = min(m, 50) + max(s, y) * 2 + big * 100 + (x == y ? 7 : 0);
    }
}
