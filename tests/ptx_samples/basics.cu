// Control flow and indexing: the SIMT tests and the dialect tests use these.
extern "C" __global__ void vadd(const int* a, const int* b, int* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void index2d(int* out, int w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    out[y * w + x] = x * 100 + y + gridDim.x * 1000 + gridDim.y * 10000
                   + threadIdx.z + blockIdx.z + blockDim.z;
}
extern "C" __global__ void ifelse(const int* a, int* out) {
    int t = threadIdx.x;
    int v = a[t];
    if (v & 1) { v = v * 3 + 1; } else { v = v / 2; }
    out[t] = v + 7;
}
extern "C" __global__ void loopbreak(const int* a, int* out, int n) {
    int t = threadIdx.x;
    int s = 0;
    for (int i = 0; i < n; i++) {
        int x = a[(t + i) % n];
        if (x < 0) break;
        s += x;
    }
    out[t] = s;
}
extern "C" __global__ void earlyret(const int* a, int* out) {
    int t = threadIdx.x;
    if (a[t] == 0) return;
    out[t] = a[t] * 2;
}
extern "C" __global__ void collatz(int* out) {
    int t = threadIdx.x;
    unsigned x = t + 1; int steps = 0;
    while (x != 1) { x = (x & 1) ? 3 * x + 1 : x >> 1; steps++; }
    out[t] = steps;
}
extern "C" __global__ void reconverge(const int* a, int* out) {
    int t = threadIdx.x;
    int v = a[t];
    if (v & 1) { v = v * 3 + 1; } else { v = v / 2; }
    out[t] = __shfl_xor_sync(0xffffffff, v, 1, 4);
}
extern "C" __global__ void restrict_nc(const int* __restrict__ a, int* __restrict__ out) {
    out[threadIdx.x] = a[threadIdx.x] + __ldg(&a[0]);
}
extern "C" __global__ void fences(int* out) {
    out[0] = 1;
    __threadfence();
    __threadfence_block();
    out[1] = 2;
}
extern "C" __global__ void spin(volatile int* flag, int* out) {
    while (*flag == 0) {}
    out[threadIdx.x] = 1;
}
extern "C" __global__ void gridstride(const int* a, int* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        out[i] = a[i] * a[i];
}
