"""Per-family checks of the fixtures of tests/fixtures (see tests/tools/families.test).

For each fixture with reference values (dropout 0):
  - remat-opt imports it and builds the training step (canonicalize,
    disable-dropout,autodiff); remat-run runs one step on the CPU with the saved
    inputs; the loss must match torch's within 1e-5 relative and every gradient
    within 1e-4 relative L2 (a gradient that is zero in exact arithmetic, such as
    the attention key bias's, is compared by norm against 1e-3 of the largest
    gradient's norm: only rounding noise is left of it);
  - remat-run --strategy auto --budget 50% --check-equivalence (batch 16, seq 32,
    or batch 64 images, generated inputs, so that activations outweigh the
    weights) must give the
    same loss and gradients bit for bit, and its --explain output gives the
    segments and layer stacks remat's segment discovery found.
For an import-only fixture (training-mode dropout): the import and the
bitwise equivalence under remat (the recomputed Dropout draws the same mask).
Prints one line per fixture ending in "ok" or "FAILED ..."; exits 1 if any
failed. A fixture that fails to import (an op remat lacks) fails.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4
ZERO_FRACTION = 1e-3


class Failed(Exception):
    pass


def run(*args):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if result.returncode != 0:
        err = result.stderr.strip().splitlines()
        raise Failed((err[0] if err else f"exit {result.returncode}")[:400])
    return result.stdout + result.stderr


def load(path):
    tensor = onnx.load_tensor(str(path))
    return tensor.name, numpy_helper.to_array(tensor)


def compare_grads(expected, actual):
    """\\returns (count, worst err/limit, problems)."""
    norms = [float(np.linalg.norm(w.astype(np.float64))) for w in expected.values()]
    largest = max([n for n in norms if np.isfinite(n)] or [0.0])
    worst, bad = 0.0, []
    for name, want in expected.items():
        got = actual.get(name)
        if got is None and not np.any(want):
            # remat-run writes no gradient for a weight with no differentiable path to the
            # loss (it warns that the weight "gets no gradient"): zero, as torch's is here.
            continue
        if got is None or got.shape != want.shape:
            bad.append(f"{name} missing or misshaped")
            continue
        want64, got64 = want.astype(np.float64), got.astype(np.float64)
        if not (np.all(np.isfinite(want64)) and np.all(np.isfinite(got64))):
            bad.append(f"{name} is not finite")
            continue
        scale = max(float(np.linalg.norm(want64)), ZERO_FRACTION * largest)
        err = float(np.linalg.norm(got64 - want64))
        ratio = err / (GRAD_RTOL * scale) if scale > 0 else (0.0 if err == 0 else float("inf"))
        worst = max(worst, ratio)
        if not ratio <= 1.0:
            bad.append(f"{name} relative error {err / scale if scale else err:.2e}")
    return len(expected), worst, bad


def bind_for(fixture):
    """The symbolic dims the model's inputs declare (ViT has no seq)."""
    model = onnx.load(str(fixture / "model.onnx"), load_external_data=False)
    return {d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim}


def segments_of(text):
    """'segments S, stacks PxL@F ...' from remat's --explain output."""
    found = re.search(r"segments: (\d+); (.*)", text)
    if not found:
        raise Failed("no segment line in --explain output")
    stacks = re.findall(r"(\d+) segments? x (\d+) layers from segment (\d+)", found.group(2))
    parts = [f"{p}x{n}@{f}" for p, n, f in stacks]
    return f"segments {found.group(1)}, layer stacks " + (" ".join(parts) if parts else "none")


def equivalence(remat_run, model, dims, work, name):
    """remat-run --check-equivalence under auto at 50% of the step's peak without remat, or
    at the smallest feasible planned peak where 50% has no plan (a small CNN, whose input
    images and first convolution's outputs are most of its peak); \\returns 'remat auto B
    bitwise equal; segments ...'."""
    # Images have no seq: a larger batch gives them as much activation memory.
    sizes = (("batch", 16), ("seq", 32)) if "seq" in dims else (("batch", 64),)
    bind = ",".join(f"{k}={v}" for k, v in sizes if k in dims)
    def check_at(budget):
        return subprocess.run([str(remat_run), str(model), "--bind", bind, "--strategy",
                               "auto", "--budget", budget, "--check-equivalence", "--explain",
                               "--threads", "2"], capture_output=True, text=True)

    budget = "50%"
    done = check_at(budget)
    floor = re.search(r"smallest feasible planned peak is [^(]*\((\d+) B", done.stderr)
    if done.returncode != 0 and floor:
        budget = floor.group(1)
        done = check_at(budget)
    if done.returncode != 0:
        err = done.stderr.strip().splitlines()
        raise Failed((err[-1] if err else f"exit {done.returncode}")[:400])
    out = done.stdout + done.stderr
    if "bitwise equal" not in out:
        raise Failed("remat changed the step: " + out.strip().splitlines()[-1][:300])
    label = budget if budget.endswith("%") else "at its floor"
    return f"remat auto {label} bitwise equal; {segments_of(out)}"


