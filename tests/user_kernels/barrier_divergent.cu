// __syncthreads() inside a branch only some threads take.
__global__ void bad_barrier(int *data)
{
    __shared__ int s[16];
    int t = threadIdx.x;
    s[t] = data[t];
    if (t < 2) {
        __syncthreads();
        s[t] += s[t + 2];
    }
    data[t] = s[t];
}
