// Q16.16 fixed-point division: widen, shift, divide.
__global__ void fx_div(const int *a, const int *b, int *q, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) q[i] = (int)(((long long)a[i] << 16) / b[i]);
}
