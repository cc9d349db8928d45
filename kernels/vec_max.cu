// Library "maximum": elementwise c = max(a, b) with the max() builtin.
extern "C" __global__ void vec_max(const int* a, const int* b, int* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = max(a[i], b[i]);
    }
}
