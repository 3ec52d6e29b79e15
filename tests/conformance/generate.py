#!/usr/bin/env python3
"""Writes ONNX's backend node test cases for the ops remat supports.

For every case of onnx.backend.test.case.node.collect_testcases() whose nodes
are all default-domain ops that remat imports (the OP(Name, "", ...) entries
of ir/Ops.def, plus the ops the importer converts), this writes what
`python -m onnx.backend.test.cmd_tools generate-data` writes:

    OUT/<test_name>/model.onnx
    OUT/<test_name>/test_data_set_0/input_<i>.pb, output_<i>.pb

and OUT/cases.txt, one case name a line. Cases left out are counted by reason
on stderr, so that nothing is dropped unseen.

remat compiles static shapes: inputs that decide a result's shape (Reshape's
shape, Slice's starts, the axes of Squeeze, ...; STATIC_OPERANDS below) are
written as initializers holding the case's data, as --bind fixes symbolic
dims; the other inputs stay inputs.

ONNX generates each case at the newest opset of its op (Cast at 28, Reshape
at 25, ...), while remat imports opsets 13-20. Where every op of a case only
gained types (int4, float8, ...) or an attribute the case leaves at its
default after opset 20 (RETARGET below), the case is written with opset 20
and IR version 9 instead: the semantics the case checks are those of opset
20. So are cases above opset 20 whose ops did not change since opset 20 (an
expanded function at opset 21 that uses Div). Other cases above opset 20 are
left out. Cases below opset 13 (And at opset 7) move up to opset 13 when
their ops did not change in between; otherwise they stay as they are, and
the importer's error lists them in unsupported.txt.

Takes about 20 s (most of it ONNX computing the expected outputs with numpy).
"""

import argparse
import collections
import os
import re
import shutil
import sys
import time

MIN_OPSET = 13
MAX_OPSET = 20
# The IR versions that opsets 13 and 20 came with.
MIN_IR_VERSION = 7
RETARGET_IR_VERSION = 9

# Operands that decide the shape of a result (or, for GatherND, that the
# importer rewrites): remat compiles static shapes, so these must be
# constants. ONNX's cases feed them as graph inputs; such inputs (and
# anything computing these operands from inputs) are turned into
# initializers holding the case's input data, as --bind does for symbolic
# dims. {op: operand indices}
STATIC_OPERANDS = {
    "ConstantOfShape": (0,),
    "DFT": (1, 2),
    "Expand": (1,),
    "GatherND": (1,),
    "OneHot": (1,),
    "Pad": (1, 3),
    "Range": (0, 1, 2),
    "ReduceL2": (1,),
    "ReduceLogSumExp": (1,),
    "ReduceMax": (1,),
    "ReduceMean": (1,),
    "ReduceSum": (1,),
    "Reshape": (1,),
    "Resize": (1, 2, 3),
    "ScatterND": (1,),
    "Slice": (1, 2, 3, 4),
    "Split": (1,),
    "Squeeze": (1,),
    "Tile": (1,),
    "TopK": (1,),
    "Unsqueeze": (1,),
}

# Ops the importer accepts although Ops.def does not list them under the
# default domain: it converts them (OnnxImporter.cpp, Note [Converter
# table]).
IMPORTER_CONVERSIONS = {
    "Flatten": "converted to Reshape",
    "GatherND": "converted to Reshape + Gather (constant indices only)",
    "Gelu": "imported as remat.Gelu (opset 20)",
    "CastLike": "converted to Cast to the second input's dtype",
    "ScatterND": "converted to Reshape + ScatterElements (constant indices "
                 "only)",
    "Einsum": "lowered to Expand, ReduceSum, Transpose, Reshape and MatMul "
              "(no repeated subscript within one operand)",
    "GlobalAveragePool": "converted to ReduceMean over the spatial dims",
    "GlobalMaxPool": "converted to ReduceMax over the spatial dims",
    "BatchNormalization": "converted to its statistics (training_mode 1: the "
                          "batch's), Sub, Div, Mul and Add",
    "InstanceNormalization": "converted to its statistics, Sub, Div, Mul and "
                             "Add",
    "DFT": "converted to a MatMul by the transform's constant matrix "
           "(constant dft_length and axis)",
    "Resize": "converted to a Gather or a MatMul by constant weights per "
              "resized axis (constant roi, scales and sizes)",
}

