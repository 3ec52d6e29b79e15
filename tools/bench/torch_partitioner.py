#!/usr/bin/env python3
"""remat.torch against PyTorch's own answers to running out of memory
(issue 37): for each model, side by side,
  eager; eager with gradient_checkpointing_enable(); torch.compile with
  PyTorch's min-cut partitioner at activation_memory_budget 1.0 ... 0.0;
  torch.compile with remat's backend at byte budgets from the no-remat
  planned peak down to the smallest feasible one, and (--match, the
  default) at the measured peak of the checkpointing point and of each
  min-cut point, so that each is compared with remat at its own memory;
all compiled points with the same forward/backward compiler (aot_eager's:
the modules run as traced; or --compiler inductor: Inductor's, min-cut being
its own partition), so only the save/recompute decision differs. --device
cuda runs on a GPU, the measured peak then torch.cuda.max_memory_allocated.

Each point runs in its own process (so that one point's allocations and
caches do not shape the next), the points alternate their order from round
to round, and each process reports: the measured peak (torch.profiler's
peak live CPU tensor bytes during one step, plus the parameters and the
batch), remat's predicted peak (remat points), and the median of --steps
timed steps after one warm-up step. A point's step time is its best round
(the least of its rounds' medians: load on a shared machine only ever adds
time), its peak the median over rounds. Output: a table, and --json PATH.

    tools/bench/torch_partitioner.py --models bert --batch 4 --seq 512
    tools/bench/torch_partitioner.py --models bert,gpt2,llama --layers 2 \\
        --hidden 128 --seq 128 --rounds 2   # a reduced scope
    tools/bench/torch_partitioner.py --replot run.json --svg plot.svg
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MIN_CUT_BUDGETS = [1.0, 0.8, 0.6, 0.4, 0.2, 0.0]


def build_model(args):
    import torch
    import transformers
    torch.manual_seed(0)
    big = args.hidden is None
    hidden = args.hidden or 768
    layers = args.layers or 12
    heads = args.heads or (12 if big else max(1, hidden // 64))
    inter = 4 * hidden
    if args.model == "bert":
        config = transformers.BertConfig(
            hidden_size=hidden, num_hidden_layers=layers,
            num_attention_heads=heads, intermediate_size=inter,
            max_position_embeddings=max(512, args.seq),
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        model = transformers.BertForMaskedLM(config)
    elif args.model == "gpt2":
        config = transformers.GPT2Config(
            n_embd=hidden, n_layer=layers, n_head=heads,
            n_positions=max(1024, args.seq), resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0)
        model = transformers.GPT2LMHeadModel(config)
    elif args.model == "llama":
        config = transformers.LlamaConfig(
            vocab_size=32000, hidden_size=hidden, num_hidden_layers=layers,
            num_attention_heads=heads, num_key_value_heads=heads,
            intermediate_size=int(hidden * 8 / 3) // 64 * 64 or inter,
            max_position_embeddings=max(2048, args.seq))
        model = transformers.LlamaForCausalLM(config)
    else:
        raise SystemExit("unknown model %r" % args.model)
    model.config.use_cache = False
    model.config._attn_implementation = "eager"
    vocab = model.config.vocab_size
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (args.batch, args.seq), generator=generator)
    labels = torch.randint(0, vocab, (args.batch, args.seq),
                           generator=generator)
    return model.train(), ids, labels


def step_function(args, model):
    """The callable of one point: loss of (ids, labels)."""
    import torch
    from torch._dynamo.backends.common import aot_autograd
    # aot_eager's compiler, remat.torch's default: the modules run as traced
    # and free each saved tensor after its last use.
    from torch._dynamo.backends.debugging import boxed_nop as nop

    # The loss from the logits here, not the model's labels= path:
    # transformers' loss_function (GPT-2, Llama) is a graph break for
    # dynamo, which would plan the model and its loss as two graphs, each
    # under the whole budget, with the logits held between them. Every
    # point computes the same loss this way (eager included).
    causal = args.model != "bert"

    def loss(ids, labels):
        logits = model(input_ids=ids).logits
        if causal:
            logits, labels = logits[:, :-1], labels[:, 1:]
        return torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))

    kind, _, value = args.point.partition("=")
    info = {}
    if kind == "eager":
        return loss, info
    if kind == "checkpoint":
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False})
        return loss, info
    if kind == "mincut":
        from torch._functorch import config
        from torch._functorch.partitioners import \
            min_cut_rematerialization_partition
        config.activation_memory_budget = float(value)
        if args.compiler == "inductor":
            # Inductor's own partition is min-cut, under the same budget.
            return torch.compile(loss, backend="inductor",
                                 dynamic=False), info
        backend = aot_autograd(fw_compiler=nop, bw_compiler=nop,
                               partition_fn=min_cut_rematerialization_partition)
        return torch.compile(loss, backend=backend, dynamic=False), info
    if kind in ("remat", "probe"):
        import remat.torch
        backend = remat.torch.backend(
            budget=value or "100%",
            fw_compiler="inductor" if args.compiler == "inductor" else None)
        info["planner"] = backend.planner
        return torch.compile(loss, backend=backend, dynamic=False), info
    raise SystemExit("unknown point %r" % args.point)


def measured_peak(args, fn, model, batch):
    """On the CPU: parameters + batch + the peak live CPU tensor bytes of
    one step (torch.profiler's memory events: remat.torch.measured_peak).
    On a GPU: torch.cuda.max_memory_allocated over one step (parameters and
    batch included: they are allocated when it starts)."""
    import torch
    import remat.torch
    model.zero_grad(set_to_none=True)
    if args.device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        fn(*batch).backward()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated()
    return remat.torch.measured_peak(lambda: fn(*batch).backward(),
                                     list(model.parameters()) + list(batch))


def run_point(args):
    """One point in this process: prints one JSON line."""
    import torch
    torch.set_num_threads(args.threads)
    model, ids, labels = build_model(args)
    model, ids, labels = (t.to(args.device) for t in (model, ids, labels))
    fn, info = step_function(args, model)

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()
    batch = (ids, labels)
    result = {"model": args.model, "point": args.point}
    start = time.perf_counter()
    model.zero_grad(set_to_none=True)
    fn(*batch).backward()  # warm-up (and compile)
    sync()
    result["first_step_seconds"] = time.perf_counter() - start
    planner = info.get("planner")
    if planner is not None and planner.plans:
        result["predicted_peak"] = sum(p["predicted_peak"]
                                       for p in planner.plans)
        result["no_remat_peak"] = sum(p["no_remat_peak"]
                                      for p in planner.plans)
        result["graphs"] = len(planner.plans)
        if args.point.startswith("probe"):
            import remat
            result["smallest"] = sum(
                remat._remat.plan_joint_graph(p["rir"], "100%",
                                              smallest=True)
                ["smallest_feasible"] for p in planner.plans)
            print(json.dumps(result), flush=True)
            return
    result["measured_peak"] = measured_peak(args, fn, model, batch)
    times = []
    for _ in range(args.steps):
        model.zero_grad(set_to_none=True)
        sync()
        start = time.perf_counter()
        fn(*batch).backward()
        sync()
        times.append(time.perf_counter() - start)
    result["step_seconds"] = statistics.median(times)
    print(json.dumps(result), flush=True)


def spawn(args, model, point):
    command = [sys.executable, os.path.abspath(__file__), "--point", point,
               "--model", model, "--batch", str(args.batch), "--seq",
               str(args.seq), "--threads", str(args.threads), "--steps",
               str(args.steps), "--compiler", args.compiler, "--device",
               args.device]
    for flag in ("hidden", "layers", "heads"):
        if getattr(args, flag):
            command += ["--" + flag, str(getattr(args, flag))]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    done = subprocess.run(command, capture_output=True, text=True, env=env,
                          timeout=args.timeout)
    lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        print("  %s %s: failed: %s" % (model, point, tail), flush=True)
        return {"model": model, "point": point, "error": tail}
    result = json.loads(lines[-1])
    print("  " + json.dumps(result), flush=True)
    return result


def remat_budgets(probe, count):
    """count byte budgets from the no-remat peak down to the smallest."""
    top, bottom = probe["no_remat_peak"], probe["smallest"]
    return [top - (top - bottom) * i // (count - 1) for i in range(count)]


def matched_budgets(rows, probe, taken):
    """remat budgets at the measured peaks of the checkpointing and min-cut
    points of \p rows: those remat can reach and that are not already
    \p taken. Within 1% of the no-remat planned peak, remat's no-remat
    point stands for them."""
    budgets = []
    for row in rows:
        if "error" in row or not (row["point"] == "checkpoint" or
                                  row["point"].startswith("mincut=")):
            continue
        budget = row["measured_peak"]
        if probe["smallest"] <= budget < 0.99 * probe["no_remat_peak"] and \
                budget not in taken and budget not in budgets:
            budgets.append(budget)
    return sorted(budgets, reverse=True)


def summarize(model, rows):
    """Per point: the median peak and the best round's step time; ratios
    to eager, and the goals."""
    by_point = {}
    for row in rows:
        if "error" not in row:
            by_point.setdefault(row["point"], []).append(row)
    table = []
    for point, runs in by_point.items():
        entry = {"point": point,
                 "measured_peak": statistics.median(
                     r["measured_peak"] for r in runs),
                 "step_seconds": min(r["step_seconds"] for r in runs),
                 "rounds": len(runs)}
        if "predicted_peak" in runs[0]:
            entry["predicted_peak"] = runs[0]["predicted_peak"]
        table.append(entry)
    eager = next((e for e in table if e["point"] == "eager"), None)
    for entry in table:
        if eager:
            entry["peak_ratio"] = entry["measured_peak"] / eager["measured_peak"]
            entry["time_ratio"] = entry["step_seconds"] / eager["step_seconds"]
    remat = [e for e in table if e["point"].startswith("remat=")]
    remat.sort(key=lambda e: -int(e["point"].split("=")[1]))
    goals = {}
    peaks = [e["measured_peak"] for e in remat]
    goals["remat_monotone"] = all(b <= a for a, b in zip(peaks, peaks[1:]))
    goals["remat_within_10pct_of_predicted"] = all(
        abs(e["measured_peak"] - e["predicted_peak"]) <= 0.1 *
        e["predicted_peak"] for e in remat)
    mincut = [e for e in table if e["point"].startswith("mincut=")]
    goals["remat_dominates_mincut"] = all(
        any(r["measured_peak"] <= m["measured_peak"] and
            r["step_seconds"] <= m["step_seconds"] for r in remat)
        for m in mincut)
    checkpoint = next((e for e in table if e["point"] == "checkpoint"), None)
    if checkpoint:
        fits = [r for r in remat
                if r["measured_peak"] <= checkpoint["measured_peak"]]
        goals["remat_15pct_faster_at_checkpoint_peak"] = bool(fits) and min(
            r["step_seconds"] for r in fits) <= \
            checkpoint["step_seconds"] / 1.15
    return {"model": model, "points": table, "goals": goals}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="bert,gpt2,llama")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--hidden", type=int, help="default: the base config")
    parser.add_argument("--layers", type=int)
    parser.add_argument("--heads", type=int)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--compiler", choices=["aot_eager", "inductor"],
                        default="aot_eager", help="the forward/backward "
                        "compiler of every compiled point (default: "
                        "aot_eager's, the modules run as traced)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cuda: measured peak is "
                        "torch.cuda.max_memory_allocated")
    parser.add_argument("--remat-points", type=int, default=8)
    parser.add_argument("--mincut", default=",".join(
        str(b) for b in MIN_CUT_BUDGETS))
    parser.add_argument("--match", action=argparse.BooleanOptionalAction,
                        default=True, help="also run remat at the measured "
                        "peak of the checkpointing and each min-cut point "
                        "(default: on)")
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--json", help="write the results here (after "
                        "each model, so that a stopped run keeps them)")
    parser.add_argument("--svg", help="draw the results here: measured "
                        "peak against step time, a panel per model")
    parser.add_argument("--replot", metavar="FILE",
                        help="run nothing: print the tables and draw --svg "
                        "from an earlier --json, or from a run's output")
    parser.add_argument("--point", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rounds < 1 or args.steps < 1 or args.remat_points < 2:
        parser.error("--rounds and --steps must be at least 1, "
                     "--remat-points at least 2")
    if args.point:
        return run_point(args)
    if args.replot:
        results = load_results(args.replot)
        for summary in results:
            if summary.get("points"):
                print_table(summary)
        if args.svg:
            write_svg(args.svg, results, args)
        return 0

    results = []
    load = [os.getloadavg()]
    for model in args.models.split(","):
        print("%s: batch %d, seq %d, %d threads" % (
            model, args.batch, args.seq, args.threads), flush=True)
        probe = spawn(args, model, "probe=100%")
        if "error" in probe:
            results.append({"model": model, "error": probe["error"]})
            continue
        points = ["eager", "checkpoint"]
        points += ["mincut=%s" % b for b in args.mincut.split(",") if b]
        ladder = remat_budgets(probe, args.remat_points)
        points += ["remat=%d" % b for b in ladder]
        rows = []
        for round_index in range(args.rounds):
            order = points if round_index % 2 == 0 else points[::-1]
            for point in order:
                rows.append(spawn(args, model, point))
            if round_index == 0 and args.match:
                # The baselines' peaks do not depend on load: the first
                # round's are the budgets of the matched points.
                matched = ["remat=%d" % b for b in
                           matched_budgets(rows, probe, ladder)]
                for point in matched:
                    rows.append(spawn(args, model, point))
                points += matched
        summary = summarize(model, rows)
        summary["probe"] = probe
        summary["failed"] = [r for r in rows if "error" in r]
        results.append(summary)
        print_table(summary)
        if args.json:
            write_json(args.json, args, results, load + [os.getloadavg()])
    load.append(os.getloadavg())
    print("load average (1, 5, 15 min): at start %s, at end %s" % (
        " ".join("%.2f" % v for v in load[0]),
        " ".join("%.2f" % v for v in load[-1])))
    if args.json:
        write_json(args.json, args, results, load)
    if args.svg:
        write_svg(args.svg, results, args)


def write_json(path, args, results, load):
    with open(path, "w") as f:
        json.dump({"args": {k: v for k, v in vars(args).items()
                            if k not in ("point", "model", "replot")},
                   "load_average": load, "results": results}, f, indent=2)
        f.write("\n")


def load_results(path):
    """The results of an earlier run: its --json, or its printed output
    (each point's JSON line; the models whose run was stopped are
    summarized from the points they finished)."""
    with open(path) as f:
        text = f.read()
    try:
        return json.loads(text)["results"]
    except ValueError:
        pass
    rows = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            row = json.loads(line)
            rows.setdefault(row["model"], []).append(row)
    results = []
    for model, model_rows in rows.items():
        probes = [r for r in model_rows if r["point"].startswith("probe")]
        summary = summarize(model, [r for r in model_rows
                                    if not r["point"].startswith("probe")])
        summary["probe"] = probes[0] if probes else None
        results.append(summary)
    return results


def write_svg(path, results, args):
    title = "remat.torch vs PyTorch: batch %d, seq %d, %d threads" % (
        args.batch, args.seq, args.threads)
    if args.hidden or args.layers:
        title += ", hidden %s, layers %s" % (args.hidden or "base",
                                             args.layers or "base")
    with open(path, "w") as f:
        f.write(svg_plot(results, title))


def print_table(summary):
    print("%-18s %12s %12s %9s %8s %8s" % (
        "point", "measured", "predicted", "step s", "peak/e", "time/e"))
    for e in summary["points"]:
        print("%-18s %12d %12s %9.3f %8.3f %8.3f" % (
            e["point"], e["measured_peak"],
            e.get("predicted_peak", "-"), e["step_seconds"],
            e.get("peak_ratio", float("nan")),
            e.get("time_ratio", float("nan"))))
    for goal, met in summary["goals"].items():
        print("goal %s: %s" % (goal, "met" if met else "MISSED"))


def _svg_escape(text):
    return (str(text).replace("&", "&amp;").replace("<", "&lt;")
            .replace(">", "&gt;"))


_STYLES = {  # point kind: (colour, marker)
    "eager": ("#444444", "square"),
    "checkpoint": ("#8a5a00", "diamond"),
    "mincut": ("#c0392b", "triangle"),
    "remat": ("#1f6fb2", "circle"),
}


def _marker(shape, x, y, colour, filled=True):
    fill = colour if filled else "white"
    common = 'fill="%s" stroke="%s" stroke-width="1.2"' % (fill, colour)
    if shape == "square":
        return '<rect x="%.1f" y="%.1f" width="8" height="8" %s/>' % (
            x - 4, y - 4, common)
    if shape == "diamond":
        return '<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f" ' \
            '%s/>' % (x, y - 5, x + 5, y, x, y + 5, x - 5, y, common)
    if shape == "triangle":
        return '<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" %s/>' % (
            x, y - 5, x + 5, y + 4, x - 5, y + 4, common)
    return '<circle cx="%.1f" cy="%.1f" r="4" %s/>' % (x, y, common)


def svg_plot(results, title):
    """One panel per model: measured peak (MiB) against step time (s) of
    every point; remat's points joined in budget order, its predicted peaks
    hollow beside them."""
    panels = [r for r in results if r.get("points")]
    width, height = 460, 340
    left, right, top, bottom = 70, 20, 40, 50
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11">' % (
               width * max(1, len(panels)), height + 40)]
    out.append('<text x="10" y="18" font-size="13">%s</text>' %
               _svg_escape(title))
    for index, summary in enumerate(panels):
        ox = index * width
        points = summary["points"]
        mib = lambda b: b / 2.0 ** 20
        ys = [mib(e["measured_peak"]) for e in points]
        ys += [mib(e["predicted_peak"]) for e in points if "predicted_peak" in e]
        xs = [e["step_seconds"] for e in points]
        x0, x1 = 0.0, max(xs) * 1.08
        y0, y1 = 0.0, max(ys) * 1.08
        px = lambda x: ox + left + (x - x0) / (x1 - x0) * (width - left - right)
        py = lambda y: 40 + top + (1 - (y - y0) / (y1 - y0)) * (
            height - top - bottom)
        out.append('<text x="%.1f" y="%.1f" font-size="12">%s</text>' % (
            ox + left, 40 + top - 12, _svg_escape(summary["model"])))
        out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" '
                   'fill="none" stroke="#999"/>' % (
                       px(x0), py(y1), px(x1) - px(x0), py(y0) - py(y1)))
        for i in range(6):
            xv = x0 + (x1 - x0) * i / 5
            yv = y0 + (y1 - y0) * i / 5
            out.append('<text x="%.1f" y="%.1f" text-anchor="middle">%.2f'
                       '</text>' % (px(xv), py(y0) + 14, xv))
            out.append('<text x="%.1f" y="%.1f" text-anchor="end">%.0f'
                       '</text>' % (px(x0) - 4, py(yv) + 4, yv))
        out.append('<text x="%.1f" y="%.1f" text-anchor="middle">step time '
                   '(s, median of the steps, best round)</text>' % ((px(x0) + px(x1)) / 2, py(y0) + 30))
        out.append('<text x="%.1f" y="%.1f" transform="rotate(-90 %.1f %.1f)" '
                   'text-anchor="middle">measured peak (MiB)</text>' % (
                       ox + 16, (py(y0) + py(y1)) / 2, ox + 16,
                       (py(y0) + py(y1)) / 2))
        remat = sorted((e for e in points if e["point"].startswith("remat=")),
                       key=lambda e: -int(e["point"].split("=")[1]))
        if remat:
            out.append('<polyline fill="none" stroke="%s" points="%s"/>' % (
                _STYLES["remat"][0], " ".join(
                    "%.1f,%.1f" % (px(e["step_seconds"]),
                                   py(mib(e["measured_peak"])))
                    for e in remat)))
        for e in points:
            kind = e["point"].split("=")[0]
            colour, shape = _STYLES.get(kind, ("#000", "circle"))
            x, y = px(e["step_seconds"]), py(mib(e["measured_peak"]))
            out.append(_marker(shape, x, y, colour))
            if kind == "remat" and "predicted_peak" in e:
                out.append(_marker("circle", x, py(mib(e["predicted_peak"])),
                                   colour, filled=False))
            if kind == "mincut":
                out.append('<text x="%.1f" y="%.1f" fill="%s">%s</text>' % (
                    x + 6, y - 4, colour, e["point"].split("=")[1]))
        # Legend.
        legend = [("eager", "eager"), ("checkpoint", "HF checkpointing"),
                  ("mincut", "min-cut (activation_memory_budget)"),
                  ("remat", "remat.torch (byte budgets)")]
        for row, (kind, label) in enumerate(legend):
            colour, shape = _STYLES[kind]
            lx, ly = px(x0) + 10, py(y0) - 70 + row * 14
            out.append(_marker(shape, lx, ly, colour))
            out.append('<text x="%.1f" y="%.1f">%s</text>' % (
                lx + 10, ly + 4, _svg_escape(label)))
        lx, ly = px(x0) + 10, py(y0) - 70 + 4 * 14
        out.append(_marker("circle", lx, ly, _STYLES["remat"][0], False))
        out.append('<text x="%.1f" y="%.1f">remat predicted peak</text>' % (
            lx + 10, ly + 4))
    out.append("</svg>\n")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
