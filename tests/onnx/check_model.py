#!/usr/bin/env python3
"""Checks the ONNX files remat writes with ONNX's own tools.

Run by ctest as `onnx.check_model`:

    check_model.py --exporter remat-export-test-models --work-dir DIR A.rir ...

0. With --ops-def, fails unless every op of ir/Ops.def appears in some
   input, so that a new op gets an export check.
1. Exports every .rir file twice with remat-export-test-models: inline into
   DIR/inline and with external data into DIR/external. An export failure
   fails the test.
2. Without the `onnx` Python package, prints SKIPPED and exits 77 (ctest's
   SKIP_RETURN_CODE for this test).
3. For every model: onnx.checker.check_model(path, full_check=True); the
   header remat promises (IR version 8, opset 17 of the default domain only,
   producer, metadata); for external data, that every initializer lives in
   `<model>.data` at a 4096-aligned offset and holds the same values as the
   inline export.
4. With onnxruntime and numpy, runs every model on seeded random inputs
   (integer inputs that index something stay in range) and checks output
   dtypes and shapes against the declared outputs, and for the GELU models
   the values against a numpy reference. A kernel onnxruntime lacks is
   reported, not failed.
"""

import argparse
import math
import os
import re
import shutil
import subprocess
import sys

SKIP = 77
ALIGNMENT = 4096

# Models that onnxruntime cannot run, and why. A model that is not run and
# not listed here fails, and so does a listed model that runs: "all models
# pass" then means every other model was run and checked.
EXPECTED_NOT_RUN = {
    "gelu_f64": "onnxruntime has no f64 Erf kernel (the exact Gelu)",
}


def require_reference():
    """True when a missing reference package must fail, not skip."""
    return os.environ.get("REMAT_REQUIRE_REFERENCE", "0") == "1"


