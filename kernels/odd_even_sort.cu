// Odd-even transposition sort of up to 16 values, 8 threads: n alternating phases of
// disjoint compare-exchanges, a barrier after each.
extern "C" __global__ void odd_even_sort(int* a, int n)
{
    __shared__ int s[16];
    int t = threadIdx.x;
    if (2 * t < n) {
        s[2 * t] = a[2 * t];
    }
    if (2 * t + 1 < n) {
        s[2 * t + 1] = a[2 * t + 1];
    }
    __syncthreads();
    #pragma unroll 1
    for (int phase = 0; phase < n; ++phase) {
        int i = 2 * t + (phase & 1);
        if (i + 1 < n) {
            int x = s[i];
            int y = s[i + 1];
            if (x > y) {
                s[i] = y;
                s[i + 1] = x;
            }
        }
        __syncthreads();
    }
    if (2 * t < n) {
        a[2 * t] = s[2 * t];
    }
    if (2 * t + 1 < n) {
        a[2 * t + 1] = s[2 * t + 1];
    }
}
