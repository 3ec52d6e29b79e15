"""Gradient cross-checks of autodiff (see tests/tools/autodiff-crosscheck.test).

For each fixture: the training graph that remat builds
(canonicalize,disable-dropout,autodiff) is run by remat-run with the saved
inputs, and every `<initializer>_grad` output is compared with torch's
gradient (grads/*.pb); the same training graph is written as ONNX, run by
onnxruntime, and its gradients are compared with remat's. Prints one line per
fixture and check; exits 1 on a mismatch."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

# Each gradient is compared by norm: ||got - want|| <= NORM_RTOL * scale,
# where scale is ||want||, or, for a gradient that is zero in exact
# arithmetic (the key bias's, through softmax's shift invariance) and so only
# rounding noise, ZERO_FRACTION of the largest gradient's norm. A NaN or Inf
# anywhere is a mismatch (a comparison with NaN is false, so it must be
# tested for).
NORM_RTOL = 1e-5
ZERO_FRACTION = 1e-3


def run(*args):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"command failed: {' '.join(map(str, args))}\n{result.stderr}")
    return result.stdout


def load(path):
    tensor = onnx.load_tensor(str(path))
    return tensor.name, numpy_helper.to_array(tensor)


def compare(label, expected, actual):
    """expected, actual: name -> array. Every expected name must be there."""
    worst, bad = 0.0, []
    norms = [float(np.linalg.norm(w.astype(np.float64))) for w in expected.values()]
    largest = max([n for n in norms if np.isfinite(n)] or [0.0])
    for name, want in expected.items():
        got = actual.get(name)
        if got is None or got.shape != want.shape:
            bad.append(f"{name} missing or misshaped")
            continue
        want64, got64 = want.astype(np.float64), got.astype(np.float64)
        if not (np.all(np.isfinite(want64)) and np.all(np.isfinite(got64))):
            bad.append(f"{name} is not finite")
            worst = float("inf")
            continue
        scale = max(float(np.linalg.norm(want64)), ZERO_FRACTION * largest)
        err = float(np.linalg.norm(got64 - want64))
        ratio = err / (NORM_RTOL * scale) if scale > 0 else (0.0 if err == 0 else float("inf"))
        worst = max(worst, ratio)
        if not ratio <= 1.0:
            bad.append(f"{name} relative error {err / scale if scale else err:.2e}")
    verdict = "ok" if not bad else "MISMATCH " + "; ".join(bad[:5])
    print(f"{label}: {len(expected)} gradients, worst err/limit {worst:.2f} {verdict}")
    return not bad


def fixture(remat_opt, remat_run, root, work, name):
    import onnxruntime as ort

    fx = Path(root) / name
    params = json.loads((fx / "params.json").read_text())
    torch_grads = {}
    for init, entry in params["initializers"].items():
        _, value = load(fx / entry["grad_file"])
        torch_grads[init] = value
    pipeline = ["--bind", "batch=2,seq=16", "-p", "canonicalize,disable-dropout,autodiff"]
    graph = work / f"{name}.train.rir"
    run(remat_opt, fx / "model.onnx", *pipeline, "-o", graph)
    inputs, feeds = [], {}
    for pb in sorted((fx / "inputs").glob("*.pb")):
        input_name, value = load(pb)
        feeds[input_name] = value
        inputs += ["--input", f"{input_name}={pb}"]
    out = work / f"{name}.out"
    run(remat_run, graph, *inputs, "--threads", "2", "--dump", out)
    remat = dict(load(pb) for pb in out.glob("*.pb"))
    remat_grads = {n[: -len("_grad")]: v for n, v in remat.items() if n.endswith("_grad")}
    ok = compare(f"{name} remat vs torch", torch_grads, remat_grads)

    model = work / f"{name}.train.onnx"
    run(remat_opt, fx / "model.onnx", *pipeline, "-o", model)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    results = session.run(None, {k: v for k, v in feeds.items() if k in wanted})
    ort_out = {o.name: r for o, r in zip(session.get_outputs(), results)}
    ok &= compare(f"{name} onnxruntime vs remat",
                  {n: v for n, v in remat.items() if n.endswith("_grad")}, ort_out)
    return ok


def main():
    remat_opt, remat_run, work, root = sys.argv[1:5]
    work = Path(work)
    ok = True
    for name in sys.argv[5:]:
        ok &= fixture(remat_opt, remat_run, root, work, name)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
