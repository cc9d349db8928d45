// Library "matvec": y (M) = A (MxN) @ x (N), one thread per row across several blocks.
extern "C" __global__ void matvec(const int* A, const int* x, int* y, int M, int N)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        int acc = 0;
        #pragma unroll 1
        for (int j = 0; j < N; ++j) {
            acc += A[row * N + j] * x[j];
        }
        y[row] = acc;
    }
}
