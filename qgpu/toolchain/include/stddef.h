/* <stddef.h> for qgpu's CUDA compilers (written for qgpu; docs/ISA.md section 8): size_t,
 * ptrdiff_t, NULL, offsetof. NVRTC has all but offsetof built in; clang (no C library on the
 * device side) gets them from the compiler's predefined macros. */
#ifndef QGPU_STDDEF_H
#define QGPU_STDDEF_H

#if !defined(__CUDACC_RTC__)
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
#ifndef NULL
#define NULL __null
#endif
#endif
#ifndef offsetof
#define offsetof(type, member) __builtin_offsetof(type, member)
#endif

#endif
