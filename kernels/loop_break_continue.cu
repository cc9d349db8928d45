// break and continue: thread r sums the positive entries of row r of an RxL matrix, skipping
// negatives (continue) and stopping at the first zero (break).
extern "C" __global__ void loop_break_continue(const int* m, int* out, int R, int L)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R) {
        return;
    }
    int s = 0;
    #pragma unroll 1
    for (int j = 0; j < L; ++j) {
        int v = m[r * L + j];
        if (v == 0) {
            break;
        }
        if (v < 0) {
            continue;
        }
        s += v;
    }
    out[r] = s;
}
