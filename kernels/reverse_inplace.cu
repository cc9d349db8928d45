// Reverse in place: thread i swaps the disjoint pair (i, n-1-i), so no two threads touch one word.
extern "C" __global__ void reverse_inplace(int* a, int n)
{
    int stride = gridDim.x * blockDim.x;
    #pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n / 2; i += stride) {
        int j = n - 1 - i;
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}
