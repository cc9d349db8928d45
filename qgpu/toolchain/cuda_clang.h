/* The CUDA device API subset that qgpu kernels use, for clang without a CUDA install.
 * qgpu.cuda passes it with -include (plus -nocudainc), so the clang route accepts the same
 * sources as NVRTC; the C library's device side (math.h, stdio.h, ...) is in qgpu's include/
 * folder, which clang searches before the system's. */
#pragma once

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define QGPU_FN static __device__ __forceinline__

#include <__clang_cuda_builtin_vars.h>

/* Same-bits operations share the signed builtin; ordered ones need the unsigned variant too. */
#define QGPU_ATOMIC(NAME, B, BU)                                                               \
  QGPU_FN int NAME(int *p, int v) { return B(p, v); }                                          \
  QGPU_FN unsigned NAME(unsigned *p, unsigned v) { return BU; }
QGPU_ATOMIC(atomicAdd, __nvvm_atom_add_gen_i, (unsigned)__nvvm_atom_add_gen_i((int *)p, (int)v))
QGPU_ATOMIC(atomicExch, __nvvm_atom_xchg_gen_i, (unsigned)__nvvm_atom_xchg_gen_i((int *)p, (int)v))
QGPU_ATOMIC(atomicAnd, __nvvm_atom_and_gen_i, (unsigned)__nvvm_atom_and_gen_i((int *)p, (int)v))
QGPU_ATOMIC(atomicOr, __nvvm_atom_or_gen_i, (unsigned)__nvvm_atom_or_gen_i((int *)p, (int)v))
QGPU_ATOMIC(atomicXor, __nvvm_atom_xor_gen_i, (unsigned)__nvvm_atom_xor_gen_i((int *)p, (int)v))
QGPU_ATOMIC(atomicMin, __nvvm_atom_min_gen_i, __nvvm_atom_min_gen_ui(p, v))
QGPU_ATOMIC(atomicMax, __nvvm_atom_max_gen_i, __nvvm_atom_max_gen_ui(p, v))
QGPU_FN int atomicSub(int *p, int v) { return __nvvm_atom_add_gen_i(p, (int)(0u - (unsigned)v)); }
QGPU_FN unsigned atomicSub(unsigned *p, unsigned v) { return atomicAdd(p, 0u - v); }
QGPU_FN int atomicCAS(int *p, int c, int v) { return __nvvm_atom_cas_gen_i(p, c, v); }
QGPU_FN unsigned atomicCAS(unsigned *p, unsigned c, unsigned v) {
  return (unsigned)__nvvm_atom_cas_gen_i((int *)p, (int)c, (int)v);
}
QGPU_FN unsigned atomicInc(unsigned *p, unsigned v) { return __nvvm_atom_inc_gen_ui(p, v); }
QGPU_FN unsigned atomicDec(unsigned *p, unsigned v) { return __nvvm_atom_dec_gen_ui(p, v); }

/* c packs ((32 - width) << 8) | clamp, as PTX shfl.sync expects (clamp 0 for up, 31 else). */
#define QGPU_SHFL(NAME, B, CLAMP)                                                              \
  QGPU_FN int NAME(unsigned m, int v, int l, int w = 32) {                                     \
    return B(m, v, l, ((32 - w) << 8) | CLAMP);                                                \
  }                                                                                            \
  QGPU_FN unsigned NAME(unsigned m, unsigned v, int l, int w = 32) {                           \
    return (unsigned)B(m, (int)v, l, ((32 - w) << 8) | CLAMP);                                 \
  }
QGPU_SHFL(__shfl_sync, __nvvm_shfl_sync_idx_i32, 0x1f)
QGPU_SHFL(__shfl_up_sync, __nvvm_shfl_sync_up_i32, 0)
QGPU_SHFL(__shfl_down_sync, __nvvm_shfl_sync_down_i32, 0x1f)
QGPU_SHFL(__shfl_xor_sync, __nvvm_shfl_sync_bfly_i32, 0x1f)

QGPU_FN int __all_sync(unsigned m, int p) { return __nvvm_vote_all_sync(m, p); }
QGPU_FN int __any_sync(unsigned m, int p) { return __nvvm_vote_any_sync(m, p); }
QGPU_FN unsigned __ballot_sync(unsigned m, int p) { return __nvvm_vote_ballot_sync(m, p); }
QGPU_FN unsigned __activemask() {
  unsigned m;
  asm volatile("activemask.b32 %0;" : "=r"(m));
  return m;
}
QGPU_FN void __syncwarp(unsigned m = 0xffffffffu) { __nvvm_bar_warp_sync(m); }

QGPU_FN int __popc(unsigned x) { return __builtin_popcount(x); }
QGPU_FN int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
QGPU_FN unsigned __brev(unsigned x) { return __builtin_bitreverse32(x); }
QGPU_FN int __ffs(int x) { return __builtin_ffs(x); }
QGPU_FN int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
QGPU_FN unsigned __umulhi(unsigned a, unsigned b) {
  return (unsigned)(((unsigned long long)a * b) >> 32);
}
QGPU_FN int min(int a, int b) { return a < b ? a : b; }
QGPU_FN int max(int a, int b) { return a > b ? a : b; }
QGPU_FN unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
QGPU_FN unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
QGPU_FN unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
QGPU_FN unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
QGPU_FN unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
QGPU_FN unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }
QGPU_FN int abs(int x) { return x < 0 ? -x : x; }

/* A float's bits as an int and back (the same 32 bits; no conversion). */
QGPU_FN int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
QGPU_FN unsigned __float_as_uint(float x) { return __builtin_bit_cast(unsigned, x); }
QGPU_FN float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
QGPU_FN float __uint_as_float(unsigned x) { return __builtin_bit_cast(float, x); }
