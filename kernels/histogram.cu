// Library "histogram": per-block histogram in shared memory (atomicAdd on shared words), then
// one global atomicAdd per bin per block. Needs 0 <= data[i] < nbins <= blockDim.x (16).
extern "C" __global__ void histogram(const int* data, int* hist, int n, int nbins)
{
    __shared__ int sh[16];
    int t = threadIdx.x;
    if (t < nbins) {
        sh[t] = 0;
    }
    __syncthreads();
    int stride = gridDim.x * blockDim.x;
    #pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += stride) {
        atomicAdd(&sh[data[i]], 1);
    }
    __syncthreads();
    if (t < nbins) {
        atomicAdd(&hist[t], sh[t]);
    }
}
