#!/usr/bin/env bash
# The GPU check of the CUDA backend (issue 12). Runs on the GPU machine from
# the bundle scripts/gpu-bundle.sh makes (or from a checkout with a build,
# REMAT_BIN=build), in under 8 minutes, and writes everything to a log
# (default gpu-check.log next to this script; GPU_CHECK_LOG overrides):
#   (a) every CUDA kernel against the CPU backend on the same inputs
#   (b) bert-tiny and every fixture: loss and gradients against the CPU
#   (c) a remat'ed step on the GPU gives the same bits as the un-remat'ed one
#   (d) device memory in use against the plan
#   (e) bert-base and bert-large, seq 512, batch 8: one training step per
#       remat strategy (time, device memory), and PyTorch eager
#       BertForMaskedLM with and without gradient_checkpointing_enable(),
#       eager attention and PyTorch's fused (sdpa)
#   (f) bert-large's step without remat, each node timed alone: the 15
#       slowest ops (remat-run --profile; the JSON beside the log)
# GPU_CHECK_PARTS=bf, say, runs only those parts (default: all);
# GPU_CHECK_MODELS=bert-large, say, the models of (e) (default: bert-large
# bert-base).
# Without a GPU it stops after the library check with a message and exit 2.
# GPU_CHECK_DRY_RUN=1 runs every step on the CPU backend at bert-tiny's size
# instead (to check this script and the bundle on a machine without a GPU).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
log=${GPU_CHECK_LOG:-$here/gpu-check.log}
bin=${REMAT_BIN:-$here/bin}
if [ -x "$bin/remat-run" ]; then :; else
  echo "gpu-check: no remat-run in $bin (run from the bundle, or set REMAT_BIN)" >&2
  exit 1
fi
# The Python with torch and transformers (PYTHON overrides).
py=${PYTHON:-python3}
tests=$here/tests
[ -d "$tests" ] || tests=$here/../tests
models=$here/models
[ -d "$models" ] || models=$here/../models
: >"$log"
say() { echo "$@" | tee -a "$log"; }
# run SECONDS CMD...: runs with a time limit, output to the log and screen.
run() {
  local limit=$1; shift
  say "\$ $*"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 124 ] && say "gpu-check: timed out after $limit s"
  return "$rc"
}
# GPU_CHECK_PARTS picks the parts to run (default all: abcdef).
parts=${GPU_CHECK_PARTS:-abcdef}
part() { [[ "$parts" == *"$1"* ]]; }
backend=cuda big_models=${GPU_CHECK_MODELS:-bert-large bert-base} big_bind=batch=8,seq=512
torch_args=(--batch 8 --seq 512) mid_model=bert-base
if [ "${GPU_CHECK_DRY_RUN:-0}" = 1 ]; then
  backend=cpu big_models=bert-tiny big_bind=batch=2,seq=16 mid_model=bert-tiny
  torch_args=(--batch 2 --seq 16 --steps 1 --device cpu)
fi
start=$(date +%s)
say "gpu-check: $(date -u) on $(hostname); bundle commit $(cat "$here/COMMIT" 2>/dev/null || echo '?')"

# CUDA libraries: cuBLAS and cuBLASLt 13 from the toolkit or PyTorch's wheels.
dirs=()
for d in ${CUDA_HOME:-} /usr/local/cuda /usr/local/cuda-13* /usr/local/cuda-13; do
  [ -n "$d" ] && for sub in lib64 lib targets/x86_64-linux/lib; do
    [ -d "$d/$sub" ] && dirs+=("$d/$sub")
  done
done
if command -v "$py" >/dev/null; then
  while read -r d; do [ -n "$d" ] && dirs+=("$d"); done < <("$py" - <<'PY' 2>/dev/null
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
for root in roots:
    for pattern in ("nvidia/*/lib", "nvidia/cu13/lib", "torch/lib"):
        for d in glob.glob(os.path.join(root, pattern)):
            print(d)
PY
)
fi
cuda_libs=""
for lib in libcublas.so.13 libcublasLt.so.13; do
  for d in "${dirs[@]}"; do
    if [ -e "$d/$lib" ]; then
      case ":$cuda_libs:" in *":$d:"*) ;; *) cuda_libs=${cuda_libs:+$cuda_libs:}$d ;; esac
      break
    fi
  done
