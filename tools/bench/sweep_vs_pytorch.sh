#!/usr/bin/env bash
# The measured memory/time curve of a BERT preset with PyTorch's points
# beside it (docs/benchmarks.md): PyTorch eager, per-layer checkpointing,
# selective checkpointing and torch.compile at several
# activation_memory_budget values (tools/bench/vs_pytorch.py), and remat's
# points (remat-sweep --measure), every point in its own process.
#
#   tools/bench/sweep_vs_pytorch.sh OUT_DIR [MODEL] [BIND] [BUDGETS]
#
# The sides alternate: one PyTorch round, remat's two rounds (alternating
# order, after a warm-up run), a second PyTorch round in the reverse order;
# each point keeps its fastest round. Then the curve is drawn again with
# PyTorch's best rounds (remat-sweep --from-json).
#
# Needs build/remat-sweep and build/remat-run (REMAT_BIN names another
# folder holding both) and torch in .venv (scripts/setup.sh; PEERS_PYTHON
# names another Python). THREADS, STEPS and MODES override the defaults
# (2, 3, and eager,checkpoint,selective,compile-1.0,compile-0.6,
# compile-0.3,compile-0.0); COMPILE_BACKEND is torch.compile's backend
# (aot_eager: the min-cut partitioner that activation_memory_budget steers,
# no code generation; inductor compiles C++ for minutes per budget).
# PyTorch's OpenMP threads wait passively (OMP_WAIT_POLICY=PASSIVE unless
# set): on a machine shared with other work, spinning threads that lose
# their core stall every parallel region (bert-tiny's eager step took 2.4 s
# at 2 spinning threads under load 18, 0.5 s passive, 0.4 s on one thread).
set -euo pipefail
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
cd "$(dirname "$0")/../.."

out=${1:?usage: sweep_vs_pytorch.sh OUT_DIR [MODEL] [BIND] [BUDGETS]}
model=${2:-models/bert-base.json}
bind=${3:-batch=4,seq=512}
budgets=${4:-80%,60%,50%,40%,min}
threads=${THREADS:-2}
steps=${STEPS:-3}
modes=${MODES:-eager,checkpoint,selective,compile-1.0,compile-0.6,compile-0.3,compile-0.0}
backend=${COMPILE_BACKEND:-aot_eager}
python=${PEERS_PYTHON:-.venv/bin/python}
bin=${REMAT_BIN:-build}
batch=$(echo "$bind" | sed -n 's/.*batch=\([0-9]*\).*/\1/p')
seq=$(echo "$bind" | sed -n 's/.*seq=\([0-9]*\).*/\1/p')
mkdir -p "$out"

pytorch_round() { # N [--reverse]
  "$python" tools/bench/vs_pytorch.py --config "$model" --batch "$batch" \
    --seq "$seq" --threads "$threads" --steps "$steps" --rounds 1 \
    --modes "$modes" --compile-backend "$backend" ${2:-} \
    --csv "$out/peers-$1.csv" --json "$out/peers-$1.json" \
    2> >(tee "$out/peers-$1.err" >&2) | tee "$out/peers-$1.md"
}

echo "== PyTorch, round 1 ($(date +%T))"
pytorch_round 1
echo "== remat, two rounds ($(date +%T))"
"$bin/remat-sweep" "$model" --bind "$bind" --budgets "$budgets" --measure \
  --threads "$threads" --steps "$steps" --rounds 2 \
  --peers "$out/peers-1.csv" --csv "$out/sweep.csv" --json "$out/sweep.json" \
  --svg "$out/sweep-round1-peers.svg" 2> >(tee "$out/sweep.err" >&2) |
  tee "$out/sweep-measured.txt"
echo "== PyTorch, round 2, reverse order ($(date +%T))"
pytorch_round 2 --reverse
"$python" tools/bench/vs_pytorch.py --best-of "$out/peers-1.csv" \
  "$out/peers-2.csv" --csv "$out/peers.csv"
echo "== the curve with PyTorch's best rounds ($(date +%T))"
build/remat-sweep --from-json "$out/sweep.json" --peers "$out/peers.csv" \
  --csv "$out/final.csv" --svg "$out/sweep.svg" | tee "$out/sweep.txt"
