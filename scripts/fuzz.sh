#!/usr/bin/env bash
# Builds remat's libFuzzer targets with ASan and UBSan (clang-14 and
# libFuzzer: Debian's clang-14 and libclang-rt-14-dev, which scripts/setup.sh
# installs) and runs one of them.
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
# TARGET: rir, onnx, bert-config, tensor-proto, pipeline, external-data or
# onnx-functions. The corpus
# lives in build-asan/corpus/TARGET (seeded from the tests on first use);
# crashes are written to build-asan/crashes/TARGET. Exit status: libFuzzer's
# (nonzero on a finding). The build needs clang-14 and libclang-rt-14-dev.
# libFuzzer's -timeout (20 s here) is wall-clock: a long run under `nice -n 19`
# on a busy machine should pass -timeout=300, or a starved input of a few
# milliseconds is reported as a timeout.
set -euo pipefail
cd "$(dirname "$0")/.."

targets="rir onnx bert-config tensor-proto pipeline external-data onnx-functions"
if [ $# -lt 2 ] || ! [[ " $targets " == *" $1 "* ]] || ! [[ $2 =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]" >&2
  echo "  TARGET: $targets" >&2
  exit 2
fi
target=$1 seconds=$2
shift 2
build_dir=${BUILD_DIR:-build-asan}
cxx=${FUZZ_CXX:-clang++-14}
cc=${FUZZ_CC:-clang-14}
if ! command -v "$cxx" >/dev/null; then
  echo "error: $cxx not found: install clang-14 and libclang-rt-14-dev (scripts/setup.sh)" >&2
  exit 1
fi

# The fuzz targets live in the sanitizer build (scripts/sanitize.sh), which
# also builds and runs the test suite from the same compile.
if [ ! -f "$build_dir/build.ninja" ]; then
  scripts/sanitize.sh configure "$build_dir"
fi
# FUZZ_NO_BUILD=1 runs what is built (while another build runs there).
if [ "${FUZZ_NO_BUILD:-0}" != 1 ]; then
  cmake --build "$build_dir" --target "remat-fuzz-$target" -j "${JOBS:-$(nproc)}"
fi

# FUZZ_WORK_DIR (default: the build dir) holds corpus/ and crashes/.
work=${FUZZ_WORK_DIR:-$build_dir}
corpus="$work/corpus/$target"
crashes="$work/crashes/$target"
mkdir -p "$corpus" "$crashes"
seed() { # seed FILE...: copy into the corpus under content-hash names
  for f in "$@"; do
    [ -f "$f" ] && cp "$f" "$corpus/seed-$(sha1sum "$f" | cut -c1-16)"
  done
  return 0
}
if [ -z "$(ls -A "$corpus")" ]; then
  case $target in
    rir) seed tests/ir/*.rir tests/tools/Inputs/*.rir tests/onnx/Inputs/*.rir \
           tests/tools/Inputs/hostile/*.rir fuzz/regressions/rir/* ;;
    onnx)
      # Small models: the .rir test inputs exported by a remat-opt (the
      # fixtures are ~500 KB, too large to mutate quickly).
      opt=${REMAT_OPT:-build/remat-opt}
      if [ -x "$opt" ]; then
        for r in tests/onnx/Inputs/*.rir tests/tools/Inputs/*.rir; do
          "$opt" "$r" -o "$corpus/seed-$(basename "$r" .rir).onnx" 2>/dev/null || true
        done
      fi
      seed tests/tools/Inputs/hostile/*.onnx fuzz/regressions/onnx/* ;;
    bert-config) seed models/*.json tests/tools/Inputs/*.json \
                   fuzz/regressions/bert-config/* ;;
    tensor-proto) seed tests/fixtures/*/inputs/*.pb tests/tools/Inputs/hostile/*.pb \
                    fuzz/regressions/tensor-proto/* ;;
    pipeline)
      i=0
      for p in canonicalize,autodiff,dce 'remat{budget=40%}' \
               'canonicalize,autodiff,dce,schedule,remat{budget=6GiB strategy=auto},plan-memory' \
               'fold-constants{max-elements=64}' 'cse,dce,plan-memory{in-place=false}' \
               'autodiff{unused-weights=drop},remat{strategy=sqrt}'; do
        printf '%s' "$p" > "$corpus/seed-$i"; i=$((i + 1))
      done
      seed fuzz/regressions/pipeline/* ;;
    external-data)
      # One tensor a line: a shape byte, then a location in the fixture
      # (fuzz/FuzzExternalData.cpp).
      i=0
      for l in 'a.bin' 'in.bin' 'sub/up.bin' 'sub/up/a.bin' 'subdir/b.bin' \
               'out.bin' 'outdir/secret.bin' 'abs.bin' 'sub/absdir/secret.bin' \
               'rootdir/etc/passwd' 'outdir/back/a.bin' 'dangling.bin' 'loop.bin'; do
        printf '\001%s\n\052%s' "$l" "$l" > "$corpus/seed-$i"; i=$((i + 1))
      done
      seed fuzz/regressions/external-data/* ;;
    onnx-functions)
      # Flags, the main chain's length and ops, then each function's kind
      # and body (fuzz/FuzzOnnxFunctions.cpp): functions named Relu in the
      # default domain (the operator is called) and in domain d; four
      # levels of four calls, nodes all named "call", ending in a
      # default-domain function; a function that calls itself; a function
      # defined twice.
      printf '\001\002\004\014\001\001\001\002\002' > "$corpus/seed-0"
      printf '\013\000\004\014\014\014\014\014\014\024\024\024\024\014\034\034\034\034\003\003' > "$corpus/seed-1"
      printf '\000\000\004\004\001\004' > "$corpus/seed-2"
      printf '\021\001\004\003\002\001\002\002' > "$corpus/seed-3"
      seed fuzz/regressions/onnx-functions/* ;;
  esac
fi

# Findings abort with a stack; leaks are findings too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
exec "$build_dir/fuzz/remat-fuzz-$target" "$corpus" \
  -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
  -artifact_prefix="$crashes/" -print_final_stats=1 "$@"
