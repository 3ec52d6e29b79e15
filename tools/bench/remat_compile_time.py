#!/usr/bin/env python3
"""How long remat takes to plan a large model, and how that grows with layers.

For each shape (bert-large, GPT-2-XL's and Llama-7B's widths written as
BERT encoders: the model family remat builds, with those hidden sizes,
heads, FFN widths and vocabularies) and each layer count, writes the
forward graph as .rir without weight data and times

  remat-opt GRAPH.rir --budget 40% --timing

(batch and seq bound when the graph is written, by --bind)

reporting the remat pass's own wall time from --timing's table (autodiff,
schedule and plan-memory are listed apart there), and the whole command's
wall and CPU time (user + system: less sensitive than wall time to other
work on a loaded machine).

The .rir is made without filling the weights (Llama-7B's 27 GB of f32 would
not fit this machine): remat-opt writes the same config with sentinel
widths (head size 11, FFN 997, vocabulary 1009, the real head count) and
the real layer count, and the sentinels are replaced by the real widths in
the types and the shape constants; the weights' data is dropped (remat
plans without it). Prints one line per run, the growth per step of layers,
and whether every pass time is under --limit seconds.

When no plan fits --budget (Llama-7B's f32 weights are most of 40%), the
run times the infeasible-budget error (its own row, the command's time),
and a second run times a budget that has a plan: midway between the
smallest feasible planned peak and the peak without remat, both read from
that error (the same rule for every shape).

Usage: remat_compile_time.py [--remat-opt PATH] [--layers 12,24,48,96|own]
                             [--shapes bert-large,gpt2-xl,llama-7b]
                             [--bind batch=8,seq=512] [--limit 5]
"""

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

# Widths of the three models (their published configs); everything else is
# BERT's.
SHAPES = {
    "bert-large": {"hidden_size": 1024, "num_attention_heads": 16,
                   "intermediate_size": 4096, "vocab_size": 30522,
                   "num_hidden_layers": 24},
    "gpt2-xl": {"hidden_size": 1600, "num_attention_heads": 25,
                "intermediate_size": 6400, "vocab_size": 50257,
                "num_hidden_layers": 48},
    "llama-7b": {"hidden_size": 4096, "num_attention_heads": 32,
                 "intermediate_size": 11008, "vocab_size": 32000,
                 "num_hidden_layers": 32},
}
BASE = {"model_type": "bert", "hidden_act": "gelu",
        "max_position_embeddings": 4096, "type_vocab_size": 2,
        "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
        "batch": 1, "seq": 512, "seed": 0}

# Sentinel widths of the template graph (see the docstring).
HEAD_SIZE, FFN, VOCAB = 11, 997, 1009


