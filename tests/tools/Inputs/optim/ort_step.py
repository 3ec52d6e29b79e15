#!/usr/bin/env python3
"""ort_step.py STEP.onnx DUMP_DIR: runs the training step remat-opt exported
(forward, backward and update) in onnxruntime, feeding every graph input from
Inputs/optim/<name>.pb, and compares each output with remat-run's
DUMP_DIR/<output>.pb of one step on the same inputs, within 1e-5 relative
(kernels differ, so not bitwise)."""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def load(path):
    return numpy_helper.to_array(onnx.load_tensor(path))


def main():
    step, dump = sys.argv[1], sys.argv[2]
    model = onnx.load(step)
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(step, providers=["CPUExecutionProvider"])
    feeds = {i.name: load(os.path.join(HERE, i.name + ".pb"))
             for i in session.get_inputs()}
    names = [o.name for o in session.get_outputs()]
    outputs = session.run(names, feeds)
    ok = True
    updates = 0
    for name, got in zip(names, outputs):
        ref = load(os.path.join(dump, name + ".pb"))
        scale = max(np.abs(ref).max(), 1e-30)
        rel = np.abs(got - ref).max() / scale
        good = got.shape == ref.shape and rel <= 1e-5
        ok &= good
        updates += name.endswith("_new")
        if not good:
            print("%s: relative difference %.2e: MISMATCH" % (name, rel))
    print("onnxruntime ran the step: %d outputs, %d updates, fed %s: %s"
          % (len(names), updates, ",".join(sorted(feeds)), "ok" if ok else "MISMATCH"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
