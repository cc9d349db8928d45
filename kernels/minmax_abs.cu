// min/max/abs builtins, signed and unsigned: out[4i..4i+3] = min, max, |a-b|, unsigned min
// (where negative values compare as large).
extern "C" __global__ void minmax_abs(const int* a, const int* b, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int x = a[i];
        int y = b[i];
        out[4 * i] = min(x, y);
        out[4 * i + 1] = max(x, y);
        out[4 * i + 2] = abs(x - y);
        out[4 * i + 3] = (int)min((unsigned)x, (unsigned)y);
    }
}
