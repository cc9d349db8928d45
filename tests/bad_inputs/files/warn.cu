// a warning (x is never used) and an out-of-bounds write at run time
extern "C" __global__ void k(int* a) {
    int x;
    a[threadIdx.x] = 1;
}
