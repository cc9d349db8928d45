// Integer intrinsics from the CUDA math API.
__global__ void intrinsics(const int *a, const int *b, int *out)
{
    int i = threadIdx.x;
    int x = a[i], y = b[i];
    unsigned int ux = (unsigned int)x, uy = (unsigned int)y;
    int r = __mulhi(x, y);
    r ^= (int)__umulhi(ux, uy);
    r += __mul24(x, y);
    r += (int)__funnelshift_l(ux, uy, i);
    r ^= (int)__sad(x, y, 3u);
    r += __hadd(x, y) + __rhadd(x, y);
    r ^= abs(x) + (int)__usad(ux, uy, 0u);
    out[i] = r;
}