# Ops whose versions after opset 20 change nothing a case at opset 20 could
# not express: new element types, or a new attribute the case must leave
# unset (checked per node against the opset-20 schema). Such cases are
# retargeted to opset 20.
RETARGET = {
    "Acos": "22 adds bfloat16",
    "AveragePool": "22 adds bfloat16",
    "Cast": "21-25 add 4-bit, 2-bit and float8e8m0 types; 'round_mode' (25) "
            "only affects float8/float4",
    "CastLike": "21-25 add 4-bit, 2-bit and float8e8m0 types",
    "Constant": "21-25 add types",
    "ConstantOfShape": "21-25 add types",
    "Conv": "22 adds bfloat16",
    "ConvTranspose": "22 adds bfloat16",
    "Cos": "22 adds bfloat16",
    "Dropout": "22 adds bfloat16 and float8 types",
    "Einsum": "28 adds bfloat16",
    "EyeLike": "22 adds bfloat16",
    "Flatten": "21-25 add types",
    "GlobalAveragePool": "22 adds bfloat16",
    "GlobalMaxPool": "22 adds bfloat16",
    "InstanceNormalization": "22 adds bfloat16",
    "Identity": "21-25 add types",
    "MaxPool": "22 adds bfloat16",
    "Mod": "28 allows floating-point inputs with fmod=0 (A - floor(A/B)*B)",
    "OneHot": "28 adds bfloat16 values",
    "Range": "27 adds float16/bfloat16 and 'stash_type'",
    "Pad": "21-25 add types",
    "ReduceLogSumExp": "28 keeps the float types only (same semantics)",
    "Reshape": "21-25 add types",
    "Shape": "21-25 add types",
    "Sin": "22 adds bfloat16",
    "Softplus": "22 adds bfloat16",
    "Squeeze": "21-25 add types",
    "TopK": "24 adds bfloat16",
    "Transpose": "21-25 add types",
    "Unsqueeze": "21-25 add types",
}


def read_ops(ops_def):
    ops = set()
    with open(ops_def) as f:
        for line in f:
            m = re.match(r'\s*OP\((\w+),\s*"",', line)
            if m:
                ops.add(m.group(1))
    if not ops:
        sys.exit(f"error: no default-domain ops found in '{ops_def}'")
    return ops


def default_opset(model):
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            return opset.version
    return None


def retarget(model, onnx):
    """Sets the model's default opset to MAX_OPSET if every node allows it.
    Returns None on success, else why not."""
    version = default_opset(model)
    for node in model.graph.node:
        schema = onnx.defs.get_schema(node.op_type, MAX_OPSET)
        unchanged = onnx.defs.get_schema(
            node.op_type, version).since_version == schema.since_version
        if not unchanged and node.op_type not in RETARGET:
            return f"{node.op_type} changed after opset {MAX_OPSET}"
        for attr in node.attribute:
            if attr.name not in schema.attributes:
                return (f"attribute '{attr.name}' of {node.op_type} is new "
                        f"after opset {MAX_OPSET}")
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            opset.version = MAX_OPSET
    model.ir_version = RETARGET_IR_VERSION
    return None


def retarget_up(model, onnx):
    """Sets an opset below MIN_OPSET to MIN_OPSET when no op of the model
    changed in between (And at opset 7 is And at opset 13)."""
    version = default_opset(model)
    for node in model.graph.node:
        if onnx.defs.get_schema(node.op_type, version).since_version != \
                onnx.defs.get_schema(node.op_type, MIN_OPSET).since_version:
            return False
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            opset.version = MIN_OPSET
    model.ir_version = max(model.ir_version, MIN_IR_VERSION)
    return True


def bind_static_inputs(case, numpy_helper, TensorProto):
    """Turns the graph inputs that STATIC_OPERANDS reach (through the nodes
    that compute them) into initializers with the case's data. Returns
    their names."""
    graph = case.model.graph
    producer = {out: node for node in graph.node for out in node.output}
    static = set()
    work = [node.input[i] for node in graph.node
            for i in STATIC_OPERANDS.get(node.op_type, ())
            if i < len(node.input) and node.input[i]]
    while work:
        name = work.pop()
        if name in static:
            continue
        static.add(name)
        if name in producer:
            work.extend(x for x in producer[name].input if x)
    input_names = [info.name for info in graph.input]
    bound = [name for name in input_names if name in static]
    if not bound:
        return bound
    data_sets = []
    for inputs, outputs in case.data_sets:
        kept = []
        for name, value in zip(input_names, inputs):
            if name not in static:
                kept.append(value)
                continue
            if isinstance(value, TensorProto):
                proto = TensorProto()
                proto.CopyFrom(value)
                proto.name = name
            else:
                proto = numpy_helper.from_array(value, name)
            # One data set per case: the first one's values are bound.
            if len(data_sets) == 0:
                graph.initializer.append(proto)
        data_sets.append((kept, outputs))
    kept_infos = [info for info in graph.input if info.name not in static]
    del graph.input[:]
    graph.input.extend(kept_infos)
    case.data_sets[:] = data_sets[:1]
    return bound


