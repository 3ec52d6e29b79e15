#!/usr/bin/env python3
"""PyTorch's answer to "what does checkpointing cost?", for remat-sweep --peers.

Builds BERT for masked LM in plain PyTorch from the same config JSON as
remat's preset (models/bert-*.json: the same layers, parameters and loss as
remat's BERT builder, frontends/bert/BertBuilder.cpp; random weights,
training mode, dropout as the config says) and times one training step
(forward + MLM loss + backward) with:

  eager         no checkpointing
  checkpoint    every encoder layer under torch.utils.checkpoint
                (use_reentrant=False): per-layer checkpointing
  selective     the same layers under a selective policy
                (create_selective_checkpoint_contexts): matmul outputs are
                saved, everything else recomputed
  compile-B     torch.compile (backend --compile-backend, aot_eager by
                default: AOT Autograd's min-cut partitioner, no code
                generation) with torch._functorch.config.
                activation_memory_budget = B (any B in [0, 1])

Each point runs in a process of its own (this script started again with
--child), rounds alternate the order, and each point keeps its fastest round.

Memory, measured the same way for every point: one warm-up step (it compiles
for torch.compile), then gradients freed, gc and malloc_trim, the RSS taken as
"before", the peak RSS reset (/proc/self/clear_refs), the timed steps run; the
reported peak is (peak RSS during the timed steps - before) + the bytes of the
parameters and inputs. That is the same quantity as remat's measured peak:
weights + inputs + everything the step allocates (activations, gradients,
temporaries), without the interpreter, the libraries and torch.compile's
caches. `above_weights_bytes` is that peak less the parameters.

torch is not a dependency of remat's build; the shared venv has it
(scripts/setup.sh):
  .venv/bin/python tools/bench/vs_pytorch.py --config models/bert-base.json \
      --batch 4 --seq 512 --threads 2 --csv peers.csv
Then: remat-sweep models/bert-base.json --bind batch=4,seq=512 --measure \
      --threads 2 --peers peers.csv --svg sweep.svg
"""

import argparse
import ctypes
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import time

FIXED_MODES = ["eager", "checkpoint", "selective"]
DEFAULT_MODES = FIXED_MODES + ["compile-1.0", "compile-0.5", "compile-0.2",
                               "compile-0.0"]


def compile_budget(mode):
    """The activation_memory_budget of a compile-B mode, or None."""
    if not mode.startswith("compile-"):
        return None
    try:
        budget = float(mode[len("compile-"):])
    except ValueError:
        return None
    return budget if 0.0 <= budget <= 1.0 else None


def read_status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no %s in /proc/self/status" % key)


