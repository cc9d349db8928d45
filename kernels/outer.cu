// Library "outer": out (MxN) = a (M) outer b (N), 2-D blocks over a 2-D grid.
extern "C" __global__ void outer(const int* a, const int* b, int* out, int M, int N)
{
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < M && c < N) {
        out[r * N + c] = a[r] * b[c];
    }
}
