/* <assert.h> for qgpu's CUDA compilers (written for qgpu; docs/ISA.md section 8): assert as
 * CUDA has it on the device, a call of __assertfail(expression, file, line, function,
 * sizeof(char)) when the expression is false; nothing when NDEBUG is defined where this header
 * is included (it may be included again to change that, as C allows). NVRTC declares
 * __assertfail itself; clang gets the declaration here. */
#if !defined(__CUDACC_RTC__) && !defined(QGPU_ASSERTFAIL_DECLARED)
#define QGPU_ASSERTFAIL_DECLARED
#include <stddef.h>
extern "C" __host__ __device__ void __assertfail(const char *expression, const char *file,
                                                 unsigned line, const char *function,
                                                 size_t char_size);
#endif

#undef assert
#ifdef NDEBUG
#define assert(expression) ((void)0)
#else
#define assert(expression)                                                                     \
  ((expression) ? (void)0                                                                      \
                : __assertfail(#expression, __FILE__, __LINE__, __PRETTY_FUNCTION__,           \
                               sizeof(char)))
#endif
