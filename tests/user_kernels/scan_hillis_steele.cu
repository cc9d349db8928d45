// Naive (Hillis-Steele) exclusive scan with double buffering, one block of n threads.
__global__ void scan_naive(int *g_odata, const int *g_idata, int n)
{
    extern __shared__ int temp[];  // 2 * n ints
    int thid = threadIdx.x;
    int pout = 0, pin = 1;

    temp[pout * n + thid] = (thid > 0) ? g_idata[thid - 1] : 0;
    __syncthreads();

    for (int offset = 1; offset < n; offset *= 2) {
        pout = 1 - pout;
        pin = 1 - pout;
        if (thid >= offset)
            temp[pout * n + thid] = temp[pin * n + thid] + temp[pin * n + thid - offset];
        else
            temp[pout * n + thid] = temp[pin * n + thid];
        __syncthreads();
    }
    g_odata[thid] = temp[pout * n + thid];
}
