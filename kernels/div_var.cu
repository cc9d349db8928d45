// Signed division and modulo by a variable divisor (never 0), both signs on both sides.
extern "C" __global__ void div_var(const int* a, const int* b, int* q, int* r, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        q[i] = a[i] / b[i];
        r[i] = a[i] % b[i];
    }
}
