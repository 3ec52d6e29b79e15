#!/usr/bin/env bash
# The sanitizer build: one clang-14 tree (build-asan) with ASan and UBSan
# that builds both the test suite and the libFuzzer targets from one compile
# of the libraries (-fsanitize=fuzzer-no-link everywhere, libFuzzer's main in
# the fuzz/ executables only). CUDA is off there (nvcc does not take clang's
# sanitizer flags; the CUDA tests run in the normal build).
#   scripts/sanitize.sh                 # configure, build, whole suite, fuzz smoke
#   scripts/sanitize.sh configure DIR   # configure only (scripts/fuzz.sh)
# Environment: BUILD_DIR (build-asan), FUZZ_SMOKE_SECONDS (30 per target; 0
# skips the smoke), REMAT_TEST_SEED_STRIDE (2, below). scripts/test.sh runs
# it when CI=true or REMAT_SANITIZE_PHASE=1.
set -euo pipefail
cd "$(dirname "$0")/.."

configure() { # configure DIR
  # -O1 -gline-tables-only: the usual sanitizer flags; about half the
  # compile time of -O2 -g, with file:line in every report. NDEBUG as in
  # the normal build. Warnings are errors in the GCC build only (clang does
  # not know some of its -Wno- flags).
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="${FUZZ_CC:-clang-14}" -DCMAKE_CXX_COMPILER="${FUZZ_CXX:-clang++-14}" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
    ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} \
    -DREMAT_SANITIZE=ON -DREMAT_FUZZ=ON -DREMAT_CUDA=OFF -DREMAT_WERROR=OFF \
    -DREMAT_BUILD_TESTS=ON >/dev/null
}

if [ "${1:-}" = configure ]; then
  configure "$2"
  exit 0
fi

build_dir=${BUILD_DIR:-build-asan}
jobs=$(nproc)
phase_start=$SECONDS
configure "$build_dir"
# SANITIZE_UNIT_TESTS=0 leaves out the doctest unit tests (their 25 files
# are about 40% of this build's compile time); the tools' lit tests, the ONNX
# conformance and export checks, the fuzz regressions and the smoke still
# run sanitized. SANITIZE_UNIT_SKIP (a ctest -E regex) leaves out the named
# entries only (none by default; CI runs them all).
unit=${SANITIZE_UNIT_TESTS:-1}
skip=${SANITIZE_UNIT_SKIP:-}
ctest_args=()
if [ "$unit" = 1 ]; then
  cmake --build "$build_dir" -j "$jobs"
  if [ -n "$skip" ]; then ctest_args=(-E "$skip"); fi
else
  # Everything a ctest entry other than unit.* runs: the tools, the example
  # pass plugins (lit), libremat.so's doctest (api.library), the ONNX
  # checks and the fuzz targets.
  cmake --build "$build_dir" -j "$jobs" --target remat-opt remat-run remat-sweep \
    remat-example-plugin remat-example-plugin-other-version remat-api-tests \
    remat-conformance remat-export-test-models remat-fuzz-rir remat-fuzz-onnx \
    remat-fuzz-bert-config remat-fuzz-tensor-proto remat-fuzz-pipeline \
    remat-fuzz-external-data remat-fuzz-onnx-functions
  ctest_args=(-E '^unit[.]')
fi
build_seconds=$((SECONDS - phase_start))

# Reports abort the process, so a finding fails its test; leaks are findings.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export REMAT_REQUIRE_REFERENCE=${REMAT_REQUIRE_REFERENCE:-1}
# RematTest's two sweeps over the random graphs run every second seed here
# (100 of 200, 20 of 40): run whole, they take over half of this phase's
# ctest CPU time on 2 cores. The normal build runs every seed.
export REMAT_TEST_SEED_STRIDE=${REMAT_TEST_SEED_STRIDE:-2}
status=0
phase_start=$SECONDS
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "${ctest_args[@]}" || status=1
test_seconds=$((SECONDS - phase_start))

