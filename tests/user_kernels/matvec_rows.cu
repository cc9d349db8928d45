// y = A x with a 2-D block: threadIdx.y picks the row, threadIdx.x strides over columns,
// partial sums combined through a blockDim-sized shared array.
#define BX 4
#define BY 4

__global__ void matvec(const int *A, const int *x, int *y, int rows, int cols)
{
    __shared__ int partial[BY][BX];
    int row = blockIdx.x * blockDim.y + threadIdx.y;
    int sum = 0;
    if (row < rows)
        for (int c = threadIdx.x; c < cols; c += blockDim.x)
            sum += A[row * cols + c] * x[c];
    partial[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            partial[threadIdx.y][threadIdx.x] += partial[threadIdx.y][threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0 && row < rows) y[row] = partial[threadIdx.y][0];
}
