// Library "transpose": out (CxR) = in (RxC)^T with 2-D blocks over a 2-D grid.
extern "C" __global__ void transpose(const int* in, int* out, int R, int C)
{
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < R && c < C) {
        out[c * R + r] = in[r * C + c];
    }
}
