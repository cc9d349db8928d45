// Library "compact": stable stream compaction of the positive values of x (n <= 16): flags,
// a Hillis-Steele scan in shared memory for the slots, then a scatter. count[0] = kept.
extern "C" __global__ void compact(const int* x, int* out, int* count, int n)
{
    __shared__ int s[16];
    int t = threadIdx.x;
    int v = t < n ? x[t] : 0;
    int keep = v > 0 ? 1 : 0;
    s[t] = keep;
    __syncthreads();
    for (int off = 1; off < 16; off <<= 1) {
        int add = t >= off ? s[t - off] : 0;
        __syncthreads();
        s[t] += add;
        __syncthreads();
    }
    if (keep) {
        out[s[t] - 1] = v;
    }
    if (t == 15) {
        count[0] = s[15];
    }
}
