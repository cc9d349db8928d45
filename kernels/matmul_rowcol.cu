// Matmul with 1-D indexing: a grid-stride loop over the M*N outputs recovers (row, col) by
// division and modulo by the variable N.
extern "C" __global__ void matmul_rowcol(const int* A, const int* B, int* C, int M, int K, int N)
{
    int stride = gridDim.x * blockDim.x;
    #pragma unroll 1
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < M * N; idx += stride) {
        int row = idx / N;
        int col = idx % N;
        int acc = 0;
        #pragma unroll 1
        for (int k = 0; k < K; ++k) {
            acc += A[row * K + k] * B[k * N + col];
        }
        C[idx] = acc;
    }
}
