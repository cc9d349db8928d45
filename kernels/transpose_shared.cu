// Transpose through a 4x5 shared tile (padded row, the classic bank-conflict dodge): coalesced
// row reads, a barrier, then coalesced row writes of the transposed tile. Block must be 4x4.
extern "C" __global__ void transpose_shared(const int* in, int* out, int R, int C)
{
    __shared__ int tile[4][5];
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int r = blockIdx.y * 4 + ty;
    int c = blockIdx.x * 4 + tx;
    if (r < R && c < C) {
        tile[ty][tx] = in[r * C + c];
    }
    __syncthreads();
    int orow = blockIdx.x * 4 + ty;
    int ocol = blockIdx.y * 4 + tx;
    if (orow < C && ocol < R) {
        out[orow * R + ocol] = tile[tx][ty];
    }
}
