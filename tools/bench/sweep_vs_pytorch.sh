#!/usr/bin/env bash
# The measured memory/time curve of a BERT preset with PyTorch's points
# beside it (docs/benchmarks.md): first PyTorch eager, checkpointed,
# selective and torch.compile at several activation_memory_budget values
# (tools/bench/vs_pytorch.py, each point in its own process), then
# remat-sweep --measure with those points as --peers.
#
#   tools/bench/sweep_vs_pytorch.sh OUT_DIR [MODEL] [BIND] [BUDGETS]
#
# Needs build/remat-sweep and build/remat-run, and torch + transformers in
# .venv-peers (python3 -m venv .venv-peers && .venv-peers/bin/pip install
# torch transformers). THREADS, STEPS, ROUNDS and COMPILE_ROUNDS override the
# defaults (2, 3, 2, 1); COMPILE=0 skips torch.compile (minutes per point).
set -euo pipefail
cd "$(dirname "$0")/../.."

out=${1:?usage: sweep_vs_pytorch.sh OUT_DIR [MODEL] [BIND] [BUDGETS]}
model=${2:-models/bert-base.json}
bind=${3:-batch=1,seq=512}
budgets=${4:-100%,96%,92%,88%,min}
threads=${THREADS:-2}
steps=${STEPS:-3}
rounds=${ROUNDS:-2}
python=${PEERS_PYTHON:-.venv-peers/bin/python}
batch=$(echo "$bind" | sed -n 's/.*batch=\([0-9]*\).*/\1/p')
seq=$(echo "$bind" | sed -n 's/.*seq=\([0-9]*\).*/\1/p')
mkdir -p "$out"

"$python" tools/bench/vs_pytorch.py --config "$model" --batch "$batch" \
  --seq "$seq" --threads "$threads" --steps "$steps" --rounds "$rounds" \
  --modes eager,checkpoint,selective \
  --csv "$out/peers-eager.csv" --json "$out/peers-eager.json" | tee "$out/peers-eager.md"
cp "$out/peers-eager.csv" "$out/peers.csv"
if [ "${COMPILE:-1}" != 0 ]; then
  "$python" tools/bench/vs_pytorch.py --config "$model" --batch "$batch" \
    --seq "$seq" --threads "$threads" --steps "$steps" \
    --rounds "${COMPILE_ROUNDS:-1}" \
    --modes compile-1.0,compile-0.5,compile-0.2,compile-0.0 \
    --csv "$out/peers-compile.csv" --json "$out/peers-compile.json" | tee "$out/peers-compile.md"
  tail -n +2 "$out/peers-compile.csv" >> "$out/peers.csv"
fi
build/remat-sweep "$model" --bind "$bind" --budgets "$budgets" --measure \
  --threads "$threads" --steps "$steps" --rounds "$rounds" \
  --peers "$out/peers.csv" --csv "$out/sweep.csv" --json "$out/sweep.json" \
  --svg "$out/sweep.svg" | tee "$out/sweep.txt"
