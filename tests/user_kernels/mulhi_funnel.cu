// High multiplies, 24-bit multiply, funnel shift and halving adds.
__global__ void mulhi_funnel(const int *a, const int *b, int *out)
{
    int i = threadIdx.x;
    int x = a[i], y = b[i];
    int r = __mulhi(x, y);
    r ^= (int)__umulhi((unsigned int)x, (unsigned int)y);
    r += __mul24(x, y);
    r += (int)__funnelshift_l((unsigned int)x, (unsigned int)y, i);
    r ^= (int)__funnelshift_r((unsigned int)x, (unsigned int)y, 3 * i);
    r += __hadd(x, y) + __rhadd(x, y);
    r ^= abs(x);
    out[i] = r;
}
