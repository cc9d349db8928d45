/* <stdlib.h> for qgpu's CUDA compilers (written for qgpu; docs/ISA.md section 8): what CUDA
 * has on the device: malloc and free (the device heap), abs, labs, llabs; EXIT_SUCCESS and
 * EXIT_FAILURE. NVRTC declares the functions itself; clang gets them here. */
#ifndef QGPU_STDLIB_H
#define QGPU_STDLIB_H
#include <stddef.h>
#define EXIT_SUCCESS 0
#define EXIT_FAILURE 1
#if !defined(__CUDACC_RTC__)
extern "C" __host__ __device__ void *malloc(size_t size);
extern "C" __host__ __device__ void free(void *ptr);
static __host__ __device__ __forceinline__ long labs(long x) { return x < 0 ? -x : x; }
static __host__ __device__ __forceinline__ long long llabs(long long x) { return x < 0 ? -x : x; }
static __host__ __device__ __forceinline__ long abs(long x) { return labs(x); }
static __host__ __device__ __forceinline__ long long abs(long long x) { return llabs(x); }
#endif
#endif