# Each fuzz target for a short smoke from its seed corpus, nproc at a time.
smoke=${FUZZ_SMOKE_SECONDS:-30}
targets="rir onnx bert-config tensor-proto pipeline external-data onnx-functions"
fuzz_summary=()
phase_start=$SECONDS
if [ "$smoke" -gt 0 ]; then
  # Its own corpora, from the seeds every time (build-asan/corpus is for
  # long runs of scripts/fuzz.sh).
  logs="$build_dir/fuzz-smoke"
  rm -rf "$logs" && mkdir -p "$logs"
  # The onnx target's seeds are the .rir test inputs exported by a remat-opt
  # (the normal build's when there is one: faster).
  opt=build/remat-opt
  [ -x "$opt" ] || opt=$build_dir/remat-opt
  export BUILD_DIR=$build_dir FUZZ_WORK_DIR=$logs FUZZ_NO_BUILD=1 REMAT_OPT=${REMAT_OPT:-$opt}
  printf '%s\n' $targets | xargs -P "$jobs" -I{} sh -c \
    'scripts/fuzz.sh {} '"$smoke"' >'"$logs"'/{}.log 2>&1; echo $? >'"$logs"'/{}.rc'
  for t in $targets; do
    rc=$(cat "$logs/$t.rc")
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t.log" | tail -1)
    if [ "$rc" = 0 ]; then
      fuzz_summary+=("fuzz.$t: ${runs:-?} runs in ${smoke} s, no finding")
    else
      fuzz_summary+=("fuzz.$t: FAILED (exit $rc; $logs/$t.log)")
      tail -40 "$logs/$t.log"
      status=1
    fi
  done
fi
fuzz_seconds=$((SECONDS - phase_start))

echo "Sanitized (clang-14, ASan+UBSan, $build_dir): build ${build_seconds} s, tests ${test_seconds} s, fuzz smoke ${fuzz_seconds} s"
log="$build_dir/Testing/Temporary/LastTest.log"
if [ -f "$log" ]; then
  lit_counts=$(awk '/^Testing Time:/ {on = 1; next} on && /^  [A-Za-z ]+: *[0-9]+$/ {gsub(/^ +| +$/, ""); printf "%s%s", sep, $0; sep = ", "} /<end of output>/ {on = 0}' "$log" || true)
  unsupported=$(awk '/^Unsupported Tests \(/ {on = 1; next} on && /^  / {print substr($0, 3); next} {on = 0}' "$log" || true)
  echo "  lit tests run sanitized: ${lit_counts:-?}; not run under sanitizers:" \
    "$(printf '%s\n' "$unsupported" | grep -c . || true)"
  [ -n "$unsupported" ] && printf '%s\n' "$unsupported" | sed 's/^/    /'
fi
# After reading the log: `ctest -N` rewrites LastTest.log.
ran=$(ctest --test-dir "$build_dir" -N "${ctest_args[@]}" | sed -n 's/^ *Test *#[0-9]*: //p' | tr '\n' ' ')
echo "  ctest entries run sanitized: $ran"
[ "$unit" = 1 ] || echo "  unit tests: not built or run sanitized (SANITIZE_UNIT_TESTS=0)"
[ "$unit" = 1 ] && [ "$REMAT_TEST_SEED_STRIDE" != 1 ] &&
  echo "  RematTest's random graphs: seeds 1, $((1 + REMAT_TEST_SEED_STRIDE)), ... (REMAT_TEST_SEED_STRIDE=$REMAT_TEST_SEED_STRIDE)"
if [ "$unit" = 1 ] && [ -n "$skip" ]; then
  left=$(ctest --test-dir "$build_dir" -N -R "$skip" | sed -n 's/^ *Test *#[0-9]*: //p' | tr '\n' ' ')
  echo "  not run sanitized here (SANITIZE_UNIT_SKIP): ${left:-none}"
fi
for line in "${fuzz_summary[@]}"; do echo "  $line"; done
exit $status
