"""Writes ONNX models with local functions (issue 39, item 8):

    make_functions.py nested PATH LEVELS FANOUT  F0 calls F1 FANOUT times, ...
    make_functions.py calls PATH COUNT           COUNT calls named "call" of
                                                 one two-node function
    make_functions.py chain PATH COUNT           the same nodes, inlined
"""
import sys

import onnx
from onnx import TensorProto, helper

OPSET = [helper.make_opsetid("", 17), helper.make_opsetid("d", 1)]


def function(name, nodes):
    return helper.make_function("d", name, ["X"], ["Y"], nodes,
                                [helper.make_opsetid("", 17)])


def chain(op, count, domain="", name=lambda i: ""):
    """COUNT nodes op from X to Y through T1, T2, ..."""
    names = ["X"] + [f"T{i}" for i in range(1, count)] + ["Y"]
    return [helper.make_node(op, [names[i]], [names[i + 1]], name(i),
                             domain=domain) for i in range(count)]


def save(path, nodes, functions):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=OPSET, functions=functions)
    model.ir_version = 8
    onnx.save_model(model, path)


def main():
    kind, path, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if kind == "nested":
        fanout = int(sys.argv[4])
        functions = [function(f"F{level}", chain(f"F{level + 1}", fanout, "d"))
                     for level in range(count)]
        functions.append(function(f"F{count}", chain("Relu", 1)))
        save(path, chain("F0", 1, "d"), functions)
    elif kind == "calls":
        body = [helper.make_node("Relu", ["X"], ["T"]),
                helper.make_node("Neg", ["T"], ["Y"])]
        save(path, chain("F", count, "d", lambda i: "call"),
             [function("F", body)])
    elif kind == "chain":
        save(path, chain("Relu", 2 * count), [])
    else:
        sys.exit(f"unknown kind {kind}")


if __name__ == "__main__":
    main()