def export(exporter, out_dir, inputs, external):
    command = [exporter, "--out-dir", out_dir] + inputs
    if external:
        command.append("--external-data")
    try:
        result = subprocess.run(command, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        print("FAILED: cannot run %s: %s" % (exporter, e))
        return False
    if result.returncode != 0:
        print("FAILED: " + " ".join(command))
        print(result.stdout)
        return False
    return True


def check_header(onnx, model, expected_source):
    """Returns a list of problems with the fields remat promises."""
    problems = []
    if model.ir_version != 8:
        problems.append("ir_version is %d, expected 8" % model.ir_version)
    opsets = [(o.domain, o.version) for o in model.opset_import]
    if opsets != [("", 17)]:
        problems.append("opset_import is %s, expected [('', 17)]" % opsets)
    if model.producer_name != "remat" or not model.producer_version:
        problems.append("producer is %r %r" % (model.producer_name,
                                               model.producer_version))
    metadata = {p.key: p.value for p in model.metadata_props}
    if metadata.get("remat.version") != model.producer_version:
        problems.append("metadata remat.version is %r" %
                        metadata.get("remat.version"))
    if metadata.get("remat.test.source") != expected_source:
        problems.append("metadata remat.test.source is %r, expected %r" %
                        (metadata.get("remat.test.source"), expected_source))
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            problems.append("node %s has domain %r" % (node.name, node.domain))
    return problems


def check_external(onnx, numpy_helper, path, inline_path):
    """Checks the external-data layout and compares values with the inline
    export. Returns a list of problems."""
    problems = []
    data_path = path + ".data"
    model = onnx.load(path, load_external_data=False)
    has_data = any(len(t.raw_data) or t.data_location ==
                   onnx.TensorProto.EXTERNAL for t in model.graph.initializer)
    # remat writes the data file only when some tensor goes there.
    if os.path.exists(data_path) != has_data:
        return ["%s %s" % (data_path, "does not exist" if has_data else
                           "exists, but no initializer needs it")]
    data_size = os.path.getsize(data_path) if has_data else 0
    for tensor in model.graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            if tensor.raw_data:
                problems.append("initializer %s is inline" % tensor.name)
            continue
        entries = {e.key: e.value for e in tensor.external_data}
        if entries.get("location") != os.path.basename(data_path):
            problems.append("initializer %s has location %r" %
                            (tensor.name, entries.get("location")))
        offset = int(entries.get("offset", -1))
        length = int(entries.get("length", -1))
        if offset < 0 or offset % ALIGNMENT != 0:
            problems.append("initializer %s has offset %d" % (tensor.name,
                                                              offset))
        if length <= 0 or offset + length > data_size:
            problems.append("initializer %s: [%d, +%d) is not inside the "
                            "%d-byte data file" % (tensor.name, offset,
                                                   length, data_size))
    full = onnx.load(path)
    inline = onnx.load(inline_path)
    inline_values = {t.name: numpy_helper.to_array(t)
                     for t in inline.graph.initializer}
    for tensor in full.graph.initializer:
        value = numpy_helper.to_array(tensor)
        expected = inline_values.get(tensor.name)
        if expected is None or expected.dtype != value.dtype or \
                expected.shape != value.shape or \
                expected.tobytes() != value.tobytes():
            problems.append("initializer %s differs from the inline export" %
                            tensor.name)
    return problems


def shapes_by_name(graph):
    shapes = {}
    for info in list(graph.input) + list(graph.value_info) + \
            list(graph.output):
        dims = info.type.tensor_type.shape.dim
        shapes[info.name] = [d.dim_value for d in dims]
    for tensor in graph.initializer:
        shapes[tensor.name] = list(tensor.dims)
    return shapes


def index_bound(graph, name, shapes):
    """Returns an exclusive upper bound for values of integer input `name`
    from the ops that index with it, or None."""
    bounds = []
    for node in graph.node:
        attrs = {a.name: a for a in node.attribute}
        for position, input_name in enumerate(node.input):
            if input_name != name:
                continue
            axis = attrs["axis"].i if "axis" in attrs else 0
            if node.op_type in ("Gather", "ScatterElements") and position == 1:
                data = shapes[node.input[0]]
                bounds.append(data[axis % len(data)])
            elif node.op_type == "SoftmaxCrossEntropyLoss" and position == 1:
                bounds.append(shapes[node.input[0]][1])
            elif node.op_type == "Unsqueeze" and position == 0:
                # remat.SoftmaxCrossEntropyGrad's export: labels, unsqueezed,
                # compared with the class indices [1, C, 1...].
                for user in graph.node:
                    if user.op_type == "Equal" and node.output[0] in user.input:
                        other = [i for i in user.input if i != node.output[0]]
                        if other and other[0] in shapes and \
                                len(shapes[other[0]]) > 1:
                            bounds.append(shapes[other[0]][1])
    return min(bounds) if bounds else None


def random_inputs(np, session, graph):
    rng = np.random.default_rng(20240601)
    shapes = shapes_by_name(graph)
    feeds = {}
    for info in session.get_inputs():
        shape = shapes[info.name]
        kind = info.type
        if kind in ("tensor(int64)", "tensor(int32)", "tensor(int8)",
                    "tensor(uint8)"):
            bound = index_bound(graph, info.name, shapes) or 2
            dtype = {"tensor(int64)": np.int64, "tensor(int32)": np.int32,
                     "tensor(int8)": np.int8,
                     "tensor(uint8)": np.uint8}[kind]
            feeds[info.name] = rng.integers(0, bound, size=shape).astype(dtype)
        elif kind == "tensor(bool)":
            feeds[info.name] = rng.integers(0, 2, size=shape).astype(bool)
        else:
            dtype = {"tensor(float)": np.float32, "tensor(double)": np.float64,
                     "tensor(float16)": np.float16}[kind]
            feeds[info.name] = rng.standard_normal(size=shape).astype(dtype)
    return feeds


def gelu_reference(np, x, approximate):
    x64 = x.astype(np.float64)
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64 ** 3)
        y = 0.5 * x64 * (1.0 + np.tanh(inner))
    else:
        erf = np.vectorize(math.erf)
        y = 0.5 * x64 * (1.0 + erf(x64 / math.sqrt(2.0)))
    return y.astype(x.dtype)


def gelu_grad_reference(np, dy, x, approximate):
    """dy * Gelu'(x), from the derivative's closed form in f64."""
    x64 = x.astype(np.float64)
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        t = np.tanh(c * (x64 + 0.044715 * x64 ** 3))
        slope = 0.5 * (1.0 + t) + 0.5 * x64 * (1.0 - t * t) * c * (
            1.0 + 3 * 0.044715 * x64 ** 2)
    else:
        erf = np.vectorize(math.erf)
        slope = 0.5 * (1.0 + erf(x64 / math.sqrt(2.0))) + x64 * np.exp(
            -0.5 * x64 * x64) / math.sqrt(2.0 * math.pi)
    return (dy.astype(np.float64) * slope).astype(x.dtype)


