"""Forward-loss cross-checks of remat's CPU runtime (see
tests/tools/crosscheck.test). Prints one line per model with the two losses
and their relative difference; exits 1 when one is over the tolerance."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

RTOL = 1e-5


def run(*args):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"command failed: {' '.join(map(str, args))}\n{result.stderr}")
    return result.stdout


def load(path):
    return numpy_helper.to_array(onnx.load_tensor(str(path)))


def compare(label, expected, actual):
    expected = float(np.asarray(expected).reshape(-1)[0])
    actual = float(np.asarray(actual).reshape(-1)[0])
    rel = abs(actual - expected) / max(abs(expected), 1e-30)
    verdict = "ok" if rel <= RTOL else "MISMATCH"
    print(f"{label}: reference {float(expected):.8f} remat {float(actual):.8f} "
          f"rel {rel:.1e} {verdict}")
    return rel <= RTOL


def fixtures(remat_opt, remat_run, root, work, names):
    ok = True
    for name in names:
        fixture = Path(root) / name
        graph = work / f"{name}.rir"
        # torch's saved loss is computed without dropout (fixtures README).
        run(remat_opt, fixture / "model.onnx", "--bind", "batch=2,seq=16",
            "-p", "canonicalize,disable-dropout,dce", "-o", graph)
        inputs = []
        for pb in sorted((fixture / "inputs").glob("*.pb")):
            inputs += ["--input", f"{pb.stem}={pb}"]
        out = work / f"{name}.out"
        run(remat_run, graph, *inputs, "--forward", "--threads", "2", "--dump", out)
        ok &= compare(f"{name} vs torch", load(fixture / "loss.pb"),
                      load(out / "loss.pb"))
    return ok


def bert_tiny(remat_opt, remat_run, config, work):
    import onnxruntime as ort

    model = work / "bert-tiny.onnx"
    run(remat_opt, config, "--bind", "batch=2,seq=16", "-o", model)
    rng = np.random.default_rng(0)
    feeds = {
        "input_ids": rng.integers(0, 30522, (2, 16), dtype=np.int64),
        "token_type_ids": rng.integers(0, 2, (2, 16), dtype=np.int64),
        "attention_mask": np.ones((2, 16), dtype=np.int64),
        "labels": rng.integers(0, 30522, (2, 16), dtype=np.int64),
    }
    feeds["attention_mask"][1, 12:] = 0
    feeds["labels"][:, ::3] = -100
    args = []
    for name, value in feeds.items():
        path = work / f"tiny.{name}.pb"
        path.write_bytes(numpy_helper.from_array(value, name).SerializeToString())
        args += ["--input", f"{name}={path}"]
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(model), options,
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    expected = session.run(None, feeds)[names.index("loss")]
    out = work / "tiny.out"
    run(remat_run, config, "--bind", "batch=2,seq=16", *args, "--forward", "--threads", "2",
        "--dump", out)
    return compare("bert-tiny vs onnxruntime", expected, load(out / "loss.pb"))


def main():
    mode, remat_opt, remat_run, work = sys.argv[1:5]
    work = Path(work)
    if mode == "fixtures":
        ok = fixtures(remat_opt, remat_run, sys.argv[5], work, sys.argv[6:])
    else:
        ok = bert_tiny(remat_opt, remat_run, sys.argv[5], work)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
