// Shared memory and barriers.
extern "C" __global__ void reduce16(const int* a, int* out) {
    __shared__ int s[16];
    int t = threadIdx.x;
    s[t] = a[blockIdx.x * 16 + t];
    __syncthreads();
    for (int k = 8; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
extern "C" __global__ void twoarrays(const int* a, int* out) {
    __shared__ int x[4];
    __shared__ int y[8];
    int t = threadIdx.x;
    x[t & 3] = t; y[t & 7] = a[t];
    __syncthreads();
    out[t] = x[(t + 1) & 3] + y[(t + 3) & 7];
}
extern __shared__ int dyn[];
extern "C" __global__ void dynshared(const int* a, int* out, int n) {
    int t = threadIdx.x;
    dyn[t] = a[t];
    __syncthreads();
    out[t] = dyn[n - 1 - t];
}
extern "C" __global__ void exitbarrier(const int* a, int* out, int n) {
    __shared__ int s[16];
    int t = threadIdx.x;
    if (t >= n) return;
    s[t] = a[t];
    __syncthreads();
    out[t] = s[(t + 1) % n];
}
extern "C" __global__ void divbarrier(int* out) {
    __shared__ int s[16];
    int t = threadIdx.x;
    s[t] = t;
    if (t < 2) __syncthreads();
    out[t] = s[15 - t];
}
extern "C" __global__ void sharedatom(int* out) {
    __shared__ int h[4];
    int t = threadIdx.x;
    if (t < 4) h[t] = 0;
    __syncthreads();
    atomicAdd(&h[t & 3], t);
    int o = atomicMax(&h[0], 3);
    __syncthreads();
    if (t < 4) out[t] = h[t];
    out[4 + t] = o;
}
