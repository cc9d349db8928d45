// Histogram straight into global memory: the bin is the floor modulo of a possibly negative
// value, ((v % nbins) + nbins) % nbins, since C's % keeps the dividend's sign.
extern "C" __global__ void histogram_global(const int* data, int* hist, int n, int nbins)
{
    int stride = gridDim.x * blockDim.x;
    #pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int bin = ((data[i] % nbins) + nbins) % nbins;
        atomicAdd(&hist[bin], 1);
    }
}
