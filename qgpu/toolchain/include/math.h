/* <math.h> for qgpu's CUDA compilers (written for qgpu; docs/ISA.md section 8).
 *
 * Every route: INFINITY, NAN, HUGE_VALF, HUGE_VAL (constant expressions, by their IEEE-754 bit
 * patterns), the M_PI family of constants, float_t and double_t.
 *
 * NVRTC declares the CUDA math API itself (expf, sqrtf, fabsf, fminf, ..., the double
 * functions, the C++ float overloads such as sqrt(float), isnan, isinf, isfinite, signbit), so
 * this header adds only the macros. clang (-nocudainc -nocudalib: no libdevice) gets definitions
 * here: the functions exact in IEEE arithmetic (fabs, fmin, fmax, sqrt, floor, ceil, trunc,
 * round, rint, nearbyint, fma, copysign; float and double) as the compiler's builtins, one PTX
 * instruction each, and the transcendental float functions (expf, exp2f, exp10f, logf, log2f,
 * log10f, sinf, cosf, tanf, powf, rsqrtf) as CUDA's fast intrinsics (__expf, __logf, __sinf,
 * ...): the PTX approximate instructions, which is what -use_fast_math makes of them; their
 * double forms are deleted rather than silently computed in float. */
#ifndef QGPU_MATH_H
#define QGPU_MATH_H

#ifndef INFINITY
#define INFINITY __builtin_bit_cast(float, 0x7f800000u)
#endif
#ifndef NAN
#define NAN __builtin_bit_cast(float, 0x7fc00000u)
#endif
#ifndef HUGE_VALF
#define HUGE_VALF __builtin_bit_cast(float, 0x7f800000u)
#endif
#ifndef HUGE_VAL
#define HUGE_VAL __builtin_bit_cast(double, 0x7ff0000000000000ull)
#endif

#ifndef M_PI
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
#endif

typedef float float_t;
typedef double double_t;

#if defined(__CUDACC_RTC__)

/* What <cmath> brings into namespace std: NVRTC's own global declarations. */
#define QGPU_MATH_NAMES(X)                                                                     \
  X(acos) X(acosf) X(acosh) X(acoshf) X(asin) X(asinf) X(asinh) X(asinhf) X(atan) X(atanf)     \
  X(atan2) X(atan2f) X(atanh) X(atanhf) X(cbrt) X(cbrtf) X(ceil) X(ceilf) X(copysign)          \
  X(copysignf) X(cos) X(cosf) X(cosh) X(coshf) X(erf) X(erff) X(erfc) X(erfcf) X(exp) X(expf)  \
  X(exp2) X(exp2f) X(expm1) X(expm1f) X(fabs) X(fabsf) X(fdim) X(fdimf) X(floor) X(floorf)     \
  X(fma) X(fmaf) X(fmax) X(fmaxf) X(fmin) X(fminf) X(fmod) X(fmodf) X(frexp) X(frexpf)         \
  X(hypot) X(hypotf) X(ilogb) X(ilogbf) X(ldexp) X(ldexpf) X(lgamma) X(lgammaf) X(llrint)      \
  X(llrintf) X(llround) X(llroundf) X(log) X(logf) X(log10) X(log10f) X(log1p) X(log1pf)       \
  X(log2) X(log2f) X(logb) X(logbf) X(lrint) X(lrintf) X(lround) X(lroundf) X(modf) X(modff)   \
  X(nan) X(nanf) X(nearbyint) X(nearbyintf) X(nextafter) X(nextafterf) X(pow) X(powf)          \
  X(remainder) X(remainderf) X(remquo) X(remquof) X(rint) X(rintf) X(round) X(roundf)          \
  X(scalbln) X(scalblnf) X(scalbn) X(scalbnf) X(sin) X(sinf) X(sinh) X(sinhf) X(sqrt) X(sqrtf) \
  X(tan) X(tanf) X(tanh) X(tanhf) X(tgamma) X(tgammaf) X(trunc) X(truncf) X(abs) X(isnan)      \
  X(isinf) X(isfinite) X(signbit)

#else /* clang */

#define QGPU_MATH_FN static __host__ __device__ __forceinline__
#define QGPU_FAST_FN static __device__ __forceinline__

