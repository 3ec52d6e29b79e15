#!/usr/bin/env python3
"""PyTorch's answer to "what does checkpointing cost?", for remat-sweep --peers.

Builds Hugging Face's BertForMaskedLM from the same config JSON as remat's
preset (random weights, training mode: dropout as the config says), and times
one training step (forward + MLM loss + backward) in PyTorch eager with:

  eager         no checkpointing
  checkpoint    model.gradient_checkpointing_enable(), what the seed PR added
  selective     the same layers checkpointed with a selective policy
                (torch.utils.checkpoint + create_selective_checkpoint_contexts):
                matmul outputs are saved, everything else recomputed
  compile-B     torch.compile with torch._functorch.config.
                activation_memory_budget = B (1.0, 0.5, 0.2, 0.0)

Each point runs in a process of its own (this script started again with
--child), rounds alternate the order, and each point keeps its fastest round.

Memory, measured the same way for every point: one warm-up step (it compiles
for torch.compile), then gradients freed, gc and malloc_trim, the RSS taken as
"before", the peak RSS reset (/proc/self/clear_refs), the timed steps run; the
reported peak is (peak RSS during the timed steps - before) + the bytes of the
parameters. That is the same quantity as remat's "planned peak": weights +
inputs + everything the step allocates (activations, gradients, temporaries),
without the interpreter, the libraries and torch.compile's caches.

torch and transformers are not remat's dependencies: put them in a venv of
their own, e.g.
  python3 -m venv .venv-peers && .venv-peers/bin/pip install torch transformers
  .venv-peers/bin/python tools/bench/vs_pytorch.py --config models/bert-base.json \
      --batch 1 --seq 512 --threads 2 --csv peers.csv
Then: remat-sweep models/bert-base.json --bind batch=1,seq=512 --measure \
      --threads 2 --peers peers.csv --svg sweep.svg
"""

import argparse
import ctypes
import gc
import json
import os
import statistics
import subprocess
import sys
import time

MODES = ["eager", "checkpoint", "selective",
         "compile-1.0", "compile-0.5", "compile-0.2", "compile-0.0"]


def read_status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no %s in /proc/self/status" % key)