def build_bert(torch, preset, checkpoint_layer):
    """BERT for masked LM as remat's builder makes it: embeddings, encoder
    layers (post-LayerNorm, eager attention), the pooler, the MLM head with
    the decoder tied to the word embeddings, mean cross entropy ignoring
    label -100. \p checkpoint_layer wraps each layer's call (or is None)."""
    nn = torch.nn
    F = torch.nn.functional
    h = preset["hidden_size"]
    heads = preset["num_attention_heads"]
    inter = preset["intermediate_size"]
    eps = preset.get("layer_norm_eps", 1e-12)
    p_hidden = preset.get("hidden_dropout_prob", 0.1)
    p_attn = preset.get("attention_probs_dropout_prob", 0.1)
    act = preset.get("hidden_act", "gelu")
    approximate = "none" if act == "gelu" else "tanh"
    head_dim = h // heads

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.query = nn.Linear(h, h)
            self.key = nn.Linear(h, h)
            self.value = nn.Linear(h, h)
            self.attn_out = nn.Linear(h, h)
            self.attn_norm = nn.LayerNorm(h, eps=eps)
            self.intermediate = nn.Linear(h, inter)
            self.output = nn.Linear(inter, h)
            self.out_norm = nn.LayerNorm(h, eps=eps)

        def forward(self, x, mask):
            b, s, _ = x.shape

            def split(t):
                return t.view(b, s, heads, head_dim).transpose(1, 2)

            q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
            scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim) + mask
            probs = F.dropout(scores.softmax(-1), p_attn, self.training)
            context = (probs @ v).transpose(1, 2).reshape(b, s, h)
            x = self.attn_norm(
                F.dropout(self.attn_out(context), p_hidden, self.training) + x)
            y = F.gelu(self.intermediate(x), approximate=approximate)
            y = F.dropout(self.output(y), p_hidden, self.training)
            return self.out_norm(y + x)

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.word = nn.Embedding(preset["vocab_size"], h)
            self.position = nn.Embedding(preset["max_position_embeddings"], h)
            self.token_type = nn.Embedding(preset.get("type_vocab_size", 2), h)
            self.embed_norm = nn.LayerNorm(h, eps=eps)
            self.layers = nn.ModuleList(
                Layer() for _ in range(preset["num_hidden_layers"]))
            self.pooler = nn.Linear(h, h)
            self.transform = nn.Linear(h, h)
            self.transform_norm = nn.LayerNorm(h, eps=eps)
            self.decoder_bias = nn.Parameter(torch.zeros(preset["vocab_size"]))

        def forward(self, ids, token_types, attention_mask, labels):
            s = ids.shape[1]
            positions = torch.arange(s, device=ids.device)
            x = (self.word(ids) + self.position(positions)[None] +
                 self.token_type(token_types))
            x = F.dropout(self.embed_norm(x), p_hidden, self.training)
            mask = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
            for layer in self.layers:
                if checkpoint_layer is None:
                    x = layer(x, mask)
                else:
                    x = checkpoint_layer(layer, x, mask)
            pooled = torch.tanh(self.pooler(x[:, 0]))
            t = self.transform_norm(
                F.gelu(self.transform(x), approximate=approximate))
            scores = F.linear(t, self.word.weight, self.decoder_bias)
            loss = F.cross_entropy(scores.view(-1, scores.shape[-1]),
                                   labels.view(-1), ignore_index=-100)
            return loss, pooled

    return Bert()


def child(args):
    import torch
    import torch.utils.checkpoint as checkpoint

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    with open(args.config) as f:
        preset = json.load(f)
    mode = args.child
    checkpoint_layer = None
    if mode == "checkpoint":
        def checkpoint_layer(layer, x, mask):
            return checkpoint.checkpoint(layer, x, mask, use_reentrant=False)
    elif mode == "selective":
        from functools import partial
        matmuls = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
                   torch.ops.aten.bmm.default, torch.ops.aten.baddbmm.default}

        def policy(ctx, op, *a, **kw):
            if op in matmuls:
                return checkpoint.CheckpointPolicy.MUST_SAVE
            return checkpoint.CheckpointPolicy.PREFER_RECOMPUTE

        context_fn = partial(checkpoint.create_selective_checkpoint_contexts,
                             policy)

        def checkpoint_layer(layer, x, mask):
            return checkpoint.checkpoint(layer, x, mask, use_reentrant=False,
                                         context_fn=context_fn)
    model = build_bert(torch, preset, checkpoint_layer)
    model.train()
    step_model = model
    budget = compile_budget(mode)
    if budget is not None:
        import torch._functorch.config as functorch_config
        functorch_config.activation_memory_budget = budget
        step_model = torch.compile(model, backend=args.compile_backend)

    g = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(0, preset["vocab_size"], (args.batch, args.seq),
                        generator=g)
    labels = ids.clone()
    labels[torch.rand(ids.shape, generator=g) < 0.125] = -100
    token_types = torch.zeros_like(ids)
    mask = torch.ones_like(ids)
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    input_bytes = sum(t.numel() * t.element_size()
                      for t in (ids, labels, token_types, mask))

    def step():
        loss, _ = step_model(ids, token_types, mask, labels)
        loss.backward()
        value = float(loss)
        model.zero_grad(set_to_none=True)
        return value

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
        "above_weights_bytes": peak - before + input_bytes,
        "rss_before_bytes": before, "rss_peak_bytes": peak,
        "param_bytes": param_bytes, "warmup_seconds": warm_seconds,
        "compile_backend": args.compile_backend if budget is not None else "",
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
        "torch": torch.__version__}))


