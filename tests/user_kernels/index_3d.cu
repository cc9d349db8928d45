// The general 3-D global thread index formula, used with a 2-D launch.
__global__ void global_ids(int *out)
{
    int blockId = blockIdx.x + blockIdx.y * gridDim.x + gridDim.x * gridDim.y * blockIdx.z;
    int threadId = blockId * (blockDim.x * blockDim.y * blockDim.z)
                 + (threadIdx.z * (blockDim.x * blockDim.y))
                 + (threadIdx.y * blockDim.x) + threadIdx.x;
    out[threadId] = threadId * 10 + blockId + 1000 * blockDim.z + 10000 * gridDim.z;
}
