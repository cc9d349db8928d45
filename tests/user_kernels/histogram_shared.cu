// Histogram with per-block privatised bins in shared memory, merged with global atomics.
#define NUM_BINS 8

__global__ void histogram_shared(const int *data, unsigned int *bins, int n)
{
    __shared__ unsigned int local_bins[NUM_BINS];

    for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x)
        local_bins[b] = 0;
    __syncthreads();

    int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int bin = data[i] % NUM_BINS;
        if (bin < 0) bin += NUM_BINS;
        atomicAdd(&local_bins[bin], 1u);
    }
    __syncthreads();

    for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x)
        atomicAdd(&bins[b], local_bins[b]);
}
