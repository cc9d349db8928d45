extern "C" __global__ void spin(volatile int* a) {
    while (a[0] == 0) {}
}
