// Tiled matrix multiply with shared-memory tiles (C = A * B, all N x N, N a multiple of TILE).
#define TILE 3

__global__ void matmul_tiled(const int *A, const int *B, int *C, int N)
{
    __shared__ int As[TILE][TILE];
    __shared__ int Bs[TILE][TILE];

    int bx = blockIdx.x, by = blockIdx.y;
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = by * TILE + ty;
    int col = bx * TILE + tx;

    int acc = 0;
    for (int m = 0; m < N / TILE; ++m) {
        As[ty][tx] = A[row * N + m * TILE + tx];
        Bs[ty][tx] = B[(m * TILE + ty) * N + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    C[row * N + col] = acc;
}
