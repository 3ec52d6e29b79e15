#!/usr/bin/env bash
# The main job. For now: build remat-opt and run the default clean-up
# pipeline on the shipped example graph. (The BERT training-step demo replaces
# this once the BERT preset, autodiff and the runtime exist.)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target remat-opt
"$build_dir/remat-opt" models/examples/mlp.rir -p fold-constants,cse,dce --timing
