// 2-D indexing made visible: each in-range cell of a WxH image records its block and thread
// coordinates as by*1000 + bx*100 + ty*10 + tx. Blocks of 3x2 leave partial warps.
extern "C" __global__ void index_2d(int* out, int W, int H)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < W && y < H) {
        out[y * W + x] = blockIdx.y * 1000 + blockIdx.x * 100 + threadIdx.y * 10 + threadIdx.x;
    }
}
