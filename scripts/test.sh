#!/usr/bin/env bash
# Sets up, configures, builds and runs every test; ends with ctest's summary.
#   BUILD_DIR=build-asan REMAT_SANITIZE=ON scripts/test.sh   # ASan+UBSan build
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
build_dir=${BUILD_DIR:-build}
jobs=$(nproc)
cmake -S . -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} \
  -DREMAT_SANITIZE=${REMAT_SANITIZE:-OFF} \
  -DREMAT_WERROR=${REMAT_WERROR:-ON} >/dev/null
cmake --build "$build_dir" -j "$jobs"
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"
