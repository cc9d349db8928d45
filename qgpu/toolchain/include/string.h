/* <string.h> for qgpu's CUDA compilers (written for qgpu; docs/ISA.md section 8): what CUDA
 * has on the device: memset and memcpy (the compiler writes them as loads and stores). NVRTC
 * declares them itself; clang gets the declarations here. */
#ifndef QGPU_STRING_H
#define QGPU_STRING_H
#include <stddef.h>
#if !defined(__CUDACC_RTC__)
extern "C" __host__ __device__ void *memset(void *dest, int value, size_t count);
extern "C" __host__ __device__ void *memcpy(void *dest, const void *src, size_t count);
#endif
#endif
