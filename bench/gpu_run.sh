#!/usr/bin/env bash
# Real-GPU parity run: the one prepared script for a session that is lent an NVIDIA GPU.
#
# It runs every suite kernel's committed PTX (kernels/ptx/*.ptx) on the GPU for 3 seeds and
# writes $OUT/gpu_parity.json (+ gpu_parity.log), then compares that file with both
# interpreters and prints the summary. It needs only numpy and cuda-bindings (or CuPy) there:
# the CUDA image already has numpy, cuda-bindings and cupy-cuda13x; carried wheels in .whl/
# are installed first when present (no network there: `--no-index`).
#
# How to call it (the device tool runs the command in the repo root; $OUT comes back):
#     run(command="bash bench/gpu_run.sh", carry=[".whl"], timeout_s=300)
#   extra arguments go to `python -m qgpu.suite.gpu_parity`, e.g. `bash bench/gpu_run.sh --tool cupy`
#   or `bash bench/gpu_run.sh --seeds 1 axpy dot`. Expect well under a minute of GPU work.
# Then, back here:
#     cp <files_at>/gpu_parity.json tests/fixtures/gpu_parity.json
#     python -m pytest tests/suite/test_gpu_parity.py # interpreters vs the real GPU
#
# Carried wheels (optional: only if the image's cuda-bindings is missing or broken). Made here
# with network; .whl/ is git-ignored, so it must be named in `carry`. python3 there is 3.12:
#     pip download --no-deps --only-binary=:all: --python-version 3.12 \
#         --platform manylinux_2_28_x86_64 -d .whl cuda-bindings==13.5.0 cuda-pathfinder
#   cuda-bindings 13.5.0 requires only cuda-pathfinder>=1.4.2 (its other Requires-Dist are
#   under the "all" extra); cuda-pathfinder has no dependencies. Add numpy==2.4.6 to the list
#   only if the image ever lacks numpy (it is 16 MiB; the carry limit is 64 MiB in all).
#
# Exit status: that of qgpu.suite.gpu_parity (0 all ran, 1 some kernel failed on the GPU, 2 no GPU or
# no binding), or 3 if the GPU's outputs differ from the interpreters.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:=out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"

shopt -s nullglob
wheels=(.whl/*.whl)
if ((${#wheels[@]})); then
    echo "== installing carried wheels: ${wheels[*]##*/}"
    "$PY" -m pip install -q --no-index --no-deps "${wheels[@]}" || echo "!! wheel install failed"
fi

echo "== machine"
nvidia-smi -L 2>&1 | head -4
"$PY" - <<'EOF'
import importlib.metadata as md
import sys
print("python", sys.version.split()[0])
for dist in ("numpy", "cuda-bindings", "cuda-pathfinder", "cupy-cuda13x", "cupy-cuda12x"):
    try:
        print(f"  {dist} {md.version(dist)}")
    except md.PackageNotFoundError:
        pass
EOF

echo "== recording (log: $OUT/gpu_parity.log)"
start=$(date +%s)
"$PY" -m qgpu.suite.gpu_parity --out "$OUT/gpu_parity.json" -v "$@" 2>"$OUT/gpu_parity.log"
status=$?
echo "   ($(( $(date +%s) - start )) s, exit $status)"
if [ "$status" -eq 2 ]; then
    tail -3 "$OUT/gpu_parity.log"
    exit 2
fi
[ -f "$OUT/gpu_parity.json" ] || { tail -20 "$OUT/gpu_parity.log"; exit "$status"; }

echo "== interpreters vs this GPU"
"$PY" -m qgpu.suite.gpu_parity --check "$OUT/gpu_parity.json" | tail -40
check=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then exit "$status"; fi
if [ "$check" -ne 0 ]; then exit 3; fi
exit 0
