#!/usr/bin/env bash
# The main job on the built-in default: build the BERT-mini preset's training
# step (forward, MLM loss, backward), let remat choose under a budget (80% of
# the planned peak without remat) which activations to keep and which to
# recompute, plan every tensor into one arena, and run three CPU steps in it;
# then the same step without remat and with the seed's per-layer
# checkpointing, and a table of planned and measured memory and step time.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target remat-opt remat-run
mkdir -p "$build_dir/demo"
model=models/bert-mini.json
bind=batch=8,seq=128

# What remat decides and why (the per-tensor list is in the JSON report).
"$build_dir/remat-opt" "$model" --bind "$bind" --budget 80% --explain \
  --report "$build_dir/demo/remat.json" -o "$build_dir/demo/bert-mini.remat.onnx" \
  2>&1 | grep -v '^    %'

run() { # label, flags...
  local label=$1; shift
  echo "== $label" >&2
  "$build_dir/remat-run" "$model" --bind "$bind" --steps 3 "$@" \
    | tee "$build_dir/demo/$label.log" >&2
}
run none --strategy none
run every-layer --strategy every-layer
run auto-80 --budget 80%

echo
printf '%-12s %16s %16s %14s %8s\n' strategy "planned peak" "max RSS" "median step" "x none"
base=$(sed -n 's/^median step time: \([0-9.]*\) ms.*/\1/p' "$build_dir/demo/none.log")
for label in none every-layer auto-80; do
  log="$build_dir/demo/$label.log"
  planned=$(sed -n 's/.*planned peak \([0-9.]* [MKGi]*B\).*/\1/p' "$log" | tail -1)
  rss=$(sed -n 's/.*max RSS \([0-9.]*\) MiB.*/\1 MiB/p' "$log" | tail -1)
  step=$(sed -n 's/^median step time: \([0-9.]*\) ms.*/\1/p' "$log")
  printf '%-12s %16s %16s %11s ms %8.3f\n' "$label" "$planned" "$rss" "$step" \
    "$(awk -v a="$step" -v b="$base" 'BEGIN { print a / b }')"
done
