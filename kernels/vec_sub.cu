// Library "sub": c = a - b, one thread per element with a bounds guard.
extern "C" __global__ void vec_sub(const int* a, const int* b, int* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] - b[i];
    }
}