def xent_grad_reference(np, log_prob, labels, scale):
    """(exp(log_prob) - onehot(labels, axis 1)) * scale, in f64."""
    classes = log_prob.shape[1]
    shape = [1] * log_prob.ndim
    shape[1] = classes
    onehot = (np.expand_dims(labels, 1) ==
              np.arange(classes).reshape(shape)).astype(np.float64)
    grad = (np.exp(log_prob.astype(np.float64)) - onehot) * np.expand_dims(
        scale.astype(np.float64), 1)
    return grad.astype(log_prob.dtype)


def reference_outputs(np, graph_name, feeds):
    """Expected output values for the models whose semantics are known."""
    if graph_name == "gelu":
        x = feeds["x"]
        y = gelu_reference(np, x, "none")
        t = gelu_reference(np, x, "tanh")
        return {"y": y, "t": t, "s": t + gelu_reference(np, y, "none")}
    if graph_name == "gelu_grad":
        dy, x = feeds["dy"], feeds["x"]
        return {"d": gelu_grad_reference(np, dy, x, "none"),
                "dt": gelu_grad_reference(np, dy, x, "tanh")}
    if graph_name == "xent_grad":
        return {"g": xent_grad_reference(np, feeds["lp"], feeds["lab"],
                                         feeds["s"]),
                "g3": xent_grad_reference(np, feeds["lp3"], feeds["lab3"],
                                          feeds["s3"])}
    if graph_name == "gelu_f64":
        x = feeds["x"]
        return {"y": gelu_reference(np, x, "none"),
                "t": gelu_reference(np, x, "tanh")}
    if graph_name == "gelu_tanh_f64_f16":
        x, h = feeds["x"], feeds["h"]
        return {"t": gelu_reference(np, x, "tanh"),
                "ht": gelu_reference(np, h, "tanh")}
    return {}


def run_onnxruntime(np, ort, onnx, path):
    """Returns (status, problems): status is a line for the report."""
    model = onnx.load(path, load_external_data=False)
    try:
        session = ort.InferenceSession(path,
                                       providers=["CPUExecutionProvider"])
        feeds = random_inputs(np, session, model.graph)
        outputs = session.run(None, feeds)
    except Exception as e:  # onnxruntime raises its own exception types
        message = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
        if "NOT_IMPLEMENTED" in message or \
                "Could not find an implementation" in message:
            return "not run, onnxruntime lacks a kernel: " + message, []
        return "FAILED: " + message, ["onnxruntime: " + message]
    problems = []
    expected_shapes = shapes_by_name(model.graph)
    elem_types = {o.name: o.type.tensor_type.elem_type
                  for o in model.graph.output}
    results = {}
    for info, value in zip(session.get_outputs(), outputs):
        results[info.name] = value
        if list(value.shape) != expected_shapes[info.name]:
            problems.append("output %s has shape %s, declared %s" %
                            (info.name, list(value.shape),
                             expected_shapes[info.name]))
        expected_dtype = onnx.helper.tensor_dtype_to_np_dtype(
            elem_types[info.name])
        if value.dtype != expected_dtype:
            problems.append("output %s has dtype %s, declared %s" %
                            (info.name, value.dtype, expected_dtype))
    compared = []
    for name, expected in reference_outputs(np, model.graph.name,
                                            feeds).items():
        tolerance = {np.dtype(np.float16): 2e-2,
                     np.dtype(np.float32): 1e-5}.get(expected.dtype, 1e-12)
        actual = results[name]
        if not np.allclose(actual.astype(np.float64),
                           expected.astype(np.float64), rtol=tolerance,
                           atol=tolerance):
            error = np.max(np.abs(actual.astype(np.float64) -
                                  expected.astype(np.float64)))
            problems.append("output %s differs from the reference by up to "
                            "%g (tolerance %g)" % (name, error, tolerance))
        compared.append(name)
    status = "ran, %d outputs" % len(outputs)
    if compared:
        status += "; compared %s with the numpy reference" % ", ".join(compared)
    return ("FAILED: " + status if problems else status), problems


