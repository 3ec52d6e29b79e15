#!/usr/bin/env python3
"""PyTorch eager BertForMaskedLM, one training step at remat's shapes, for
scripts/gpu-check.sh (e): step time and peak device memory, with and without
gradient_checkpointing_enable(). f32 with TF32 off (remat's default), dropout
on, labels with about one in eight ignored (-100) as remat-run generates.
Attention is Hugging Face's eager implementation (softmax(QK^T) as remat
computes it) unless --attention sdpa picks PyTorch's fused attention, which
keeps no seq x seq probabilities; the line printed names the one that ran.

usage: gpu_torch_bench.py MODEL.json --batch 8 --seq 512 [--checkpointing]
                          [--attention eager|sdpa]
"""
import argparse
import json
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--checkpointing", action="store_true")
    parser.add_argument("--attention", choices=["eager", "sdpa"],
                        default="eager")
    parser.add_argument("--device", default="cuda",
                        help="cpu: a dry run of this script without a GPU")
    args = parser.parse_args()
    try:
        import torch
        from transformers import BertConfig, BertForMaskedLM
    except ImportError as err:
        print(f"pytorch: skipped: {err}")
        return 0
    dev = args.device
    cuda = dev == "cuda"
    if cuda and not torch.cuda.is_available():
        print("pytorch: skipped: torch.cuda.is_available() is false")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with open(args.config) as f:
        cfg = json.load(f)
    keys = ["vocab_size", "hidden_size", "num_hidden_layers",
            "num_attention_heads", "intermediate_size", "hidden_act",
            "max_position_embeddings", "type_vocab_size", "layer_norm_eps",
            "hidden_dropout_prob", "attention_probs_dropout_prob",
            "initializer_range"]
    # As a constructor argument: set afterwards as an attribute it is
    # ignored, and Hugging Face picks sdpa.
    config = BertConfig(**{k: cfg[k] for k in keys if k in cfg},
                        attn_implementation=args.attention)
    torch.manual_seed(0)
    model = BertForMaskedLM(config).to(dev).train()
    attention = getattr(model.config, "_attn_implementation", args.attention)
    if attention != args.attention:
        print(f"pytorch: error: asked for {args.attention} attention, "
              f"the model runs {attention}", file=sys.stderr)
        return 1
    if args.checkpointing:
        model.gradient_checkpointing_enable()
    b, s = args.batch, args.seq
    ids = torch.randint(0, config.vocab_size, (b, s), device=dev)
    labels = ids.clone()
    labels[torch.rand(b, s, device=dev) < 0.125] = -100
    mask = torch.ones(b, s, dtype=torch.long, device=dev)
    types = torch.zeros(b, s, dtype=torch.long, device=dev)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    base = torch.cuda.memory_allocated() if cuda else 0
    times = []
    for step in range(args.steps + 1):
        model.zero_grad(set_to_none=True)
        sync()
        if step == 1 and cuda:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        out = model(input_ids=ids, attention_mask=mask, token_type_ids=types,
                    labels=labels)
        out.loss.backward()
        sync()
        if step > 0:
            times.append(time.perf_counter() - t0)
    times.sort()
    peak = torch.cuda.max_memory_allocated() if cuda else 0
    name = cfg.get("name", args.config.rsplit("/", 1)[-1])
    print(f"pytorch {torch.__version__} {name} batch {b} seq {s} "
          f"{'checkpointing' if args.checkpointing else 'no checkpointing'}, "
          f"{attention} attention: "
          f"loss {out.loss.item():.4f}  median step {times[len(times)//2]*1e3:.1f} ms  "
          f"peak allocated {peak/2**20:.0f} MiB (weights etc. before the step "
          f"{base/2**20:.0f} MiB)  on {torch.cuda.get_device_name() if cuda else dev}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
