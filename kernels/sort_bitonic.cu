// Library "sort": ascending bitonic sort of up to 16 values in shared memory, padded with
// INT_MAX. In each step thread t owns the pair (t, t ^ j) when t is its lower end.
extern "C" __global__ void sort_bitonic(int* a, int n)
{
    __shared__ int s[16];
    int t = threadIdx.x;
    s[t] = t < n ? a[t] : 2147483647;
    __syncthreads();
    #pragma unroll 1
    for (int k = 2; k <= 16; k <<= 1) {
        #pragma unroll 1
        for (int j = k >> 1; j > 0; j >>= 1) {
            int p = t ^ j;
            if (p > t) {
                int x = s[t];
                int y = s[p];
                bool up = (t & k) == 0;
                if ((x > y) == up) {
                    s[t] = y;
                    s[p] = x;
                }
            }
            __syncthreads();
        }
    }
    if (t < n) {
        a[t] = s[t];
    }
}
