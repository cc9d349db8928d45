// Tiled matmul: C (4x4) = A (4xK) @ B (Kx4) for K a multiple of 4. Each 4x4 block stages one
// tile of A and one of B in shared memory per step, with barriers before and after use.
extern "C" __global__ void matmul_tiled(const int* A, const int* B, int* C, int K)
{
    __shared__ int As[4][4];
    __shared__ int Bs[4][4];
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int acc = 0;
    #pragma unroll 1
    for (int t = 0; t < K; t += 4) {
        As[ty][tx] = A[ty * K + t + tx];
        Bs[ty][tx] = B[(t + ty) * 4 + tx];
        __syncthreads();
        for (int k = 0; k < 4; ++k) {
            acc += As[ty][k] * Bs[k][tx];
        }
        __syncthreads();
    }
    C[ty * 4 + tx] = acc;
}