def child(args):
    import torch
    import transformers
    from transformers import BertConfig, BertForMaskedLM

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    with open(args.config) as f:
        preset = json.load(f)
    keys = ["vocab_size", "hidden_size", "num_hidden_layers",
            "num_attention_heads", "intermediate_size", "hidden_act",
            "max_position_embeddings", "type_vocab_size", "layer_norm_eps",
            "hidden_dropout_prob", "attention_probs_dropout_prob",
            "initializer_range"]
    config = BertConfig(**{k: preset[k] for k in keys if k in preset})
    # The eager attention: what remat computes (no fused SDPA kernel).
    config._attn_implementation = "eager"
    model = BertForMaskedLM(config)
    model.train()
    mode = args.child
    if mode == "checkpoint":
        model.gradient_checkpointing_enable()
    elif mode == "selective":
        from functools import partial
        from torch.utils.checkpoint import (CheckpointPolicy,
                                            create_selective_checkpoint_contexts)
        matmuls = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
                   torch.ops.aten.bmm.default, torch.ops.aten.baddbmm.default}

        def policy(ctx, op, *a, **kw):
            if op in matmuls:
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE

        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={
            "use_reentrant": False,
            "context_fn": partial(create_selective_checkpoint_contexts, policy)})
    step_model = model
    if mode.startswith("compile-"):
        import torch._functorch.config as functorch_config
        functorch_config.activation_memory_budget = float(mode.split("-")[1])
        step_model = torch.compile(model)

    g = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(0, config.vocab_size, (args.batch, args.seq), generator=g)
    labels = ids.clone()
    labels[torch.rand(ids.shape, generator=g) < 0.125] = -100
    token_types = torch.zeros_like(ids)
    mask = torch.ones_like(ids)
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    input_bytes = sum(t.numel() * t.element_size()
                      for t in (ids, labels, token_types, mask))

    def step():
        out = step_model(input_ids=ids, token_type_ids=token_types,
                         attention_mask=mask, labels=labels)
        out.loss.backward()
        loss = float(out.loss)
        model.zero_grad(set_to_none=True)
        return loss

    libc = ctypes.CDLL("libc.so.6")
    warm_start = time.perf_counter()
    step()  # Warm-up: allocator, and torch.compile's compilation.
    warm_seconds = time.perf_counter() - warm_start
    gc.collect()
    libc.malloc_trim(0)
    before = read_status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    times, losses = [], []
    for _ in range(args.steps):
        start = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - start)
    peak = read_status("VmHWM")
    print(json.dumps({
        "mode": mode, "median_seconds": statistics.median(times),
        "step_seconds": times, "losses": losses,
        "peak_bytes": peak - before + param_bytes + input_bytes,
        "rss_before_bytes": before, "rss_peak_bytes": peak,
        "param_bytes": param_bytes, "warmup_seconds": warm_seconds,
        "torch": torch.__version__, "transformers": transformers.__version__}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="models/bert-base.json")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5,
                        help="timed steps per point (the median counts)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds, alternating the order; each point keeps "
                             "its fastest")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", help="write the --peers CSV of remat-sweep")
    parser.add_argument("--json", help="write every round's figures")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds one point may take (compilation included)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0

    modes = [m for m in args.modes.split(",") if m]
    for mode in modes:
        if mode not in MODES:
            parser.error("unknown mode '%s' (modes: %s)" % (mode, ", ".join(MODES)))
    best, rounds, failed = {}, [], {}
    total = len(modes) * args.rounds
    done = 0
    for r in range(args.rounds):
        order = modes if r % 2 == 0 else list(reversed(modes))
        for mode in order:
            if mode in failed:
                continue
            cmd = [sys.executable, os.path.abspath(__file__), "--child", mode]
            for flag in ["config", "batch", "seq", "threads", "steps", "seed"]:
                cmd += ["--" + flag, str(getattr(args, flag))]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True,
                                      timeout=args.timeout)
            except subprocess.TimeoutExpired:
                failed[mode] = "timed out after %.0f s" % args.timeout
                print("[%s] %s" % (mode, failed[mode]), file=sys.stderr)
                continue
            done += 1
            if proc.returncode != 0:
                lines = (proc.stderr or proc.stdout).strip().splitlines()
                failed[mode] = lines[-1] if lines else "exit %d" % proc.returncode
                print("[%d/%d] %s failed: %s" % (done, total, mode, failed[mode]),
                      file=sys.stderr)
                continue
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            result["round"] = r
            rounds.append(result)
            if mode not in best or result["median_seconds"] < best[mode]["median_seconds"]:
                best[mode] = result
            print("[%d/%d] %s: %.2f s, peak %.1f MiB (warm-up %.1f s)" % (
                done, total, mode, result["median_seconds"],
                result["peak_bytes"] / 2**20, result["warmup_seconds"]),
                file=sys.stderr)

    base = best.get("eager")
    print("| point | step | x eager | peak (weights + step) |")
    print("|---|---|---|---|")
    for mode in modes:
        if mode in best:
            b = best[mode]
            ratio = b["median_seconds"] / base["median_seconds"] if base else float("nan")
            print("| pytorch %s | %.0f ms | %.3f | %.1f MiB |" % (
                mode, b["median_seconds"] * 1e3, ratio, b["peak_bytes"] / 2**20))
        else:
            print("| pytorch %s | failed: %s | | |" % (mode, failed.get(mode, "")))
    if args.csv:
        tmp = args.csv + ".tmp"
        with open(tmp, "w") as f:
            f.write("label,peak_bytes,step_seconds,rss_peak_bytes\n")
            for mode in modes:
                if mode in best:
                    b = best[mode]
                    f.write("pytorch %s,%d,%.6f,%d\n" % (
                        mode, b["peak_bytes"], b["median_seconds"],
                        b["rss_peak_bytes"]))
        os.replace(tmp, args.csv)
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"args": vars(args), "rounds": rounds, "failed": failed}, f,
                      indent=2)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