def write_graph(remat_opt, shape, layers, bind, directory):
    """Writes SHAPE with LAYERS layers as .rir without weight data."""
    real = SHAPES[shape]
    heads = real["num_attention_heads"]
    config = dict(BASE, **real)
    config.update(num_hidden_layers=layers, hidden_size=heads * HEAD_SIZE,
                  intermediate_size=FFN, vocab_size=VOCAB)
    template = os.path.join(directory, "template.json")
    with open(template, "w") as f:
        json.dump(config, f)
    small = os.path.join(directory, "template.rir")
    subprocess.run([remat_opt, template, "--bind", bind, "-o", small],
                   check=True, capture_output=True)
    widths = {str(heads * HEAD_SIZE): str(real["hidden_size"]),
              str(HEAD_SIZE): str(real["hidden_size"] // heads),
              str(FFN): str(real["intermediate_size"]),
              str(VOCAB): str(real["vocab_size"])}

    def scale(match):
        return re.sub(r"\d+", lambda m: widths.get(m.group(0), m.group(0)),
                      match.group(0))

    with open(small) as f:
        text = f.read()
    header, body = text.split("\n", 1)
    header = re.sub(r" = dense<[^>]*>", "", header)
    text = re.sub(r"\[[0-9, ]*\]", scale, header + "\n" + body)
    path = os.path.join(directory, f"{shape}-{layers}.rir")
    with open(path, "w") as f:
        f.write(text)
    return path


def time_run(remat_opt, path, budget):
    """Times `remat-opt PATH --budget BUDGET --timing`. \returns the remat
    pass's seconds, the command's wall and CPU seconds, its stderr and a
    note ('' when a plan fits), or None after printing an error."""
    command = [remat_opt, path, "--budget", budget, "--timing"]
    started = time.monotonic()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(command, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, check=False)
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.monotonic() - started
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime +
           cpu_after.ru_stime - cpu_before.ru_stime)
    match = re.search(r"^\s*([0-9.]+)\s+[0-9.]+%\s+remat$", result.stderr,
                      re.M)
    if match:
        return float(match.group(1)) / 1e3, wall, cpu, result.stderr, ""
    if "is below every plan" in result.stderr:
        # No timing table for a failed pass: the command's wall time bounds
        # the pass's.
        return wall, wall, cpu, result.stderr, ": no plan fits, command time"
    print(f"error: {' '.join(command)}: no remat time in: "
          f"{result.stderr.strip()[-2000:]}", file=sys.stderr)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--remat-opt", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
        "remat-opt"))
    parser.add_argument("--layers", default="12,24,48,96",
                        help="layer counts, or 'own' for each model's own")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--bind", default="batch=8,seq=512")
    parser.add_argument("--budget", default="40%")
    parser.add_argument("--limit", type=float, default=5.0,
                        help="seconds: the goal each run is checked against")
    args = parser.parse_args()
    shapes = args.shapes.split(",")
    for shape in shapes:
        if shape not in SHAPES:
            print(f"error: --shapes: unknown shape '{shape}' "
                  f"(shapes: {', '.join(SHAPES)})", file=sys.stderr)
            return 1
    if not os.path.exists(args.remat_opt):
        print(f"error: --remat-opt: no such file: {args.remat_opt}",
              file=sys.stderr)
        return 1
    over = over_cpu = False
    print(f"{'shape':<12} {'layers':>6} {'remat s':>8} {'growth':>7} "
          f"{'command s':>9} {'cmd cpu s':>9}")
    with tempfile.TemporaryDirectory() as directory:
        for shape in shapes:
            if args.layers == "own":
                counts = [SHAPES[shape]["num_hidden_layers"]]
            else:
                counts = [int(n) for n in args.layers.split(",")]
            previous = {}
            for layers in counts:
                path = write_graph(args.remat_opt, shape, layers, args.bind,
                                   directory)
                row = time_run(args.remat_opt, path, args.budget)
                if row is None:
                    return 1
                rows = [(args.budget, row)]
                floor = re.search(r"the smallest feasible planned peak is "
                                  r"[^(]*\((\d+) B.*without remat it is "
                                  r"([0-9.]+) GiB", row[3])
                if floor:
                    # No plan fits the budget: time a budget that has one
                    # too, midway between the smallest feasible planned
                    # peak and the peak without remat (both from the error).
                    smallest = int(floor.group(1))
                    base = float(floor.group(2)) * 2**30
                    budget = f"{int((smallest + base) / 2) >> 20}MiB"
                    row = time_run(args.remat_opt, path, budget)
                    if row is None:
                        return 1
                    rows.append((budget, row))
                for budget, (seconds, wall, cpu, _, note) in rows:
                    kind = budget if note else "plan"
                    growth = (f"x{seconds / previous[kind]:.2f}"
                              if kind in previous else "")
                    previous[kind] = seconds
                    over |= seconds > args.limit
                    over_cpu |= cpu > args.limit
                    print(f"{shape:<12} {layers:>6} {seconds:>8.2f} "
                          f"{growth:>7} {wall:>9.2f} {cpu:>9.2f}  "
                          f"(--budget {budget}{note})", flush=True)
    print(f"goal: the remat pass under {args.limit:g} s (wall) in every run: "
          f"{'missed' if over else 'met'}; the whole command under "
          f"{args.limit:g} s of CPU in every run: "
          f"{'missed' if over_cpu else 'met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
