// Library "gcd": Euclid's algorithm, modulo by a variable in a data-dependent loop
// (gcd(0, 0) = 0; inputs are non-negative).
extern "C" __global__ void gcd(const int* a, const int* b, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int x = a[i];
        int y = b[i];
        #pragma unroll 1
        while (y != 0) {
            int r = x % y;
            x = y;
            y = r;
        }
        out[i] = x;
    }
}
