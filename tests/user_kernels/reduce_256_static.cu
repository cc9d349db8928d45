// Reduction with the textbook's fixed 256-thread shared buffer.
#define THREADS_PER_BLOCK 256

__global__ void reduce_static(const int *in, int *out, int n)
{
    __shared__ int cache[THREADS_PER_BLOCK];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int temp = 0;
    while (i < n) {
        temp += in[i];
        i += blockDim.x * gridDim.x;
    }
    cache[tid] = temp;
    __syncthreads();

    int half = blockDim.x / 2;
    while (half != 0) {
        if (tid < half) cache[tid] += cache[tid + half];
        __syncthreads();
        half /= 2;
    }
    if (tid == 0) out[blockIdx.x] = cache[0];
}
