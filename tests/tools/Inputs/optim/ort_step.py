#!/usr/bin/env python3
"""ort_step.py STEP.onnx DUMP_DIR [STEPS]: runs the training step remat-opt exported
(forward, backward and update) in onnxruntime, feeding every graph input from
Inputs/optim/<name>.pb, and compares each output with remat-run's
DUMP_DIR/<output>.pb of one step on the same inputs, within 1e-5 relative
(kernels differ, so not bitwise). With STEPS > 1 the new weights and
optimizer state of each step are fed to the next, as a training loop would."""
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
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    model = onnx.load(step)
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(step, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    # Inputs with a file are fed from it; the others (optimizer state) start
    # from their initializers, and after each step every input with an
    # `<input>_new` output is fed its new value.
    initial = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    feeds = {}
    # onnxruntime lists inputs with an initializer as overridable
    # initializers, not as inputs; both can be fed.
    for i in session.get_inputs() + session.get_overridable_initializers():
        path = os.path.join(HERE, i.name + ".pb")
        feeds[i.name] = load(path) if os.path.exists(path) else initial[i.name]
    for _ in range(steps):
        outputs = session.run(names, feeds)
        for name, value in zip(names, outputs):
            if name.endswith("_new") and name[:-4] in feeds:
                feeds[name[:-4]] = value
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
    print("onnxruntime ran %d step%s: %d outputs, %d updates, fed %s: %s"
          % (steps, "" if steps == 1 else "s", len(names), updates,
             ",".join(sorted(feeds)), "ok" if ok else "MISMATCH"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
