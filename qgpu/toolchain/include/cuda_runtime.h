/* <cuda_runtime.h> for clang (written for qgpu): the CUDA device API qgpu supports is in
 * cuda_clang.h, which the clang route includes before the source (-include), so there is
 * nothing more to declare. NVRTC and nvcc find the CUDA toolkit's own cuda_runtime.h first. */
#ifndef QGPU_CUDA_RUNTIME_H
#define QGPU_CUDA_RUNTIME_H
#endif
