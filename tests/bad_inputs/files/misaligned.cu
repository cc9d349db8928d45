extern "C" __global__ void m(int* a) {
    int* p = (int*)((char*)a + 2);
    p[0] = 1;
}
