#!/usr/bin/env python3
"""Forward-step time of remat's CPU runtime next to onnxruntime's on the same
model (a BERT preset exported by remat-opt), with the same thread count.

  .venv/bin/python tools/bench/bert_forward_vs_ort.py [--config models/bert-base.json]
      [--bind batch=1,seq=512] [--threads 2] [--steps 5] [--build build]

Prints the median step time of each and their ratio, measured in one run.
Not a test: timings belong in benchmarks."""
import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="models/bert-base.json")
    parser.add_argument("--bind", default="batch=1,seq=512")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--build", default="build")
    args = parser.parse_args()
    build = Path(args.build)
    dims = dict(item.split("=") for item in args.bind.split(","))
    batch, seq = int(dims["batch"]), int(dims["seq"])

    with tempfile.TemporaryDirectory() as work:
        model = Path(work) / "model.onnx"
        subprocess.run([build / "remat-opt", args.config, "--bind", args.bind,
                        "-o", model], check=True)

        run = subprocess.run(
            [build / "remat-run", args.config, "--bind", args.bind, "--forward",
             "--steps", str(args.steps), "--threads", str(args.threads)],
            check=True, capture_output=True, text=True)
        remat_times = [float(m) for m in re.findall(r"time ([0-9.]+) ms", run.stdout)]
        print(run.stdout, end="")

        rng = np.random.default_rng(0)
        feeds = {
            "input_ids": rng.integers(0, 30522, (batch, seq), dtype=np.int64),
            "token_type_ids": np.zeros((batch, seq), dtype=np.int64),
            "attention_mask": np.ones((batch, seq), dtype=np.int64),
            "labels": rng.integers(0, 30522, (batch, seq), dtype=np.int64),
        }
        results = {}
        for label, level in [("onnxruntime (all graph optimizations)",
                              ort.GraphOptimizationLevel.ORT_ENABLE_ALL),
                             ("onnxruntime (graph optimizations off)",
                              ort.GraphOptimizationLevel.ORT_DISABLE_ALL)]:
            options = ort.SessionOptions()
            options.intra_op_num_threads = args.threads
            options.inter_op_num_threads = 1
            options.graph_optimization_level = level
            session = ort.InferenceSession(str(model), options,
                                           providers=["CPUExecutionProvider"])
            times = []
            for _ in range(args.steps):
                start = time.perf_counter()
                session.run(None, feeds)
                times.append((time.perf_counter() - start) * 1e3)
            results[label] = statistics.median(times)

    remat_ms = statistics.median(remat_times)
    print(f"\n{args.config} --bind {args.bind}, {args.threads} threads, "
          f"median of {args.steps} steps")
    print(f"  {'remat-run (cpu)':40s} {remat_ms:9.1f} ms")
    for label, ms in results.items():
        print(f"  {label:40s} {ms:9.1f} ms   remat / ort = {remat_ms / ms:.2f}")


if __name__ == "__main__":
    sys.exit(main())
