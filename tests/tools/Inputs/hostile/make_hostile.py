"""Writes the small ONNX and TensorProto files of tests/tools/hostile.test:
each declares sizes far larger than the data it holds (or a bad external-data
location). Run with the venv's python (it needs the onnx package):
    .venv/bin/python tests/tools/Inputs/hostile/make_hostile.py
"""
import os

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))


def save(model, name):
    model.ir_version = 8
    onnx.save(model, os.path.join(HERE, name))


def relu_model(input_dims, initializer=None, nodes=None, name="hostile"):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, input_dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes or [helper.make_node("Relu", ["x"], ["y"])],
                              name, [x], [y],
                              initializer=initializer or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


# 1. An input of 1e9 x 8 floats (32 GB) that remat-run would generate.
save(relu_model([1000000000, 8]), "huge-input.onnx")

# 2. An initializer that declares 1e12 floats (4 TB) and holds none.
w = TensorProto()
w.name = "w"
w.data_type = TensorProto.FLOAT
w.dims.extend([1000000, 1000000])
save(relu_model([4], initializer=[w],
                nodes=[helper.make_node("Add", ["x", "w"], ["y"])]),
     "huge-initializer.onnx")

# 2b. A Constant whose value attribute declares 1e12 floats and holds none.
c = TensorProto()
c.data_type = TensorProto.FLOAT
c.dims.extend([1000000, 1000000])
save(relu_model([4], nodes=[
    helper.make_node("Constant", [], ["c"], value=c),
    helper.make_node("Add", ["x", "c"], ["y"])]), "huge-constant.onnx")

# 3. A TensorProto file that declares 1e12 floats and holds none.
t = TensorProto()
t.name = "x"
t.data_type = TensorProto.FLOAT
t.dims.extend([1000000, 1000000])
with open(os.path.join(HERE, "huge-tensor.pb"), "wb") as f:
    f.write(t.SerializeToString())

# 10. External data whose location has a NUL byte after an innocent name.
e = TensorProto()
e.name = "w"
e.data_type = TensorProto.FLOAT
e.dims.extend([4])
e.data_location = TensorProto.EXTERNAL
entry = e.external_data.add()
entry.key = "location"
entry.value = "weights.bin\0/../../etc/passwd"
save(relu_model([4], initializer=[e],
                nodes=[helper.make_node("Add", ["x", "w"], ["y"])]),
     "nul-location.onnx")


# Names that are not valid UTF-8. Python's protobuf refuses to set such a
# string, so the model is written with a marker of the same length that is
# then replaced in the serialized bytes.
def save_bad_utf8(model, name, marker, raw):
    assert len(marker) == len(raw)
    model.ir_version = 8
    data = model.SerializeToString()
    assert data.count(marker.encode()) >= 1, name
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data.replace(marker.encode(), raw))


# A node name (`relu\xff`) and an initializer name (`w\xc3(`, a broken
# two-byte sequence) that every node refers to.
save_bad_utf8(relu_model([4], nodes=[helper.make_node("Relu", ["x"], ["y"], name="relu@")]),
              "bad-utf8-node.onnx", "relu@", b"relu\xff")
save_bad_utf8(relu_model([4], initializer=[helper.make_tensor("w@@", TensorProto.FLOAT, [4], [1, 2, 3, 4])],
                         nodes=[helper.make_node("Add", ["x", "w@@"], ["y"])]),
              "bad-utf8-initializer.onnx", "w@@", b"w\xc3(")
