#!/bin/sh
# Regenerates the committed PTX fixtures: nvcc 13.0 (-arch=sm_75 -O3), NVRTC 13.5.37 for
# compute_75 through qgpu.toolchain.cuda (basics.nvrtc.ptx), and clang-14 with the project's header.
set -e
cd "$(dirname "$0")"
for f in basics arith shared atomics shuffles unsupported; do
    nvcc --ptx -arch=sm_75 -O3 "$f.cu" -o "$f.ptx"
done
PYTHONPATH=../.. python -c 'from qgpu.toolchain.cuda import compile_cuda
print(compile_cuda(open("basics.cu").read(), filename="basics.cu", compiler="nvrtc").ptx, end="")
' > basics.nvrtc.ptx
clang-14 -x cuda --cuda-device-only --cuda-gpu-arch=sm_75 --cuda-path=/nonexistent \
    -nocudainc -nocudalib -std=c++17 -O3 -S -Xclang -target-feature -Xclang +ptx64 \
    -include ../../qgpu/cuda_clang.h clang.cu -o clang.ptx
