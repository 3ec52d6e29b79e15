#!/usr/bin/env bash
# The measured memory/time curve of a BERT preset with PyTorch's points
# beside it (docs/benchmarks.md): PyTorch eager, per-layer checkpointing,
# selective checkpointing and torch.compile at several
# activation_memory_budget values (tools/bench/vs_pytorch.py), and remat's
# points (remat-sweep --measure), every point in its own process.
#
#   tools/bench/sweep_vs_pytorch.sh OUT_DIR [MODEL] [BIND] [BUDGETS]
#
# remat's two rounds (alternating order, after a warm-up run) come first,
# then PyTorch's rounds (alternating order); each point keeps its fastest
# round. Then the curve is drawn again with PyTorch's points beside remat's
# (remat-sweep --from-json), so that a PyTorch side cut short still leaves
# remat's curve.
#
# Needs build/remat-sweep and build/remat-run (REMAT_BIN names another
# folder holding both) and torch in .venv (scripts/setup.sh; PEERS_PYTHON
# names another Python). THREADS, STEPS, PYTORCH_STEPS, PYTORCH_ROUNDS,
# STRATEGIES and MODES override
# the defaults (2; 3 steps a remat-run, whose median leaves out the first,
# cold step; 2 timed steps after PyTorch's untimed warm-up step, so each
# process runs 3; eager,checkpoint,selective,compile-1.0,compile-0.5,
# compile-0.0); COMPILE_BACKEND is torch.compile's backend
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
budgets=${4:-60%,40%,min}
threads=${THREADS:-2}
steps=${STEPS:-3}
pytorch_steps=${PYTORCH_STEPS:-2}
pytorch_rounds=${PYTORCH_ROUNDS:-2}
modes=${MODES:-eager,checkpoint,selective,compile-1.0,compile-0.5,compile-0.0}
backend=${COMPILE_BACKEND:-aot_eager}
python=${PEERS_PYTHON:-.venv/bin/python}
bin=${REMAT_BIN:-build}
batch=$(echo "$bind" | sed -n 's/.*batch=\([0-9]*\).*/\1/p')
seq=$(echo "$bind" | sed -n 's/.*seq=\([0-9]*\).*/\1/p')
mkdir -p "$out"

strategies=${STRATEGIES:-none,every-layer,sqrt,chain-dp,selective,auto}

echo "== remat, two rounds ($(date +%T))"
"$bin/remat-sweep" "$model" --bind "$bind" --strategies "$strategies" \
  --budgets "$budgets" --measure --threads "$threads" --steps "$steps" \
  --rounds 2 --csv "$out/sweep.csv" --json "$out/sweep.json" \
  2> >(tee "$out/sweep.err" >&2) | tee "$out/sweep-measured.txt"
echo "== PyTorch, $pytorch_rounds rounds ($(date +%T))"
"$python" tools/bench/vs_pytorch.py --config "$model" --batch "$batch" \
  --seq "$seq" --threads "$threads" --steps "$pytorch_steps" \
  --rounds "$pytorch_rounds" --modes "$modes" --compile-backend "$backend" \
  --csv "$out/peers.csv" --json "$out/peers.json" \
  2> >(tee "$out/peers.err" >&2) | tee "$out/peers.md"
echo "== the curve with PyTorch's points ($(date +%T))"
"$bin/remat-sweep" --from-json "$out/sweep.json" --peers "$out/peers.csv" \
  --csv "$out/final.csv" --svg "$out/sweep.svg" | tee "$out/sweep.txt"
