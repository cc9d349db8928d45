extern "C" __global__ void k(int* a, int n) {
    if (threadIdx.x < n) a[threadIdx.x] += 1;
}
