extern "C" __global__ void f(float* a) { a[0] = a[0] * 0.1; }
