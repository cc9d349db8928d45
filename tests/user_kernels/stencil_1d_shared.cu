// 1-D stencil with a shared-memory halo (radius 2), zero outside the array.
#define RADIUS 2
#define BLOCK_SIZE 8

__global__ void stencil_1d(const int *in, int *out, int n)
{
    __shared__ int temp[BLOCK_SIZE + 2 * RADIUS];
    int gindex = threadIdx.x + blockIdx.x * blockDim.x;
    int lindex = threadIdx.x + RADIUS;

    temp[lindex] = (gindex < n) ? in[gindex] : 0;
    if (threadIdx.x < RADIUS) {
        int left = gindex - RADIUS;
        int right = gindex + BLOCK_SIZE;
        temp[lindex - RADIUS] = (left >= 0) ? in[left] : 0;
        temp[lindex + BLOCK_SIZE] = (right < n) ? in[right] : 0;
    }
    __syncthreads();

    int result = 0;
    for (int offset = -RADIUS; offset <= RADIUS; offset++)
        result += temp[lindex + offset];

    if (gindex < n) out[gindex] = result;
}