def bind_small(dims, batch=2):
    """The --bind of the fixtures' inputs (batch 2, seq 16; \\p batch where they have another)."""
    return ",".join(f"{k}={v}" for k, v in (("batch", batch), ("seq", 16)) if k in dims)


def train_step(remat_opt, remat_run, fx, work, name, freeze=(), padding=(), scalars=(),
               batch=2):
    """One CPU training step against torch's loss and gradients; \\returns a summary.
    \\p freeze names the initializers torch does not train (remat-opt --freeze), \\p padding
    gives (initializer, row) for the embeddings torch looks up with a padding_idx
    (remat-opt --padding-idx), \\p scalars the one-element initializers torch trains
    (remat-opt --scalar-weights), \\p batch the batch of the fixture's inputs."""
    params = json.loads((fx / "params.json").read_text())
    graph = work / f"{name}.train.rir"
    run(remat_opt, fx / "model.onnx", "--bind", bind_small(bind_for(fx), batch),
        "-p", "canonicalize,disable-dropout,autodiff", "-o", graph,
        *(["--freeze", ",".join(freeze)] if freeze else []),
        *(["--padding-idx", ",".join(f"{n}={r}" for n, r in padding)] if padding else []),
        *(["--scalar-weights", ",".join(scalars)] if scalars else []))
    inputs = []
    for pb in sorted((fx / "inputs").glob("*.pb")):
        inputs += ["--input", f"{pb.stem}={pb}"]
    out = work / f"{name}.out"
    run(remat_run, graph, *inputs, "--threads", "2", "--dump", out)
    remat = dict(load(pb) for pb in out.glob("*.pb"))
    want_loss = float(np.asarray(load(fx / "loss.pb")[1]).reshape(-1)[0])
    got_loss = float(np.asarray(remat["loss"]).reshape(-1)[0])
    loss_rel = abs(got_loss - want_loss) / max(abs(want_loss), 1e-30)
    if not loss_rel <= LOSS_RTOL:
        raise Failed(f"loss {got_loss:.8f} vs torch {want_loss:.8f} (rel {loss_rel:.1e})")
    torch_grads = {init: load(fx / e["grad_file"])[1] for init, e in params["initializers"].items()}
    remat_grads = {n[: -len("_grad")]: v for n, v in remat.items() if n.endswith("_grad")}
    count, worst, bad = compare_grads(torch_grads, remat_grads)
    if bad:
        raise Failed("gradients: " + "; ".join(bad[:4]))
    return f"loss rel {loss_rel:.1e}, {count} gradients worst err/limit {worst:.2f}"


def fixture_batch(fx):
    """The batch of the fixture's inputs (2, or 16 images where batch norms need it)."""
    first = sorted((fx / "inputs").glob("*.pb"))[0]
    return int(load(first)[1].shape[0])


def check(remat_opt, remat_run, root, work, name):
    fx = Path(root) / name
    params = json.loads((fx / "params.json").read_text())
    dims = bind_for(fx)
    model = fx / "model.onnx"
    if params.get("import_only"):
        run(remat_opt, model, "--bind", bind_small(dims), "-p", "canonicalize",
            "-o", work / f"{name}.rir")
        return "import ok; " + equivalence(remat_run, model, dims, work, name)
    step = train_step(remat_opt, remat_run, fx, work, name, batch=fixture_batch(fx))
    seg = equivalence(remat_run, model, dims, work, name)
    return f"{step}; {seg}"


def main():
    remat_opt, remat_run, work, root = sys.argv[1:5]
    work = Path(work)
    ok = True
    for name in sys.argv[5:]:
        try:
            print(f"{name}: {check(remat_opt, remat_run, root, work, name)} ok", flush=True)
        except Failed as e:
            ok = False
            print(f"{name}: FAILED {e}", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
