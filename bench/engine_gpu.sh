#!/usr/bin/env bash
# The sparse engine on a CUDA device: the prepared script for a session that is lent a GPU.
#
# It builds the tiny GPU model there (float32; minutes of CPU), then in one run prints the
# engine's speed against the stock path on the GPU (bench/engine_speed.py: the dot product, a
# long kernel and a batch of 16, float32 and bfloat16), and runs the whole kernel suite on the
# model on the GPU, every token and global word checked (float32 and bfloat16). Logs go to $OUT.
#
# The device image has PyTorch and transformers but not diskcache (and may hold another
# transformers than requirements.txt pins): carry those as wheels, made here with network
# (.whl/ is git-ignored, so it must be named in `carry`; python3 there is 3.12):
#     pip download --no-deps --only-binary=:all: --python-version 3.12 \
#         --platform manylinux_2_28_x86_64 -d .whl diskcache==5.6.3 transformers==5.23.0
# and call it (the device tool runs the command in the repo root; $OUT comes back):
#     run(command="bash bench/engine_gpu.sh", carry=[".whl"], timeout_s=600)
# `bash bench/engine_gpu.sh bench` or `... suite` runs one half only.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:=out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
what="${1:-all}"
export PYTHONUNBUFFERED=1 QGPU_CACHE_DIR="${QGPU_CACHE_DIR:-/tmp/qgpu-cache}"

shopt -s nullglob
wheels=(.whl/*.whl)
if ((${#wheels[@]})); then
    echo "== installing carried wheels: ${wheels[*]##*/}"
    "$PY" -m pip install -q --no-index --no-deps --target /tmp/site "${wheels[@]}" \
        && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
nvidia-smi -L 2>&1 | head -2
"$PY" -c "import torch, transformers; print('torch', torch.__version__, 'cuda',
torch.cuda.is_available(), 'transformers', transformers.__version__)" || exit 2

build=/tmp/qgpu-build
echo "== build (log: $OUT/build.log)"
"$PY" -m qgpu build --base tiny --out "$build" --dtype float32 >"$OUT/build.log" 2>&1 \
    || { tail -20 "$OUT/build.log"; exit 2; }

status=0
if [ "$what" != suite ]; then
    echo "== engine vs stock on cuda"
    "$PY" -m bench.engine_speed --build "$build" --device cuda --stock-tokens 16 \
        2>&1 | tee "$OUT/engine_speed.log" || status=1
fi
if [ "$what" != bench ]; then
    echo "== the suite on the model, cuda (bench/suite_on_model.sh)"
    OUT="$build" LAYERS=0 BATCH=16 DEVICE=cuda PYTHON="$PY" bash bench/suite_on_model.sh \
        2>&1 | tee "$OUT/suite_on_model.log" | grep -v " exact$" || status=1
fi
exit $status
