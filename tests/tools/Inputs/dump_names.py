"""Writes an ONNX model whose outputs have names that are unsafe as file
names (for remat-run --dump): a path out of the folder, a '/', a NUL, a
control byte, a leading dot, a name of 300 bytes, and names that collide
once made safe or ignoring case. Each output is x + a constant of its own,
so that the dumped files differ.

    dump_names.py OUT.onnx
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

NAMES = [
    "../../escaped",
    "keys/authorized_keys",
    "keys_authorized_keys",
    "nul\0/../../x",
    "tab\there",
    ".hidden",
    "Upper",
    "upper",
    "é" * 150,  # 300 bytes of UTF-8
]

nodes, outputs, initializers = [], [], []
for i, name in enumerate(NAMES):
    initializers.append(numpy_helper.from_array(
        np.full([2], i, dtype=np.int64), "c%d" % i))
    nodes.append(helper.make_node("Add", ["x", "c%d" % i], [name]))
    outputs.append(helper.make_tensor_value_info(name, TensorProto.INT64, [2]))
graph = helper.make_graph(
    nodes, "names", [helper.make_tensor_value_info("x", TensorProto.INT64, [2])],
    outputs, initializers)
model = helper.make_model(graph, ir_version=8,
                          opset_imports=[helper.make_opsetid("", 17)])
with open(sys.argv[1], "wb") as f:
    f.write(model.SerializeToString())
