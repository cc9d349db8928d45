// Library "reverse": out[n - 1 - i] = in[i] (a scattered write, the mirror of a gather).
extern "C" __global__ void reverse(const int* in, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[n - 1 - i] = in[i];
    }
}
