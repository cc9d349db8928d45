// 2-D 5-point Laplacian (zero outside the RxC grid) over 4x4 blocks: the 6x6 tile with its
// halo is loaded cooperatively (cell k -> row k / 6, column k % 6), then a barrier.
extern "C" __global__ void stencil_2d(const int* in, int* out, int R, int C)
{
    __shared__ int tile[6][6];
    int tid = threadIdx.y * 4 + threadIdx.x;
    int r0 = (int)blockIdx.y * 4 - 1;
    int c0 = (int)blockIdx.x * 4 - 1;
    #pragma unroll 1
    for (int k = tid; k < 36; k += 16) {
        int r = r0 + k / 6;
        int c = c0 + k % 6;
        tile[k / 6][k % 6] = (r >= 0 && r < R && c >= 0 && c < C) ? in[r * C + c] : 0;
    }
    __syncthreads();
    int ty = threadIdx.y + 1;
    int tx = threadIdx.x + 1;
    int r = r0 + ty;
    int c = c0 + tx;
    if (r < R && c < C) {
        out[r * C + c] = 4 * tile[ty][tx] - tile[ty - 1][tx] - tile[ty + 1][tx]
                         - tile[ty][tx - 1] - tile[ty][tx + 1];
    }
}
