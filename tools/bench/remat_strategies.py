#!/usr/bin/env python3
"""Memory and time of every remat strategy on one model, measured.

Runs `remat-run MODEL --budget B --strategy S --report R.json` once per
configuration and round, each in its own process, alternating the
configurations within a round and keeping each one's best (smallest) median
step time over the rounds (the machine is shared and noisy). Prints, per
configuration: planned peak (weights + inputs + arena), the arena the step
actually touched, max RSS, activations kept for backward, median step time,
its ratio to `none`, and remat's predicted ratio.

Example (the figures of docs/remat.md):
  tools/bench/remat_strategies.py --model models/bert-base.json \\
      --bind batch=1,seq=512 --threads 2 --steps 3 --rounds 2
No Python package beyond the standard library is needed.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def run_config(args, name, flags, report):
    cmd = [args.remat_run, args.model, "--bind", args.bind, "--steps",
           str(args.steps), "--threads", str(args.threads), "--report",
           report] + flags
    started = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    out = proc.stdout
    median = float(re.search(r"median step time: ([\d.]+) ms", out).group(1))
    planned = re.findall(r"planned peak ([\d.]+) MiB", out)
    measured = [float(v) / (2**20 if unit == "B" else 1) for v, unit in
                re.findall(r"measured arena peak ([\d.]+) (MiB|B)", out)]
    rss = re.findall(r"max RSS ([\d.]+) MiB", out)
    with open(report) as f:
        graph = json.load(f)["graphs"][0]
    remat = graph.get("remat", {}).get("summary", {})
    return {
        "planned_bytes": remat.get("planned_peak_bytes"),
        "median_ms": median,
        "planned_mib": float(planned[-1]) if planned else None,
        "arena_measured_mib": measured[-1] if measured else None,
        "arena_planned_mib": graph.get("arena_bytes", 0) / 2**20,
        "rss_mib": float(rss[-1]) if rss else None,
        "kept_mib": remat.get("activation_bytes_kept", 0) / 2**20,
        "stash_mib": remat.get("activation_bytes_no_remat", 0) / 2**20,
        "predicted_ratio": remat.get("predicted_time_ratio"),
        "strategy_used": graph.get("remat", {}).get("strategy"),
        "wall_s": time.time() - started,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="models/bert-base.json")
    parser.add_argument("--bind", default="batch=1,seq=512")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--remat-run", default="build/remat-run")
    parser.add_argument("--budgets", default="95%,90%,80%,60%,40%,20%")
    parser.add_argument("--json", help="write every measurement here")
    parser.add_argument("--fixed", default="none,every-layer,sqrt",
                        help="fixed strategies to run")
    parser.add_argument("--budget-strategies", default="auto,selective,chain-dp",
                        help="strategies to run at each budget")
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="remat-bench-")
    configs = [(name, ["--strategy", name])
               for name in ["none"] + [f for f in args.fixed.split(",")
                                       if f and f != "none"]]
    # every-layer's own planned peak, for auto and chain-dp at the same memory.
    probe = run_config(argparse.Namespace(**{**vars(args), "steps": 1}),
                       "every-layer", ["--strategy", "every-layer"],
                       os.path.join(tmp, "probe.json"))
    if "error" in probe:
        sys.exit("every-layer failed: " + probe["error"])
    el_bytes = probe["planned_bytes"]
    configs.append(("auto @ every-layer's peak",
                    ["--strategy", "auto", "--budget", str(el_bytes)]))
    configs.append(("chain-dp @ every-layer's peak",
                    ["--strategy", "chain-dp", "--budget", str(el_bytes)]))
    for budget in filter(None, args.budgets.split(",")):
        for strategy in args.budget_strategies.split(","):
            configs.append((f"{strategy} @ {budget}",
                            ["--strategy", strategy, "--budget", budget]))

    best = {}
    for round_index in range(args.rounds):
        order = configs if round_index % 2 == 0 else list(reversed(configs))
        for i, (name, flags) in enumerate(order):
            print(f"[round {round_index + 1}/{args.rounds}, {i + 1}/"
                  f"{len(order)}] {name}", file=sys.stderr, flush=True)
            result = run_config(args, name, flags,
                                os.path.join(tmp, "report.json"))
            if name not in best or ("median_ms" in result and (
                    "median_ms" not in best[name]
                    or result["median_ms"] < best[name]["median_ms"])):
                best[name] = result

    base = best["none"]
    print(f"model {args.model} --bind {args.bind}, {args.threads} threads, "
          f"median of {args.steps} steps, best of {args.rounds} rounds")
    header = ("configuration", "chosen", "planned peak", "arena planned",
              "arena measured", "max RSS", "activations kept", "step",
              "x none", "predicted x")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, _ in configs:
        r = best[name]
        if "error" in r:
            print(f"| {name} | infeasible: {r['error']} |" + " |" * 8)
            continue
        ratio = r["median_ms"] / base["median_ms"]
        kept = (f"{r['kept_mib']:.1f} MiB ({r['stash_mib'] / r['kept_mib']:.2f}x less)"
                if r["kept_mib"] else "0")
        print(f"| {name} | {r['strategy_used']} | {r['planned_mib']:.1f} MiB | "
              f"{r['arena_planned_mib']:.1f} MiB | {r['arena_measured_mib']:.1f} MiB | "
              f"{r['rss_mib']:.0f} MiB | {kept} | {r['median_ms']:.0f} ms | "
              f"{ratio:.3f} | {r['predicted_ratio']:.3f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(best, f, indent=2)


if __name__ == "__main__":
    main()
