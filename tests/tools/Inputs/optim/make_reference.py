#!/usr/bin/env python3
"""Writes the optimizer fixture of tests/tools/optimizer.test.

The model is mlp.rir: y = tanh(x @ w1 + b1) @ w2, loss = sum(y * y). This
script writes its initial tensors (x.pb, w1.pb, b1.pb, w2.pb) and, for each
optimizer configuration below, the weights after three steps (ref_<cfg>_<w>.pb).

With torch installed the reference is torch.optim itself (autograd gradients,
torch.optim.AdamW / torch.optim.SGD). Without it, numpy computes the same
steps from torch's documented single-tensor formulas (float32 throughout,
bias corrections in float64 as torch computes them in Python floats):
  sgd:   d = g + wd*w; buf = momentum*buf + d (buf = d at step 1); w -= lr*buf
  adamw: w *= 1 - lr*wd; m = m + (1-b1)*(g - m); v = b2*v + (1-b2)*g*g;
         w -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
Pass --numpy to force the numpy path; --torch-python PYTHON runs torch.optim
in another interpreter (a venv with torch but without onnx). reference.txt
names which one ran and, with torch, how far the numpy formulas are from it.
Made with: .venv/bin/python make_reference.py --torch-python .venv-peers/bin/python
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = {
    # name: (kind, options)
    "adamw": ("adamw", dict(lr=0.01, weight_decay=0.1, betas=(0.9, 0.999), eps=1e-8)),
    "sgd": ("sgd", dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
}
STEPS = 3
NAMES = ["w1", "b1", "w2"]


def initial():
    rng = np.random.default_rng(14)
    return {
        "x": rng.standard_normal((4, 8)).astype(np.float32),
        "w1": (0.3 * rng.standard_normal((8, 16))).astype(np.float32),
        "b1": (0.1 * rng.standard_normal(16)).astype(np.float32),
        "w2": (0.3 * rng.standard_normal((16, 3))).astype(np.float32),
    }


def grads_numpy(p, x):
    h = x @ p["w1"] + p["b1"]
    a = np.tanh(h)
    y = a @ p["w2"]
    dy = 2 * y
    dw2 = a.T @ dy
    dh = (dy @ p["w2"].T) * (1 - a * a)
    return {"w1": x.T @ dh, "b1": dh.sum(0), "w2": dw2}


def run_numpy(kind, opts, init):
    p = {n: init[n].copy() for n in NAMES}
    state = {n: [np.zeros_like(p[n]), np.zeros_like(p[n])] for n in NAMES}
    f32 = np.float32
    for t in range(1, STEPS + 1):
        g = grads_numpy(p, init["x"])
        for n in NAMES:
            w, gr = p[n], g[n].astype(f32)
            if kind == "adamw":
                lr, wd = opts["lr"], opts["weight_decay"]
                b1, b2 = opts["betas"]
                w = w * f32(1 - lr * wd)
                m = state[n][0] + (gr - state[n][0]) * f32(1 - b1)
                v = state[n][1] * f32(b2) + gr * f32(1 - b2) * gr
                step_size = f32(lr / (1 - b1 ** t))
                bc2_sqrt = f32((1 - b2 ** t) ** 0.5)
                denom = np.sqrt(v) / bc2_sqrt + f32(opts["eps"])
                p[n] = (w - (m / denom) * step_size).astype(f32)
                state[n] = [m, v]
            else:
                d = gr + w * f32(opts["weight_decay"])
                buf = state[n][0] * f32(opts["momentum"]) + d
                p[n] = (w - buf * f32(opts["lr"])).astype(f32)
                state[n][0] = buf
    return p


TORCH_CHILD = r"""
import sys, numpy as np, torch
data = dict(np.load(sys.argv[1]))
kind, out = sys.argv[2], sys.argv[3]
opts = eval(sys.argv[4])
names = ["w1", "b1", "w2"]
p = {n: torch.tensor(data[n], requires_grad=True) for n in names}
x = torch.tensor(data["x"])
params = [p[n] for n in names]
opt = (torch.optim.AdamW(params, **opts) if kind == "adamw"
       else torch.optim.SGD(params, **opts))
for _ in range(int(sys.argv[5])):
    opt.zero_grad()
    y = torch.tanh(x @ p["w1"] + p["b1"]) @ p["w2"]
    (y * y).sum().backward()
    opt.step()
np.savez(out, **{n: p[n].detach().numpy() for n in names})
print(torch.__version__)
"""


def run_torch_child(python, kind, opts, init):
    """Runs torch.optim in \p python (a venv with torch but without onnx)."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
        np.savez(src, **init)
        version = subprocess.run(
            [python, "-c", TORCH_CHILD, src, kind, out, repr(opts), str(STEPS)],
            check=True, capture_output=True, text=True).stdout.strip()
        return dict(np.load(out)), version


def run_torch(kind, opts, init):
    import torch
    p = {n: torch.tensor(init[n], requires_grad=True) for n in NAMES}
    x = torch.tensor(init["x"])
    params = [p[n] for n in NAMES]
    opt = (torch.optim.AdamW(params, **opts) if kind == "adamw"
           else torch.optim.SGD(params, **opts))
    for _ in range(STEPS):
        opt.zero_grad()
        y = torch.tanh(x @ p["w1"] + p["b1"]) @ p["w2"]
        (y * y).sum().backward()
        opt.step()
    return {n: p[n].detach().numpy() for n in NAMES}


def save(name, array):
    onnx.save_tensor(numpy_helper.from_array(np.ascontiguousarray(array), name),
                     os.path.join(HERE, name + ".pb"))


def main():
    """make_reference.py [--numpy] [--torch-python PYTHON]: PYTHON runs
    torch.optim when this interpreter has no torch (a venv without onnx)."""
    args = sys.argv[1:]
    torch_python = args[args.index("--torch-python") + 1] if "--torch-python" in args else None
    mode = "numpy"
    if "--numpy" not in args:
        try:
            import torch  # noqa: F401
            mode = "torch"
        except ImportError:
            mode = "child" if torch_python else "numpy"
    init = initial()
    for name, array in init.items():
        save(name, array)
    lines = []
    which = "numpy %s, torch's documented formulas" % np.__version__
    for cfg, (kind, opts) in CONFIGS.items():
        by_numpy = run_numpy(kind, opts, init)
        result = by_numpy
        if mode == "torch":
            import torch
            result, which = run_torch(kind, opts, init), "torch %s torch.optim" % torch.__version__
        elif mode == "child":
            result, version = run_torch_child(torch_python, kind, opts, init)
            which = "torch %s torch.optim" % version
        for n in NAMES:
            save("ref_%s_%s" % (cfg, n), result[n])
        if mode != "numpy":
            worst = max(np.abs(by_numpy[n] - result[n]).max() / np.abs(result[n]).max()
                        for n in NAMES)
            lines.append("%s: numpy formulas vs torch.optim: max relative "
                         "difference %.2e\n" % (cfg, worst))
    with open(os.path.join(HERE, "reference.txt"), "w") as f:
        f.write("reference made by %s, %d steps\n" % (which, STEPS))
        for cfg, (kind, opts) in CONFIGS.items():
            f.write("%s: %s %s\n" % (cfg, kind, opts))
        f.writelines(lines)
    print("wrote the fixture with", which)


if __name__ == "__main__":
    main()
