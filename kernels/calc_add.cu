// Calculator "+": c = a + b elementwise, exact or flagged. An operand whose mask is 0 is a
// scalar read at index 0 for every element (broadcast); a vector's mask is -1. The sum wraps
// in unsigned arithmetic, and flag[0] = 1 where it left int32: both operands' signs differ
// from the wrapped sum's.
extern "C" __global__ void calc_add(const int* a, const int* b, int* c, int* flag, int n,
                                    int ma, int mb)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int x = a[i & ma];
        int y = b[i & mb];
        int s = (int)((unsigned)x + (unsigned)y);
        c[i] = s;
        if (((x ^ s) & (y ^ s)) < 0) {
            flag[0] = 1;
        }
    }
}
