// Library "matmul": C (MxN) = A (MxK) @ B (KxN), row-major. 2-D grid of 2-D blocks: one
// thread per output element, guarded so any M, N up to the grid's coverage works.
extern "C" __global__ void matmul(const int* A, const int* B, int* C, int M, int K, int N)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        int acc = 0;
        #pragma unroll 1
        for (int k = 0; k < K; ++k) {
            acc += A[row * K + k] * B[k * N + col];
        }
        C[row * N + col] = acc;
    }
}
