// One kernel per construct outside the subset; the rejection tests isolate each kernel.
#include <cstdio>
__constant__ int cst[4];
__device__ int gvar;
__device__ __noinline__ int helper(int x) { return x * x + 1; }
extern "C" __global__ void k_const(int* out) { out[threadIdx.x] = cst[threadIdx.x & 3]; }
extern "C" __global__ void k_gvar(int* out) { gvar = 5; out[threadIdx.x] = gvar; }
extern "C" __global__ void k_call(int* out) { out[threadIdx.x] = helper(threadIdx.x); }
extern "C" __global__ void k_printf(int* out) { printf("%d\n", out[threadIdx.x]); }
extern "C" __global__ void k_local(int* out, int n) {
    int a[8]; for (int i = 0; i < 8; i++) a[i] = out[i]; out[threadIdx.x] = a[n & 7];
}
extern "C" __global__ void k_float(float* out) { out[threadIdx.x] = out[threadIdx.x] * 1.5f; }
extern "C" __global__ void k_char(char* out) { out[threadIdx.x] = threadIdx.x; }
extern "C" __global__ void k_short(const short* a, int* out) { out[threadIdx.x] = a[threadIdx.x]; }
extern "C" __global__ void k_ll(long long* out) { out[threadIdx.x] = (long long)threadIdx.x << 40; }
extern "C" __global__ void k_vote(int* out) {
    out[threadIdx.x] = __ballot_sync(0xffffffff, out[threadIdx.x] > 0);
}
extern "C" __global__ void k_activemask(int* out) { out[threadIdx.x] = __activemask(); }
extern "C" __global__ void k_match(int* out) {
    out[threadIdx.x] = __match_any_sync(0xffffffff, out[threadIdx.x]);
}
extern "C" __global__ void k_vec(int4* out) { int4 v = out[threadIdx.x]; v.x += 1; out[threadIdx.x] = v; }
extern "C" __global__ void k_cvta_shared(int* out, int c) {
    __shared__ int s[4];
    s[threadIdx.x & 3] = 1;
    __syncthreads();
    int* p = c ? s : out;
    out[threadIdx.x] = p[threadIdx.x & 3];
}
extern "C" __global__ void k_generic_ld(int* out) {
    int v; asm volatile("ld.u32 %0, [%1];" : "=r"(v) : "l"(out)); out[threadIdx.x] = v;
}
extern "C" __global__ void k_generic_atom(int* out) {
    int v; asm volatile("atom.add.u32 %0, [%1], 1;" : "=r"(v) : "l"(out)); out[threadIdx.x] = v;
}
extern "C" __global__ void k_atom64(unsigned long long* out) { atomicAdd(out, 1ull); }
extern "C" __global__ void k_trap(int* out) { if (out[0]) __trap(); out[1] = 2; }
extern "C" __global__ void k_brkpt(int* out) { if (out[0]) __brkpt(); out[1] = 2; }
extern "C" __global__ void k_barcount(int* out) {
    out[threadIdx.x] = __syncthreads_count(out[threadIdx.x]);
}
extern "C" __global__ void k_syncwarp(int* out) {
    __shared__ int s[32]; s[threadIdx.x] = threadIdx.x; __syncwarp();
    out[threadIdx.x] = s[threadIdx.x ^ 1];
}
extern "C" __global__ void k_laneid(int* out) {
    unsigned l; asm("mov.u32 %0, %%laneid;" : "=r"(l)); out[threadIdx.x] = l;
}
extern "C" __global__ void k_lanemask(int* out) {
    unsigned l; asm("mov.u32 %0, %%lanemask_lt;" : "=r"(l)); out[threadIdx.x] = l;
}
extern "C" __global__ void k_clock(int* out) { out[threadIdx.x] = clock(); }
extern "C" __global__ void k_warpsize(int* out) { out[threadIdx.x] = threadIdx.x % warpSize; }
extern "C" __global__ void k_shfl32(const int* a, int* out) {
    out[threadIdx.x] = __shfl_down_sync(0xffffffff, a[threadIdx.x], 1);
}
extern "C" __global__ void k_shflwidth(const int* a, int* out, int w) {
    out[threadIdx.x] = __shfl_down_sync(0xffffffff, a[threadIdx.x], 1, w);
}
extern "C" __global__ void k_tex(cudaTextureObject_t tex, int* out) {
    out[threadIdx.x] = tex1Dfetch<int>(tex, threadIdx.x);
}
extern "C" __global__ void k_structparam(int2 v, int* out) { out[threadIdx.x] = v.x + v.y; }
__device__ __noinline__ void fence_helper() { __threadfence(); }
extern "C" __global__ void k_callvoid(int* out) { out[0] = 1; fence_helper(); out[1] = 2; }
