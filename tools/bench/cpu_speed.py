#!/usr/bin/env python3
"""The CPU-speed goals of issue 16 in one invocation: remat-run next to
PyTorch eager and onnxruntime on bert-base, same thread count, every
measurement in a process of its own, rounds alternating the order, each
configuration keeping its best round.

  python3 tools/bench/cpu_speed.py [--build build] [--config models/bert-base.json]
      [--threads 2] [--steps 5] [--rounds 3] [--only train,forward,scaling]
      [--torch-python .venv/bin/python] [--ort-python .venv/bin/python]
      [--no-probe] [--json FILE]

Measures (the time of a step is the median of --steps steps after one
warm-up step, in every process; 5, the issue's protocol, which the first
41 runs in docs/benchmarks.md cut to 3 for time):
  train b1 s512 / b4 s128   remat-run training step (--plan-memory: the
                            planned arena, no remat) vs PyTorch eager
                            forward + loss + backward of BERT for masked LM
                            in plain PyTorch, built from the same config
                            (tools/bench/vs_pytorch.py --child eager)
  forward b1 s512           remat-run --forward vs onnxruntime, all graph
                            optimisations, on the model remat-opt exports;
                            remat with its disable-dropout pass, because
                            onnxruntime's inference session removes the
                            Dropout nodes (its optimised graph has none), so
                            both run the same computation (remat's forward
                            with dropout on is printed too, not compared),
                            and fold-transpose, which remat-run adds by
                            itself when no pipeline is given
  scaling b1 s512           remat-run training step at 1 thread / at N

and prints the ratios against the goals: train <= 0.8x eager, forward
<= 1.2x onnxruntime, scaling >= 1.8x. Every figure is printed with the
1-minute load average taken when its process started: on a shared machine
the figures are noisy, and a ratio is only as good as the loads of its two
sides. Between two measurements (and before the first, after the last),
build/remat-bench-cores probes the host: 4 rounds of an FMA loop on one
thread, then on N at once, 250 ms each (Note [The host's cores] in
tools/bench/CoresBench.cpp); each figure is printed with the median of the
probes before and after it ("cores"), about N x when the host gives the N
threads a core each, 1x when they get one core's throughput. The probes
describe the host: no figure is corrected by them (a figure's load
includes the 2 s probe just before it). A probe that fails is reported
and left out; --no-probe leaves them all out. Not a test: timings belong
in benchmarks.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

ORT_CHILD = r"""
import json, statistics, sys, time
import numpy as np, onnxruntime as ort
model, batch, seq, threads, steps = sys.argv[1], *map(int, sys.argv[2:6])
options = ort.SessionOptions()
options.intra_op_num_threads = threads
options.inter_op_num_threads = 1
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
names = {i.name for i in session.get_inputs()}
rng = np.random.default_rng(0)
feeds = {
    "input_ids": rng.integers(0, 30522, (batch, seq), dtype=np.int64),
    "token_type_ids": np.zeros((batch, seq), dtype=np.int64),
    "attention_mask": np.ones((batch, seq), dtype=np.int64),
    "labels": rng.integers(0, 30522, (batch, seq), dtype=np.int64),
}
feeds = {k: v for k, v in feeds.items() if k in names}
session.run(None, feeds)  # warm-up
times = []
for _ in range(steps):
    start = time.perf_counter()
    session.run(None, feeds)
    times.append(time.perf_counter() - start)