#define QGPU_EXACT1(name)                                                                      \
  QGPU_MATH_FN float name##f(float x) { return __builtin_##name##f(x); }                      \
  QGPU_MATH_FN float name(float x) { return __builtin_##name##f(x); }                         \
  QGPU_MATH_FN double name(double x) { return __builtin_##name(x); }
#define QGPU_EXACT2(name)                                                                      \
  QGPU_MATH_FN float name##f(float x, float y) { return __builtin_##name##f(x, y); }          \
  QGPU_MATH_FN float name(float x, float y) { return __builtin_##name##f(x, y); }             \
  QGPU_MATH_FN double name(double x, double y) { return __builtin_##name(x, y); }
QGPU_EXACT1(fabs)
QGPU_EXACT1(sqrt)
QGPU_EXACT1(floor)
QGPU_EXACT1(ceil)
QGPU_EXACT1(trunc)
QGPU_EXACT1(round)
QGPU_EXACT1(rint)
QGPU_EXACT1(nearbyint)
QGPU_EXACT2(fmin)
QGPU_EXACT2(fmax)
QGPU_EXACT2(copysign)
QGPU_MATH_FN float fmaf(float x, float y, float z) { return __builtin_fmaf(x, y, z); }
QGPU_MATH_FN float fma(float x, float y, float z) { return __builtin_fmaf(x, y, z); }
QGPU_MATH_FN double fma(double x, double y, double z) { return __builtin_fma(x, y, z); }
QGPU_MATH_FN float abs(float x) { return __builtin_fabsf(x); }
QGPU_MATH_FN double abs(double x) { return __builtin_fabs(x); }
#undef QGPU_EXACT1
#undef QGPU_EXACT2

#define QGPU_CLASSIFY(name)                                                                    \
  QGPU_MATH_FN bool name(float x) { return __builtin_##name(x); }                             \
  QGPU_MATH_FN bool name(double x) { return __builtin_##name(x); }
QGPU_CLASSIFY(isnan)
QGPU_CLASSIFY(isinf)
QGPU_CLASSIFY(isfinite)
QGPU_CLASSIFY(signbit)
#undef QGPU_CLASSIFY

/* CUDA's fast intrinsics: the PTX approximate instructions (ex2, lg2, sin, cos, rsqrt, div). */
QGPU_FAST_FN float __fdividef(float x, float y) { return __nvvm_div_approx_f(x, y); }
QGPU_FAST_FN float __expf(float x) { return __nvvm_ex2_approx_f(x * 1.442695041f); }
QGPU_FAST_FN float __exp10f(float x) { return __nvvm_ex2_approx_f(x * 3.321928095f); }
QGPU_FAST_FN float __log2f(float x) { return __nvvm_lg2_approx_f(x); }
QGPU_FAST_FN float __logf(float x) { return __nvvm_lg2_approx_f(x) * 0.693147181f; }
QGPU_FAST_FN float __log10f(float x) { return __nvvm_lg2_approx_f(x) * 0.301029996f; }
QGPU_FAST_FN float __sinf(float x) { return __nvvm_sin_approx_f(x); }
QGPU_FAST_FN float __cosf(float x) { return __nvvm_cos_approx_f(x); }
QGPU_FAST_FN float __tanf(float x) { return __fdividef(__sinf(x), __cosf(x)); }
QGPU_FAST_FN float __powf(float x, float y) { return __nvvm_ex2_approx_f(y * __log2f(x)); }
QGPU_FAST_FN float rsqrtf(float x) { return __nvvm_rsqrt_approx_f(x); }

#define QGPU_FAST1(name, fast)                                                                 \
  QGPU_FAST_FN float name##f(float x) { return fast(x); }                                     \
  QGPU_FAST_FN float name(float x) { return fast(x); }                                        \
  double name(double) = delete;
QGPU_FAST1(exp, __expf)
QGPU_FAST1(exp2, __nvvm_ex2_approx_f)
QGPU_FAST1(log, __logf)
QGPU_FAST1(log2, __log2f)
QGPU_FAST1(log10, __log10f)
QGPU_FAST1(sin, __sinf)
QGPU_FAST1(cos, __cosf)
QGPU_FAST1(tan, __tanf)
#undef QGPU_FAST1
QGPU_FAST_FN float exp10f(float x) { return __exp10f(x); }
QGPU_FAST_FN float powf(float x, float y) { return __powf(x, y); }
QGPU_FAST_FN float pow(float x, float y) { return __powf(x, y); }
double pow(double, double) = delete;

/* What <cmath> brings into namespace std: the names defined above. */
#define QGPU_MATH_NAMES(X)                                                                     \
  X(fabs) X(fabsf) X(sqrt) X(sqrtf) X(floor) X(floorf) X(ceil) X(ceilf) X(trunc) X(truncf)     \
  X(round) X(roundf) X(rint) X(rintf) X(nearbyint) X(nearbyintf) X(fmin) X(fminf) X(fmax)      \
  X(fmaxf) X(copysign) X(copysignf) X(fma) X(fmaf) X(abs) X(isnan) X(isinf) X(isfinite)        \
  X(signbit) X(exp) X(expf) X(exp2) X(exp2f) X(log) X(logf) X(log2) X(log2f) X(log10)          \
  X(log10f) X(sin) X(sinf) X(cos) X(cosf) X(tan) X(tanf) X(pow) X(powf)

#endif

#endif
