// 3-D volume: each thread of a 3-D grid of 3-D blocks scales one voxel by its depth.
__global__ void scale_by_depth(const int *vol, int *out, int nx, int ny, int nz)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < nx && y < ny && z < nz) {
        int idx = (z * ny + y) * nx + x;
        out[idx] = vol[idx] * (z + 1);
    }
}
