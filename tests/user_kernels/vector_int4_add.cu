// Vectorised addition: each thread adds four ints at once through int4.
__global__ void add_int4(const int4 *a, const int4 *b, int4 *c, int n4)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        int4 x = a[i], y = b[i];
        c[i] = make_int4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
}