done
# remat opens libcublas.so.13 with dlopen (it is not linked): it must be on
# REMAT_CUDA_LIBS or the loader's cache.
case ":$cuda_libs:" in
  *) found=no
     for d in ${cuda_libs//:/ }; do [ -e "$d/libcublas.so.13" ] && found=yes; done
     ldconfig -p 2>/dev/null | grep -q "libcublas.so.13 " && found=yes
     if [ $found = no ]; then
       echo "gpu-check: error: libcublas.so.13 not found (looked in ${dirs[*]:-no CUDA directory} and ldconfig's cache); set CUDA_HOME or PYTHON" | tee -a "$log"
       exit 1
     fi ;;
esac
export REMAT_CUDA_LIBS=$cuda_libs
say "gpu-check: CUDA libraries from: ${cuda_libs:-(none found)}"
if [ -d "$here/libexec" ]; then
  "$here/unpack-libs.sh" || exit 1
  missing=$(LD_LIBRARY_PATH="$here/lib${cuda_libs:+:$cuda_libs}" ldd "$here/libexec/remat-run" | grep "not found")
  if [ -n "$missing" ]; then
    say "gpu-check: error: libraries not found (looked in the bundle's lib/ and ${dirs[*]:-no CUDA directory}):"
    say "$missing"
    exit 1
  fi
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$log" 2>&1 ||
  say "gpu-check: nvidia-smi is not available"

# No GPU: the tests say so; stop here.
probe=$("$bin/remat-cuda-tests" 2>&1)
if [ $? -eq 77 ] && [ "$backend" = cuda ]; then
  say "$probe"
  say "gpu-check: no GPU or driver on this machine: stopping before the GPU checks"
  exit 2
fi

if part a; then
say ""; say "== (a) every CUDA kernel against the CPU backend"
# A model the CPU cannot run fails (no reference): leave out the f16
# arithmetic the CPU lacks.
kernel_inputs=()
for f in "$tests"/onnx/Inputs/*.rir; do
  case "$f" in *gelu_tanh_f64_f16.rir) ;; *) kernel_inputs+=("$f") ;; esac
done
run 120 "$bin/remat-cuda-tests" --backend $backend "${kernel_inputs[@]}" \
  "$tests/tools/Inputs/remat-mlp.rir" "$tests/tools/Inputs/preln.rir"
fi

if part b; then
say ""; say "== (b) bert-tiny and the fixtures: loss and gradients against the CPU"
train="canonicalize,autodiff,dce,schedule,plan-memory"
run 90 "$bin/remat-cuda-tests" --backend $backend --rtol 1e-4 --bind batch=2,seq=16 --pipeline "$train" \
  "$models/bert-tiny.json"
for fixture in "$tests"/fixtures/*/; do
  # The fixture's dims that its model's inputs declare (ViT has no seq),
  # all of them where onnx is missing.
  bind=$("$py" - "$fixture" 2>/dev/null <<'PY'
import json, sys
dims = json.load(open(sys.argv[1] + "/params.json"))["dims"]
try:
    import onnx
    model = onnx.load(sys.argv[1] + "/model.onnx", load_external_data=False)
    declared = {d.dim_param for i in model.graph.input
                for d in i.type.tensor_type.shape.dim}
    dims = {k: v for k, v in dims.items() if k in declared}
except ImportError:
    pass
print(",".join("%s=%s" % kv for kv in dims.items()))
PY
)
  run 60 "$bin/remat-cuda-tests" --backend $backend --rtol 1e-4 ${bind:+--bind "$bind"} --pipeline "$train" \
    "$fixture/model.onnx"
done
fi

if part c; then
say ""; say "== (c) remat'ed against un-remat'ed on the GPU, bitwise"
for strategy in every-layer sqrt "auto --budget 95%" "selective --budget 95%"; do
  run 90 "$bin/remat-run" "$models/bert-tiny.json" --bind batch=4,seq=64 \
    --strategy $strategy --check-equivalence --backend $backend
done
run 120 "$bin/remat-run" "$models/$mid_model.json" --bind batch=2,seq=128 \
  --strategy every-layer --check-equivalence --backend $backend
fi

if part d; then
say ""; say "== (d) device memory against the plan"
run 120 "$bin/remat-run" "$models/$mid_model.json" --bind batch=8,seq=128 \
  --plan-memory --steps 2 --backend $backend
fi

if part e; then
say ""; say "== (e) bert-base and bert-large, seq 512, batch 8, one step per strategy"
# Per model (bert-large first: the goals are about it): one run per
# strategy, then PyTorch eager with and without per-layer checkpointing.
# auto also runs at every-layer's planned peak ("auto at every-layer's
# memory"); selective and auto at 60% of no remat's peak.
for model in $big_models; do
  every_layer_peak=""
  for strategy in none every-layer "auto --budget EVERY_LAYER" "auto --budget 60%" \
      "selective --budget 60%" sqrt; do
    elapsed=$(( $(date +%s) - start ))
    if [ "$elapsed" -gt 400 ]; then
      say "gpu-check: skipping $model --strategy $strategy: $elapsed s used of the 8 minutes"
      continue
    fi
    if [[ "$strategy" == *EVERY_LAYER* ]]; then
      [ -n "$every_layer_peak" ] || { say "gpu-check: no every-layer peak for $model"; continue; }
      strategy=${strategy/EVERY_LAYER/${every_layer_peak}MiB}
    fi
    out=$(run 90 "$bin/remat-run" "$models/$model.json" --bind "$big_bind" \
      --strategy $strategy --steps 3 --backend $backend)
    echo "$out"
    if [ "$strategy" = every-layer ]; then
      every_layer_peak=$(echo "$out" | sed -n 's/.*planned peak \([0-9]*\)[.0-9]* MiB.*/\1/p' | head -1)
      [ -n "$every_layer_peak" ] && every_layer_peak=$((every_layer_peak + 1))
    fi
  done
  # Eager attention computes what remat does; sdpa is PyTorch's fused
  # attention (no seq x seq probabilities kept), for reference.
  for attention in eager sdpa; do
    for ckpt in "" --checkpointing; do
      elapsed=$(( $(date +%s) - start ))
      if [ "$elapsed" -gt 440 ]; then
        say "gpu-check: skipping PyTorch $model $attention $ckpt: $elapsed s used"
        continue
      fi
      run 60 "$py" "$here/gpu_torch_bench.py" "$models/$model.json" \
        "${torch_args[@]}" --attention $attention $ckpt
    done
  done
done
fi

if part f; then
say ""; say "== (f) where bert-large's step spends its time (no remat, per node)"
# Every node timed alone (the stream synchronized around it): the 15
# slowest ops and the fitted GEMM rate and bandwidth.
run 120 "$bin/remat-run" "$models/${big_models%% *}.json" --bind "$big_bind" \
  --strategy none --steps 2 --backend $backend --profile "${log%.log}-profile.json"
fi

say ""; say "gpu-check: done in $(( $(date +%s) - start )) s; log: $log"
