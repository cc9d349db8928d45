/* <stdio.h> for qgpu's CUDA compilers (written for qgpu; docs/ISA.md section 8): device-side
 * printf, declared as CUDA declares it (the compiler turns a call into NVVM's vprintf). NVRTC
 * declares printf itself; clang gets the declaration here. A host's FILE, fopen, scanf... do
 * not exist on the device. */
#ifndef QGPU_STDIO_H
#define QGPU_STDIO_H
#include <stddef.h>
#if !defined(__CUDACC_RTC__)
extern "C" __host__ __device__ int printf(const char *format, ...);
#endif
#endif
