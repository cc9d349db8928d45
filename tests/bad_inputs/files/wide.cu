extern "C" __global__ void w(int* a, unsigned long long n) {
    if (threadIdx.x < n) a[threadIdx.x] = 1;
}
