"""Writes PATH (an ONNX model) whose COUNT f32[SIZE] initializers w0, w1, ...
live in external data (PATH.data) and are added to the input x in a chain:
a model that is small on disk and large in memory.

    make_external_weights.py PATH COUNT SIZE
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import convert_model_to_external_data


def main():
    path, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    inits, nodes, previous = [], [], "x"
    for i in range(count):
        inits.append(numpy_helper.from_array(
            np.full(size, i, dtype=np.float32), name=f"w{i}"))
        nodes.append(helper.make_node("Add", [previous, f"w{i}"], [f"s{i}"]))
        previous = f"s{i}"
    graph = helper.make_graph(
        nodes, "ext", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [size])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    convert_model_to_external_data(model, all_tensors_to_one_file=True,
                                   location=os.path.basename(path) + ".data",
                                   size_threshold=0)
    onnx.save_model(model, path)


if __name__ == "__main__":
    main()
