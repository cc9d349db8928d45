// Matvec with one 4-lane warp per row: lanes stride over the columns, a shuffle-down sum
// folds the partials, lane 0 stores. Rows past M contribute 0 but still join the shuffles.
extern "C" __global__ void matvec_warp(const int* A, const int* x, int* y, int M, int N)
{
    int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 2;
    int lane = threadIdx.x & 3;
    int s = 0;
    if (row < M) {
        #pragma unroll 1
        for (int j = lane; j < N; j += 4) {
            s += A[row * N + j] * x[j];
        }
    }
    s += __shfl_down_sync(0xffffffff, s, 2, 4);
    s += __shfl_down_sync(0xffffffff, s, 1, 4);
    if (lane == 0 && row < M) {
        y[row] = s;
    }
}
