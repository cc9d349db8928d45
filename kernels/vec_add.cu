// Library "add": c = a + b, one thread per element; the guard covers the ragged last block.
extern "C" __global__ void vec_add(const int* a, const int* b, int* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
