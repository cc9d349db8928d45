// Bitonic sort of 16 keys in shared memory (one block, one thread per key).
#define NUM 16

__global__ void bitonic_sort(int *values)
{
    __shared__ int shared[NUM];
    const unsigned int tid = threadIdx.x;
    shared[tid] = values[tid];
    __syncthreads();

    for (unsigned int k = 2; k <= NUM; k *= 2) {
        for (unsigned int j = k / 2; j > 0; j /= 2) {
            unsigned int ixj = tid ^ j;
            if (ixj > tid) {
                if ((tid & k) == 0) {
                    if (shared[tid] > shared[ixj]) {
                        int t = shared[tid]; shared[tid] = shared[ixj]; shared[ixj] = t;
                    }
                } else {
                    if (shared[tid] < shared[ixj]) {
                        int t = shared[tid]; shared[tid] = shared[ixj]; shared[ixj] = t;
                    }
                }
            }
            __syncthreads();
        }
    }
    values[tid] = shared[tid];
}