print(json.dumps({"median_seconds": statistics.median(times)}))
"""


def run_child(cmd, timeout):
    load = os.getloadavg()[0]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise RuntimeError(lines[-1] if lines else "exit %d" % proc.returncode)
    return proc, load


PROBE_ROUNDS = 4


def cores_tool(args):
    return Path(args.build) / "remat-bench-cores"


def probe_cores(args, threads, work):
    """The host's capacity for `threads` threads over one (remat-bench-cores):
    the median of its rounds, or None without the probe or when it failed
    (a diagnostic is not worth a run's measurements)."""
    if args.no_probe or threads < 2:
        return None
    out = Path(work) / "cores.json"
    try:
        run_child([str(cores_tool(args)), "--threads", str(threads), "--rounds",
                   str(PROBE_ROUNDS), "--ms", "250", "--json", str(out)],
                  args.timeout)
        with open(out) as f:
            return float(json.load(f)["median"])
    except (OSError, RuntimeError, ValueError, KeyError,
            subprocess.TimeoutExpired) as e:
        print("warning: the cores probe failed (%s); this figure has none" % e,
              file=sys.stderr, flush=True)
        return None


def remat_step(args, bind, threads, forward, work, pipeline=None):
    stats = Path(work) / "step.json"
    # One more step than timed: the first is the warm-up.
    # In the planned arena, as remat runs a step it optimised: one buffer
    # touched once, where the heap path maps and faults in every large
    # tensor again each step.
    cmd = [str(Path(args.build) / "remat-run"), args.config, "--bind", bind,
           "--threads", str(threads), "--steps", str(args.steps + 1),
           "--plan-memory", "--step-json", str(stats)]
    if forward:
        cmd.append("--forward")
    if pipeline:
        cmd += ["-p", pipeline]
    _, load = run_child(cmd, args.timeout)
    with open(stats) as f:
        steps = [s["seconds"] for s in json.load(f)["steps"]][1:]
    return statistics.median(steps), load


def torch_step(args, batch, seq, threads):
    cmd = [args.torch_python, str(HERE / "vs_pytorch.py"), "--child", "eager",
           "--config", args.config, "--batch", str(batch), "--seq", str(seq),
           "--threads", str(threads), "--steps", str(args.steps), "--seed", "0"]
    proc, load = run_child(cmd, args.timeout)
    return json.loads(proc.stdout.strip().splitlines()[-1])["median_seconds"], load


def ort_step(args, model, batch, seq, threads):
    cmd = [args.ort_python, "-c", ORT_CHILD, str(model), str(batch), str(seq),
           str(threads), str(args.steps)]
    proc, load = run_child(cmd, args.timeout)
    return json.loads(proc.stdout.strip().splitlines()[-1])["median_seconds"], load


def cores_text(before, after, prefix=", cores "):
    if before is None and after is None:
        return ""
    return "%s%s -> %s" % (prefix, *("-" if c is None else "%.2fx" % c
                                     for c in (before, after)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--config", default="models/bert-base.json")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="train,forward,scaling",
                        help="which goals to measure (comma-separated)")
    parser.add_argument("--torch-python", default=".venv/bin/python",
                        help="a Python with torch (scripts/setup.sh installs "
                             "it into .venv)")
    parser.add_argument("--ort-python", default=".venv/bin/python")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--json", help="write every measurement here")
    parser.add_argument("--no-probe", action="store_true",
                        help="do not probe the host's cores between measurements")
    args = parser.parse_args()
    only = set(args.only.split(","))
    n = args.threads
    goals = {"train", "forward", "scaling"}
    if min(args.threads, args.steps, args.rounds) < 1 or not only <= goals:
        # Nothing measured would print an empty table (or fail on it).
        print("error: --threads, --steps and --rounds must be at least 1, "
              "and --only a list of train, forward, scaling", file=sys.stderr)
        return 1
    if not args.no_probe and n >= 2 and not cores_tool(args).exists():
        print("error: %s not found: build it (scripts/test.sh builds every "
              "tool) or pass --no-probe" % cores_tool(args), file=sys.stderr)
        return 1

    with tempfile.TemporaryDirectory() as work:
        # (label, function) pairs; a goal compares two labels.
        configs = []
        if "train" in only:
            for batch, seq in [(1, 512), (4, 128)]:
                bind = "batch=%d,seq=%d" % (batch, seq)
                configs.append(("remat train %s %dt" % (bind, n),
                                lambda b=bind: remat_step(args, b, n, False, work)))
                configs.append(("torch eager train %s %dt" % (bind, n),
                                lambda b=batch, s=seq: torch_step(args, b, s, n)))
        if "forward" in only:
            model = Path(work) / "model.onnx"
            subprocess.run([str(Path(args.build) / "remat-opt"), args.config,
                            "--bind", "batch=1,seq=512", "-o", str(model)],
                           check=True, capture_output=True)
            configs.append(("remat forward batch=1,seq=512 %dt" % n,
                            lambda: remat_step(args, "batch=1,seq=512", n, True, work,
                                               "disable-dropout,dce,fold-transpose")))
            configs.append(("remat forward, dropout on, batch=1,seq=512 %dt" % n,
                            lambda: remat_step(args, "batch=1,seq=512", n, True, work)))
            configs.append(("onnxruntime forward batch=1,seq=512 %dt" % n,
                            lambda: ort_step(args, model, 1, 512, n)))
        if "scaling" in only and n != 1:
            if not any(label == "remat train batch=1,seq=512 %dt" % n
                       for label, _ in configs):
                configs.append(("remat train batch=1,seq=512 %dt" % n,
                                lambda: remat_step(args, "batch=1,seq=512", n, False, work)))
            configs.append(("remat train batch=1,seq=512 1t",
                            lambda: remat_step(args, "batch=1,seq=512", 1, False, work)))

        best, measurements = {}, []
        cores = probe_cores(args, n, work)
        probes = [cores]
        for r in range(args.rounds):
            order = configs if r % 2 == 0 else list(reversed(configs))
            for label, fn in order:
                seconds, load = fn()
                before, cores = cores, probe_cores(args, n, work)
                probes.append(cores)
                measurements.append({"round": r, "label": label,
                                     "seconds": seconds, "load": load,
                                     "cores_before": before, "cores_after": cores})
                print("round %d  %-44s %8.3f s  (load %.2f%s)" % (
                    r, label, seconds, load, cores_text(before, cores)),
                    file=sys.stderr, flush=True)
                if label not in best or seconds < best[label][0]:
                    best[label] = (seconds, load, before, cores)

    print("\n%s, %d threads, best of %d rounds of the median of %d steps; "
          "load = 1-min load average when that best run started (%d CPUs). "
          "Noisy: the machine is shared." % (args.config, n, args.rounds, args.steps,
                                             os.cpu_count()))
    print("| configuration | step | load | cores |")
    print("|---|---|---|---|")
    for label, _ in configs:
        seconds, load, before, after = best[label]
        print("| %s | %.3f s | %.2f | %s |" % (label, seconds, load,
                                               cores_text(before, after, "") or "-"))
    probed = [p for p in probes if p is not None]
    if probed:
        print("\ncores: the host's capacity for %d threads over one "
              "(remat-bench-cores, median of %d rounds), probed before and after "
              "that run; over the run's %d probes: min %.2fx, median %.2fx; "
              "%d under %.2fx." % (n, PROBE_ROUNDS, len(probed), min(probed),
                                  statistics.median(probed),
                                  sum(p < 0.9 * n for p in probed), 0.9 * n))
    print("\n| goal | ratio | target | met |")
    print("|---|---|---|---|")

    def ratio(goal, num, den, target, at_most):
        if num in best and den in best:
            value = best[num][0] / best[den][0]
            met = value <= target if at_most else value >= target
            print("| %s | %.2fx | %s %.1fx | %s |" % (
                goal, value, "<=" if at_most else ">=", target, "yes" if met else "no"))

    for bind in ["batch=1,seq=512", "batch=4,seq=128"]:
        ratio("train %s: remat / torch eager" % bind, "remat train %s %dt" % (bind, n),
              "torch eager train %s %dt" % (bind, n), 0.8, True)
    ratio("forward batch=1,seq=512: remat / onnxruntime",
          "remat forward batch=1,seq=512 %dt" % n,
          "onnxruntime forward batch=1,seq=512 %dt" % n, 1.2, True)
    ratio("train batch=1,seq=512: 1 thread / %d threads" % n,
          "remat train batch=1,seq=512 1t", "remat train batch=1,seq=512 %dt" % n,
          1.8, False)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "measurements": measurements,
                       "cores_probes": probes}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