def select(case, ops, onnx):
    """Returns None if the case is written (retargeted if needed), else the
    reason it is left out."""
    model = case.model
    if model is None:
        return "no model"
    for opset in model.opset_import:
        if opset.domain not in ("", "ai.onnx"):
            return f"domain '{opset.domain}'"
    unsupported = sorted({n.op_type for n in model.graph.node
                          if n.domain not in ("", "ai.onnx") or
                          (n.op_type not in ops and
                           n.op_type not in IMPORTER_CONVERSIONS)})
    if unsupported:
        return "ops not in remat: " + ", ".join(unsupported)
    for value in list(model.graph.input) + list(model.graph.output):
        if not value.type.HasField("tensor_type"):
            return "a non-tensor graph input or output"
    if default_opset(model) > MAX_OPSET:
        why = retarget(model, onnx)
        if why is not None:
            return why
    # Below MIN_OPSET the importer says why it refuses the case.
    if default_opset(model) < MIN_OPSET:
        retarget_up(model, onnx)
    return None


def write_case(case, out_dir, numpy_helper, TensorProto):
    case_dir = os.path.join(out_dir, case.name)
    os.makedirs(case_dir)
    with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    for i, (inputs, outputs) in enumerate(case.data_sets):
        data_dir = os.path.join(case_dir, f"test_data_set_{i}")
        os.makedirs(data_dir)
        graph = case.model.graph
        for kind, values, infos in (("input", inputs, graph.input),
                                    ("output", outputs, graph.output)):
            for j, value in enumerate(values):
                if isinstance(value, TensorProto):
                    proto = value
                else:
                    proto = numpy_helper.from_array(value, infos[j].name)
                with open(os.path.join(data_dir, f"{kind}_{j}.pb"), "wb") as f:
                    f.write(proto.SerializeToString())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops-def", required=True, help="ir/Ops.def")
    parser.add_argument("-o", "--output", required=True,
                        help="directory to write (replaced)")
    args = parser.parse_args()

    start = time.time()
    try:
        import warnings
        import onnx
        from onnx import TensorProto, numpy_helper
        from onnx.backend.test.case import node as node_cases
    except ImportError:
        print("SKIPPED: onnx Python package not installed", file=sys.stderr)
        return 77

    ops = read_ops(args.ops_def)
    with warnings.catch_warnings():
        # The generators overflow casts and divide by zero on purpose.
        warnings.simplefilter("ignore")
        cases = node_cases.collect_testcases()

    if os.path.exists(args.output):
        shutil.rmtree(args.output)
    os.makedirs(args.output)
    written = []
    left_out = collections.Counter()
    retargeted = 0
    bound = 0
    for case in sorted(cases, key=lambda c: c.name):
        before = default_opset(case.model) if case.model else None
        why = select(case, ops, onnx)
        if why is not None:
            # Ops remat lacks are the bulk; count them as one reason.
            left_out["ops not in remat" if why.startswith("ops not") else why] += 1
            continue
        if default_opset(case.model) != before:
            retargeted += 1
        if bind_static_inputs(case, numpy_helper, TensorProto):
            bound += 1
        write_case(case, args.output, numpy_helper, TensorProto)
        written.append(case.name)
    with open(os.path.join(args.output, "cases.txt"), "w") as f:
        f.write("".join(name + "\n" for name in written))

    print(f"generate.py: wrote {len(written)} of {len(cases)} ONNX node test "
          f"cases to {args.output} ({retargeted} retargeted to opset "
          f"{MIN_OPSET}-{MAX_OPSET}, {bound} with shape operands bound) in "
          f"{time.time() - start:.1f} s; left out:",
          file=sys.stderr)
    for why, count in sorted(left_out.items()):
        print(f"  {count:5d}  {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