def best_of(paths, out):
    """Each label's fastest row of the CSV files \p paths, to \p out."""
    import csv
    header, best, order = None, {}, []
    for path in paths:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            if header is None:
                header = reader.fieldnames
            elif reader.fieldnames != header:
                sys.exit("vs_pytorch.py: %s has the columns %s, %s has %s" % (
                    path, reader.fieldnames, paths[0], header))
            for row in reader:
                label = row["label"]
                if label not in best:
                    order.append(label)
                    best[label] = (row, 1)
                    continue
                kept, count = best[label]
                if float(row["step_seconds"]) < float(kept["step_seconds"]):
                    kept = row
                best[label] = (kept, count + 1)
    tmp = out + ".tmp"
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        for label in order:
            writer.writerow(best[label][0])
    os.replace(tmp, out)
    for label in order:
        row, count = best[label]
        print("%s: %.0f ms, best of %d" % (
            label, float(row["step_seconds"]) * 1e3, count), file=sys.stderr)
    return 0


def write_outputs(args, modes, best, rounds, failed):
    """Writes --csv (each point's best round) and --json (every round)."""
    if args.csv:
        tmp = args.csv + ".tmp"
        with open(tmp, "w") as f:
            f.write("label,peak_bytes,step_seconds,rss_peak_bytes,"
                    "above_weights_bytes\n")
            for mode in modes:
                if mode in best:
                    b = best[mode]
                    f.write("pytorch %s,%d,%.6f,%d,%d\n" % (
                        mode, b["peak_bytes"], b["median_seconds"],
                        b["rss_peak_bytes"], b["above_weights_bytes"]))
        os.replace(tmp, args.csv)
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"args": vars(args), "rounds": rounds, "failed": failed}, f,
                      indent=2)
        os.replace(tmp, args.json)


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
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES),
                        help="eager, checkpoint, selective, compile-B "
                             "(B in [0, 1])")
    parser.add_argument("--compile-backend", default="aot_eager",
                        help="torch.compile's backend for compile-B")
    parser.add_argument("--reverse", action="store_true",
                        help="start with the last mode (round 0 runs the "
                             "list backwards)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", help="write the --peers CSV of remat-sweep")
    parser.add_argument("--json", help="write every round's figures")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds one point may take (compilation included)")
    parser.add_argument("--best-of", nargs="+", metavar="CSV",
                        help="measure nothing: write to --csv each label's "
                             "fastest row of these --csv files (rounds run "
                             "apart, e.g. before and after remat's)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    if args.best_of:
        if not args.csv:
            parser.error("--best-of needs --csv")
        return best_of(args.best_of, args.csv)

    modes = [m for m in args.modes.split(",") if m]
    for mode in modes:
        if mode not in FIXED_MODES and compile_budget(mode) is None:
            parser.error("unknown mode '%s' (modes: %s, compile-B with B in "
                         "[0, 1])" % (mode, ", ".join(FIXED_MODES)))
    if args.steps < 1 or args.rounds < 1:
        parser.error("--steps and --rounds must be at least 1")
    best, rounds, failed = {}, [], {}
    total = len(modes) * args.rounds
    done = 0
    for r in range(args.rounds):
        order = modes if (r % 2 == 0) != args.reverse else list(reversed(modes))
        for mode in order:
            if mode in failed:
                continue
            cmd = [sys.executable, os.path.abspath(__file__), "--child", mode]
            for flag in ["config", "batch", "seq", "threads", "steps", "seed",
                         "compile_backend"]:
                cmd += ["--" + flag.replace("_", "-"), str(getattr(args, flag))]
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
            # After every point, so that a run cut short leaves its points.
            write_outputs(args, modes, best, rounds, failed)

    base = best.get("eager")
    print("| point | step | x eager | peak (weights + step) | above the weights |")
    print("|---|---|---|---|---|")
    for mode in modes:
        if mode in best:
            b = best[mode]
            ratio = b["median_seconds"] / base["median_seconds"] if base else float("nan")
            print("| pytorch %s | %.0f ms | %.3f | %.1f MiB | %.1f MiB |" % (
                mode, b["median_seconds"] * 1e3, ratio, b["peak_bytes"] / 2**20,
                b["above_weights_bytes"] / 2**20))
        else:
            print("| pytorch %s | failed: %s | | | |" % (mode, failed.get(mode, "")))
    write_outputs(args, modes, best, rounds, failed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
