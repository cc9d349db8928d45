// Calculator "@" with a matrix (matrix-vector and vector-matrix as matrices of one column or
// row): C (MxN) = A (MxK) @ B (KxN), row-major, one thread per element of C over a 2-D grid
// of 2-D blocks. Each thread sums its K products as 64-bit as calc_dot does; flag[0] = 1
// when an element leaves int32 (or a partial sum leaves [-2^62, 2^62)).
extern "C" __global__ void calc_matmul(const int* A, const int* B, int* C, int* flag, int M,
                                       int K, int N)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        const int* a = A + row * K;
        const int* end = a + K;
        const int* b = B + col;
        int hi = 0;
        unsigned lo = 0;
        int far = 0;
        #pragma unroll 1
        for (; a < end; ++a, b += N) {
            int x = *a;
            int y = *b;
            unsigned p = (unsigned)x * (unsigned)y;
            lo += p;
            hi += __mulhi(x, y) + (lo < p ? 1 : 0);
            far |= hi ^ (hi << 1);
        }
        C[row * N + col] = (int)lo;
        if (far < 0 || hi != ((int)lo >> 31)) {
            flag[0] = 1;
        }
    }
}
