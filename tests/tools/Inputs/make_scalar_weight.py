"""Writes scalar_weight.onnx for scalar-weights.test: loss = mean((x @ W) * alpha + eps),
where W is a [4, 3] initializer, act.alpha a one-element initializer torch would train (an
activation's learned slope) and eps a one-element constant, as exporters write epsilon.
With --check DUMP, compares remat-run's dumped alpha gradient with numpy's mean(x @ W).

usage: make_scalar_weight.py OUT.onnx X.pb     (the model, and an input x of [2, 4])
       make_scalar_weight.py --check DUMP_DIR X.pb
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

W = np.arange(12, dtype=np.float32).reshape(4, 3) / 10


def write(path, x_path):
    x = np.array([[1, -2, 3, 0.5], [0.25, 4, -1, 2]], np.float32)
    onnx.save_tensor(numpy_helper.from_array(x, "x"), x_path)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]),
         helper.make_node("Mul", ["h", "act.alpha"], ["s"]),
         helper.make_node("Add", ["s", "eps"], ["t"]),
         helper.make_node("ReduceMean", ["t"], ["loss"], keepdims=0)],
        "scalar_weight",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(W, "W"),
         numpy_helper.from_array(np.array([0.5], np.float32), "act.alpha"),
         numpy_helper.from_array(np.array([1e-5], np.float32), "eps")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, path)


def check(dump, x_file):
    x = numpy_helper.to_array(onnx.load_tensor(x_file))
    got = numpy_helper.to_array(onnx.load_tensor(f"{dump}/act.alpha_grad.pb"))
    expected = np.mean(x.astype(np.float64) @ W.astype(np.float64))
    print(f"alpha_grad {got.reshape(-1)[0]:.6f} numpy {expected:.6f} "
          f"rel {abs(got.reshape(-1)[0] - expected) / abs(expected):.1e}")


if __name__ == "__main__":
    if sys.argv[1] == "--check":
        check(sys.argv[2], sys.argv[3])
    else:
        write(sys.argv[1], sys.argv[2])
