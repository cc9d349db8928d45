// Register-blocked 4x4 matmul: each of 4 threads loads all of B into 16 scalars before it
// computes its row, so ~26 values are live at once: a deliberate register-spilling test.
extern "C" __global__ void matmul4_regs(const int* A, const int* B, int* C)
{
    int r = threadIdx.x;
    int b00 = B[0], b01 = B[1], b02 = B[2], b03 = B[3];
    int b10 = B[4], b11 = B[5], b12 = B[6], b13 = B[7];
    int b20 = B[8], b21 = B[9], b22 = B[10], b23 = B[11];
    int b30 = B[12], b31 = B[13], b32 = B[14], b33 = B[15];
    int a0 = A[4 * r], a1 = A[4 * r + 1], a2 = A[4 * r + 2], a3 = A[4 * r + 3];
    int c0 = a0 * b00 + a1 * b10 + a2 * b20 + a3 * b30;
    int c1 = a0 * b01 + a1 * b11 + a2 * b21 + a3 * b31;
    int c2 = a0 * b02 + a1 * b12 + a2 * b22 + a3 * b32;
    int c3 = a0 * b03 + a1 * b13 + a2 * b23 + a3 * b33;
    C[4 * r] = c0;
    C[4 * r + 1] = c1;
    C[4 * r + 2] = c2;
    C[4 * r + 3] = c3;
}
