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
Pass --numpy to force the numpy path. The header of the output names which
one ran (reference.txt).
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
    use_torch = "--numpy" not in sys.argv
    if use_torch:
        try:
            import torch
            which = "torch %s torch.optim" % torch.__version__
        except ImportError:
            use_torch = False
    if not use_torch:
        which = "numpy %s, torch's documented formulas" % np.__version__
    init = initial()
    for name, array in init.items():
        save(name, array)
    for cfg, (kind, opts) in CONFIGS.items():
        result = (run_torch if use_torch else run_numpy)(kind, opts, init)
        for n in NAMES:
            save("ref_%s_%s" % (cfg, n), result[n])
    with open(os.path.join(HERE, "reference.txt"), "w") as f:
        f.write("reference made by %s, %d steps\n" % (which, STEPS))
        for cfg, (kind, opts) in CONFIGS.items():
            f.write("%s: %s %s\n" % (cfg, kind, opts))
    print("wrote the fixture with", which)


if __name__ == "__main__":
    main()
