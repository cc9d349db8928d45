extern "C" __global__ void bar(int* a) {
    if (threadIdx.x < 2) __syncthreads();
    a[threadIdx.x] = 1;
}
