// Odd-even transposition sort of one block's data in shared memory; barrier in every phase.
#define N 16

__global__ void odd_even_sort(int *data)
{
    __shared__ int s[N];
    int tid = threadIdx.x;
    s[tid] = data[tid];
    __syncthreads();

    for (int phase = 0; phase < N; ++phase) {
        int i = 2 * tid + (phase & 1);
        if (i + 1 < N && tid < N / 2) {
            int lo = s[i], hi = s[i + 1];
            if (lo > hi) {
                s[i] = hi;
                s[i + 1] = lo;
            }
        }
        __syncthreads();
    }
    data[tid] = s[tid];
}
