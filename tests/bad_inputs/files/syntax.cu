extern "C" __global__ void k(int* a) { a[0] = ; }
