#!/usr/bin/env bash
# The whole kernel suite on the merged model (tiny base, the GPU circuit for the Qwen3.5-2B
# layer shapes), checked: every generated token, every circuit layer at every token, every
# global word — in float32 and in bfloat16, BATCH launches side by side on the sparse engine.
# Meant for a CUDA device (DEVICE=cuda, the default; bench/engine_gpu.sh calls it there); on
# this 2-core CPU each dtype takes ~16 min of CPU (docs/suite_on_model.md, DEVICE=cpu).
# Needs torch, transformers and diskcache (requirements.txt). On a machine without network,
# install wheels brought along in .whl/ first:
#     python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#     PYTHONPATH=/tmp/site:. bash bench/suite_on_model.sh
# Settings (environment): DEVICE, BATCH, OUT (the build directory), PYTHON, LAYERS (below).
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE=${DEVICE:-cuda}
BATCH=${BATCH:-32}
OUT=${OUT:-build/gpu}
PY=${PYTHON:-python3}
[ -f "$OUT/merged/qgpu_circuit.json" ] || "$PY" -m qgpu build --base tiny --out "$OUT" --dtype float32
# LAYERS: the fraction of kernels whose every circuit layer is checked at every token (the
# layer check's evaluator costs ~20 ms of CPU a token; 0: tokens and memory only)
FLAGS=(--layer-sample "${LAYERS:-1}")
"$PY" -m qgpu suite --model "$OUT" --device "$DEVICE" --batch "$BATCH" "${FLAGS[@]}"
"$PY" -m qgpu suite --model "$OUT" --device "$DEVICE" --batch "$BATCH" --dtype bfloat16 \
    "${FLAGS[@]}"
