// Row sums of an RxC matrix (C <= 4) with 4x4 blocks stacked along y: each block row is
// reduced across threadIdx.x in a 2-D shared array.
extern "C" __global__ void reduce_2d_rows(const int* m, int* rowsum, int R, int C)
{
    __shared__ int s[4][4];
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int r = blockIdx.y * blockDim.y + ty;
    s[ty][tx] = (r < R && tx < C) ? m[r * C + tx] : 0;
    __syncthreads();
    for (int off = 2; off > 0; off >>= 1) {
        if (tx < off) {
            s[ty][tx] += s[ty][tx + off];
        }
        __syncthreads();
    }
    if (tx == 0 && r < R) {
        rowsum[r] = s[ty][0];
    }
}
