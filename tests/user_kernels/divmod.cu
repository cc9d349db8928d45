// Division and modulo: by variables (signed and unsigned) and by constants.
__global__ void divmod(const int *a, const int *b, int *q, int *r, unsigned int *uq, int *c)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    q[i] = a[i] / b[i];
    r[i] = a[i] % b[i];
    uq[i] = (unsigned int)a[i] / (unsigned int)b[i];
    c[i] = a[i] / 7 + a[i] % 10 + (int)((unsigned int)a[i] / 3u);
}
