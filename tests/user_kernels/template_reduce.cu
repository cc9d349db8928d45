// Templated block reduction with the block size as a template parameter.
template <unsigned int blockSize>
__global__ void reduce_t(const int *g_idata, int *g_odata, unsigned int n)
{
    __shared__ int sdata[blockSize];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockSize * 2 + tid;
    unsigned int gridSize = blockSize * 2 * gridDim.x;
    int sum = 0;
    while (i < n) {
        sum += g_idata[i];
        if (i + blockSize < n) sum += g_idata[i + blockSize];
        i += gridSize;
    }
    sdata[tid] = sum;
    __syncthreads();
    if (blockSize >= 16) { if (tid < 8) sdata[tid] += sdata[tid + 8]; __syncthreads(); }
    if (blockSize >= 8) { if (tid < 4) sdata[tid] += sdata[tid + 4]; __syncthreads(); }
    if (blockSize >= 4) { if (tid < 2) sdata[tid] += sdata[tid + 2]; __syncthreads(); }
    if (blockSize >= 2) { if (tid < 1) sdata[tid] += sdata[tid + 1]; __syncthreads(); }
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}

template __global__ void reduce_t<8>(const int *, int *, unsigned int);
