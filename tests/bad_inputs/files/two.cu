extern "C" __global__ void one(int* a) { a[0] = 1; }
extern "C" __global__ void two(int* a) { a[0] = 2; }
