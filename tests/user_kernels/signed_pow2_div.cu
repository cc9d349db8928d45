// Signed division and modulo by powers of two (round toward zero, sign of the dividend).
__global__ void pow2div(const int *in, int *q8, int *r8, int *q1024, int *r2)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    q8[i] = v / 8;
    r8[i] = v % 8;
    q1024[i] = v / 1024;
    r2[i] = v % 2;
}
