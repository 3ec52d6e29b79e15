#!/usr/bin/env bash
# The main job on the built-in default: build the BERT-mini preset's training
# step (forward, MLM loss, backward), schedule it, plan every tensor into one
# arena and print where the memory goes; then run three steps on the CPU in
# that arena, printing the loss, the step time, and the planned and measured
# peak. (Rematerialization under a budget comes with the remat pass.)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target remat-opt remat-run
mkdir -p "$build_dir/demo"
"$build_dir/remat-opt" models/bert-mini.json --bind batch=8,seq=128 \
  -p canonicalize,autodiff,dce,schedule,plan-memory --print-memory --timing \
  -o "$build_dir/demo/bert-mini.train.onnx"
"$build_dir/remat-run" "$build_dir/demo/bert-mini.train.onnx" --plan-memory --steps 3