def uncovered_ops(ops_def, inputs):
    """Returns the ops of Ops.def that no input model uses, spelled as in
    .rir ("MatMul", "remat.Gelu")."""
    ops = []
    with open(ops_def) as f:
        for match in re.finditer(r'^OP\((\w+), "(\w*)"', f.read(), re.M):
            name, domain = match.groups()
            ops.append(domain + "." + name if domain else name)
    used = set()
    for path in inputs:
        with open(path) as f:
            used.update(re.findall(r"=\s*([\w.]+)\(", f.read()))
    # remat.Extern stands for another front end's op (remat.torch) and has
    # no ONNX form: the exporter refuses it (OnnxExporterTest). Neither have
    # the pooling gradients (issue 40): opset 17 has no op that sums dy into
    # each window's maximum or over overlapping windows (MaxUnpool
    # overwrites), so the exporter refuses them as it refuses Extern.
    no_onnx_form = {"remat.Extern", "remat.MaxPoolGrad",
                    "remat.AveragePoolGrad"}
    return [op for op in ops if op not in used and op not in no_onnx_form]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exporter", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--ops-def",
                        help="ir/Ops.def; every op in it must appear in "
                        "some input")
    parser.add_argument("inputs", nargs="+")
    args = parser.parse_args()

    if args.ops_def:
        missing = uncovered_ops(args.ops_def, args.inputs)
        if missing:
            print("FAILED: no model in %s uses %s; add one so that its "
                  "export is checked" % (
                      os.path.dirname(os.path.abspath(args.inputs[0])),
                      ", ".join(missing)))
            return 1

    shutil.rmtree(args.work_dir, ignore_errors=True)
    inline_dir = os.path.join(args.work_dir, "inline")
    external_dir = os.path.join(args.work_dir, "external")
    inputs = sorted(args.inputs)
    if not export(args.exporter, inline_dir, inputs, external=False) or \
            not export(args.exporter, external_dir, inputs, external=True):
        return 1
    print("exported %d models, inline and with external data" % len(inputs))

    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        if require_reference():
            print("FAILED: the onnx Python package is not installed for %s "
                  "and REMAT_REQUIRE_REFERENCE=1 (run scripts/setup.sh)"
                  % sys.executable)
            return 1
        print("SKIPPED: the onnx Python package is not installed for %s "
              "(run scripts/setup.sh, then rerun cmake); the exports "
              "themselves succeeded" % sys.executable)
        return SKIP
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError:
        np = ort = None
        if require_reference():
            print("FAILED: onnxruntime or numpy is not installed and "
                  "REMAT_REQUIRE_REFERENCE=1 (run scripts/setup.sh)")
            return 1
        print("note: onnxruntime or numpy is not installed; models are "
              "checked but not run")
    print("onnx %s, onnxruntime %s" % (onnx.__version__,
                                       ort.__version__ if ort else "absent"))

    failures = 0
    ran, not_run = 0, []
    for source in inputs:
        stem = os.path.splitext(os.path.basename(source))[0]
        inline_path = os.path.join(inline_dir, stem + ".onnx")
        for kind, path in (("inline", inline_path),
                           ("external", os.path.join(external_dir,
                                                     stem + ".onnx"))):
            problems = []
            lines = []
            try:
                onnx.checker.check_model(path, full_check=True)
                lines.append("checker (full_check): ok")
            except Exception as e:  # checker and shape inference errors
                problems.append("checker: " + str(e).strip())
                lines.append("checker (full_check): FAILED")
            model = onnx.load(path)
            problems += check_header(onnx, model, os.path.basename(source))
            if kind == "external":
                problems += check_external(onnx, numpy_helper, path,
                                           inline_path)
            if ort is not None:
                status, run_problems = run_onnxruntime(np, ort, onnx, path)
                problems += run_problems
                lines.append("onnxruntime: " + status)
                if status.startswith("not run"):
                    not_run.append("%s %s" % (stem, kind))
                    if stem not in EXPECTED_NOT_RUN:
                        problems.append("onnxruntime did not run it, and "
                                        "EXPECTED_NOT_RUN does not list it")
                else:
                    ran += 1
                    if stem in EXPECTED_NOT_RUN:
                        problems.append("onnxruntime runs it now: remove it "
                                        "from EXPECTED_NOT_RUN")
            print("%-18s %-8s %3d nodes  %s" % (stem, kind,
                                                len(model.graph.node),
                                                "; ".join(lines)))
            for problem in problems:
                print("    error: " + problem)
            failures += bool(problems)
    if failures:
        print("FAILED: %d of %d models" % (failures, 2 * len(inputs)))
        return 1
    if ort is None:
        print("all %d models pass the checker; none run (no onnxruntime)"
              % (2 * len(inputs)))
        return 0
    print("all %d models pass: %d run by onnxruntime, %d not run (%s)"
          % (2 * len(inputs), ran, len(not_run),
             ", ".join(not_run) if not_run else "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
