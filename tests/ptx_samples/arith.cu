// Integer arithmetic as NVVM emits it: magic division, mul.hi, bit tricks, 16-bit selp.
extern "C" __global__ void divconst(const int* a, int* out) {
    int t = threadIdx.x; int x = a[t];
    out[4*t] = x / 10; out[4*t+1] = x % 7; out[4*t+2] = (unsigned)x / 10u; out[4*t+3] = x / 3;
}
extern "C" __global__ void divvar(const int* a, const int* b, int* out) {
    int t = threadIdx.x;
    out[4*t] = a[t] / b[t]; out[4*t+1] = a[t] % b[t];
    out[4*t+2] = (unsigned)a[t] / (unsigned)b[t]; out[4*t+3] = (unsigned)a[t] % (unsigned)b[t];
}
extern "C" __global__ void bits(const int* a, int* out) {
    int t = threadIdx.x; unsigned x = a[t];
    out[8*t] = __popc(x); out[8*t+1] = __clz(x); out[8*t+2] = __brev(x); out[8*t+3] = __ffs(x);
    out[8*t+4] = __mulhi(a[t], 12345); out[8*t+5] = __umulhi(x, 0x9e3779b9u);
    out[8*t+6] = (x << 5) | (x >> 27); out[8*t+7] = 31 - __clz(x);
}
extern "C" __global__ void minmax(const int* a, const int* b, int* out) {
    int t = threadIdx.x;
    out[5*t] = min(a[t], b[t]); out[5*t+1] = max(a[t], b[t]); out[5*t+2] = abs(a[t]);
    out[5*t+3] = min((unsigned)a[t], (unsigned)b[t]); out[5*t+4] = -a[t];
}
extern "C" __global__ void booltoint(const int* a, const int* b, int* out) {
    int t = threadIdx.x;
    int x = (a[t] < b[t]) + (a[t] == b[t]) * 2 + ((a[t] > 0 && b[t] > 0) ? 4 : 0);
    out[t] = x * (a[t] != 3);
}
extern "C" __global__ void boolshift(const int* a, int* out) {
    int t = threadIdx.x; int x = a[t];
    out[t] = ((x > 0) << 1) | (x < 0);
}
extern "C" __global__ void shifts(const int* a, const int* b, int* out) {
    int t = threadIdx.x;
    out[3*t] = a[t] << b[t]; out[3*t+1] = a[t] >> b[t]; out[3*t+2] = (unsigned)a[t] >> b[t];
}
extern "C" __global__ void mulwide(const int* a, int* out) {
    int t = threadIdx.x;
    long long p = (long long)a[t] * 1000003;
    out[t] = (int)(p >> 20) + (int)((unsigned long long)(unsigned)a[t] * 3u >> 32);
}
extern "C" __global__ void __launch_bounds__(16) misc(const int* a, int* out, int n) {
    int t = threadIdx.x; unsigned x = a[t];
    out[8*t] = __sad(a[t], n, 3);
    out[8*t+1] = __byte_perm(x, n, 0x3210 + n);
    out[8*t+2] = __funnelshift_rc(x, n, t);
    out[8*t+3] = (int)(signed char)x;
    out[8*t+4] = (int)(short)x;
    out[8*t+5] = __usad(x, n, 1);
    int s = 0;
    #pragma unroll 1
    for (int i = 0; i < t; i++) s += a[i] * i;
    out[8*t+6] = s;
    out[8*t+7] = __funnelshift_l(x, n, t);
}
extern "C" __global__ void sizediv(int* out, int n) {
    size_t i = threadIdx.x;
    out[i] = (int)(i / (size_t)n) + (int)((size_t)n % (i + 1)) * 100;
}
extern "C" __global__ void clamp64(int* out, long long v) {
    out[threadIdx.x] = min(max(v, -5ll), 70000ll) + threadIdx.x;
}
