// Library "matadd": C = A + B for RxC matrices; blocks of 4x2 threads tile a 2x3 grid.
extern "C" __global__ void matadd(const int* A, const int* B, int* out, int R, int C)
{
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < R && c < C) {
        out[r * C + c] = A[r * C + c] + B[r * C + c];
    }
}
