#!/usr/bin/env bash
# Sets up, configures, builds and runs every test; ends with ctest's summary.
# With CI=true (.ci/run) or REMAT_SANITIZE_PHASE=1 it then runs
# scripts/sanitize.sh: the clang-14 ASan+UBSan build, the whole suite in it
# and a 30 s smoke of each fuzz target (REMAT_SANITIZE_PHASE=0 skips it).
#   BUILD_DIR=build-asan REMAT_SANITIZE=ON scripts/test.sh   # ASan+UBSan build
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
build_dir=${BUILD_DIR:-build}
jobs=$(nproc)
cmake -S . -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} \
  -DREMAT_SANITIZE=${REMAT_SANITIZE:-OFF} \
  -DREMAT_BUILD_BENCHMARKS=ON \
  -DREMAT_WERROR=${REMAT_WERROR:-ON} >/dev/null
cmake --build "$build_dir" -j "$jobs"
build_seconds=$SECONDS
# The reference checks (onnx, onnxruntime) must run: a missing package
# fails lit and the ONNX tests instead of skipping them out of sight.
export REMAT_REQUIRE_REFERENCE=${REMAT_REQUIRE_REFERENCE:-1}
status=0
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" || status=$?
test_seconds=$((SECONDS - build_seconds))
# What did not run, visibly: lit's UNSUPPORTED tests (inside ctest's one
# `lit` entry, whose output ctest hides) and skipped ctest entries.
log="$build_dir/Testing/Temporary/LastTest.log"
if [ -f "$log" ]; then
  skipped=$( (awk '/^Unsupported Tests \(/ {on = 1; next} on && /^  / {print "lit: " substr($0, 3); next} {on = 0}' "$log"
              grep -E '^SKIPPED' "$log") || true)
  if [ -n "$skipped" ]; then
    echo "Skipped tests ($(printf '%s\n' "$skipped" | wc -l)):"
    printf '%s\n' "$skipped" | sed 's/^/  /'
  else
    echo "Skipped tests: none"
  fi
fi

phase=${REMAT_SANITIZE_PHASE:-$([ "${CI:-}" = true ] && echo 1 || echo 0)}
if [ "$phase" = 1 ]; then
  echo "Normal build ($build_dir): setup and build ${build_seconds} s, tests ${test_seconds} s," \
    "ctest $([ $status = 0 ] && echo passed || echo FAILED)"
  echo "Sanitizer phase (scripts/sanitize.sh):"
  # The whole suite, unit tests included (scripts/sanitize.sh).
  BUILD_DIR=build-asan SANITIZE_UNIT_TESTS=${SANITIZE_UNIT_TESTS:-1} \
    scripts/sanitize.sh || status=1
fi
exit $status
