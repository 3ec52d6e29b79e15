"""Tests of the Python package remat (python/remat) on a tiny BERT.

The fixture tests/fixtures/bert_ts_op17_nodrop is BertForMaskedLM exported by
torch with dropout off, with torch's loss and gradients. remat.optimize turns
it into a training step under a budget; onnxruntime must run that step to
the same loss and gradients as the step without remat and as torch.

Run by scripts/test.sh through ctest (python.pytest) with PYTHONPATH at the
build tree's python/ folder, or after `pip install .` on its own.
"""

import os
import pathlib
import subprocess

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
import pytest

import remat

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "bert_ts_op17_nodrop"
MODEL = FIXTURE / "model.onnx"
# The fixture's symbolic dims, as torch exported it (params.json).
BIND = {"batch": 2, "seq": 16}
# remat-opt of the same build, to compare error messages (ctest sets it).
REMAT_OPT = os.environ.get("REMAT_OPT")


def read_tensor(path):
    proto = onnx.TensorProto()
    proto.ParseFromString(path.read_bytes())
    return onnx.numpy_helper.to_array(proto)


def run_step(step):
    """Runs training step \\p step (a ModelProto) in onnxruntime on the
    fixture's inputs; returns {output name: array}."""
    session = ort.InferenceSession(step.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    feeds = {}
    for graph_input in session.get_inputs():
        path = FIXTURE / "inputs" / (graph_input.name + ".pb")
        if path.exists():
            feeds[graph_input.name] = read_tensor(path)
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


@pytest.fixture(scope="module")
def reference():
    """The step without remat, run by onnxruntime."""
    return run_step(remat.optimize(MODEL, strategy="none", bind=BIND))


def test_version():
    assert remat.__version__.count(".") == 2


def test_optimize_matches_unoptimised_step(reference):
    report = remat.plan(MODEL, strategy="none", bind=BIND)
    peak = report["peak_bytes"]
    budget = f"{int(peak * 0.8)}"
    step = remat.optimize(MODEL, budget=budget, strategy="auto", bind=BIND)
    assert isinstance(step, onnx.ModelProto)
    onnx.checker.check_model(step)
    outputs = run_step(step)
    assert outputs.keys() == reference.keys()
    for name, value in reference.items():
        np.testing.assert_allclose(outputs[name], value, rtol=1e-5,
                                   atol=1e-6, err_msg=name)
    # The same loss and gradients as torch computed on the model.
    loss = read_tensor(FIXTURE / "loss.pb")
    np.testing.assert_allclose(outputs["loss"], loss, rtol=1e-4)
    grads = [name for name in outputs if name.endswith("_grad")]
    assert len(grads) > 10
    for name in grads:
        path = FIXTURE / "grads" / (name[:-len("_grad")] + ".pb")
        np.testing.assert_allclose(outputs[name], read_tensor(path),
                                   rtol=1e-3, atol=1e-5, err_msg=name)


def test_plan_recomputes_under_budget():
    unplanned = remat.plan(MODEL, strategy="none", bind=BIND)
    budget = int(unplanned["peak_bytes"] * 0.8)
    planned = remat.plan(MODEL, budget=str(budget), strategy="auto", bind=BIND)
    assert planned["peak_bytes"] <= budget
    assert planned["peak_bytes"] < unplanned["peak_bytes"]
    decisions = planned["remat"]
    assert decisions, "no remat decisions in the plan"


def test_model_as_bytes_proto_and_path_agree():
    proto = onnx.load(str(MODEL))
    from_path = remat.optimize(MODEL, strategy="none", bind=BIND).SerializeToString()
    from_proto = remat.optimize(proto, strategy="none", bind=BIND).SerializeToString()
    from_bytes = remat.optimize(MODEL.read_bytes(),
                                strategy="none", bind=BIND).SerializeToString()
    assert from_path == from_proto == from_bytes


def test_bert_config_with_bind():
    config = ROOT / "tests" / "tools" / "Inputs" / "bert-tiny-nodrop.json"
    small = remat.plan(config, strategy="none", bind={"batch": 1, "seq": 8})
    large = remat.plan(config, strategy="none", bind="batch=2,seq=16")
    assert small["peak_bytes"] < large["peak_bytes"]


def test_sweep_rows():
    rows = remat.sweep(MODEL, strategies=["auto"], budgets=["100%", "60%"],
                       bind=BIND)
    assert [row["point"] for row in rows][0] == "none"
    assert all("planned_peak_bytes" in row or not row["feasible"]
               for row in rows)


def external_data_model(folder, location="w.bin"):
    """A small MLP whose weight w (f32[4,4]) is in folder/w.bin, referenced
    as \p location, as a ModelProto that has not loaded it."""
    from onnx import TensorProto, helper

    weight = np.arange(16, dtype=np.float32).reshape(4, 4) / 16
    (folder / "w.bin").write_bytes(weight.tobytes())
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 4],
                    data_location=TensorProto.EXTERNAL)
    entry = w.external_data.add()
    entry.key, entry.value = "location", location
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("Relu", ["h"], ["a"]),
         helper.make_node("ReduceSum", ["a"], ["s"], keepdims=0)],
        "ext", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [])], [w])
    return helper.make_model(graph, ir_version=8,
                             opset_imports=[helper.make_opsetid("", 17)])


def test_bytes_with_external_data_need_a_base_dir(tmp_path):
    model = external_data_model(tmp_path)
    for given in (model, model.SerializeToString()):
        with pytest.raises(remat.Error, match="initializer 'w': external data "
                           "location 'w.bin' cannot be read: the model was "
                           "given as bytes with no base folder"):
            remat.load(given)
        loaded = remat.load(given, base_dir=tmp_path)
        assert loaded.name == "ext"
    plan = remat.plan(model, strategy="none", base_dir=str(tmp_path))
    assert plan["peak_bytes"] > 0
    step = remat.optimize(model, strategy="none", base_dir=tmp_path)
    assert "w_grad" in [output.name for output in step.graph.output]


def test_base_dir_does_not_let_a_link_leave_it(tmp_path):
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    external_data_model(outside)
    (inside / "link.bin").symlink_to(outside / "w.bin")
    model = external_data_model(inside, location="link.bin")
    with pytest.raises(remat.Error, match="external data location 'link.bin' "
                       "resolves to '.*/outside/w.bin', outside the model's "
                       "folder '.*/inside'"):
        remat.load(model, base_dir=inside)


def tool_error(*args):
    """The message remat-opt prints after "error: " for \\p args."""
    done = subprocess.run([REMAT_OPT, *args, "-o", "-"],
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.startswith("error: ")
    return done.stderr[len("error: "):].rstrip("\n")


def test_errors_raise_remat_error_with_the_tool_message():
    with pytest.raises(remat.Error) as bad_budget:
        remat.optimize(MODEL, budget="lots", bind=BIND)
    with pytest.raises(remat.Error) as tiny_budget:
        remat.optimize(MODEL, budget="1KiB", strategy="auto", bind=BIND)
    with pytest.raises(remat.Error) as missing:
        remat.optimize(str(FIXTURE / "missing.onnx"))
    with pytest.raises(remat.Error, match="protobuf|parse|ModelProto"):
        remat.optimize(b"not a model")
    with pytest.raises(TypeError):
        remat.optimize(42)
    if REMAT_OPT:
        assert str(bad_budget.value) == tool_error(str(MODEL), "--bind", "batch=2,seq=16",
                                             "--budget", "lots")
        assert str(tiny_budget.value) == tool_error(
            str(MODEL), "--bind", "batch=2,seq=16", "--budget", "1KiB",
            "--strategy", "auto")
        assert str(missing.value) == tool_error(str(FIXTURE / "missing.onnx"))


def test_readme_example(tmp_path, monkeypatch):
    """The Python snippet of README "Use remat in your pipeline"
    (tests/install/check_readme.py keeps the two the same)."""
    monkeypatch.chdir(tmp_path)
    path = str(MODEL)
    model = onnx.load(path)
    bind = {"batch": 2, "seq": 16}  # the model's symbolic dims
    step = remat.optimize(model, budget="80%", strategy="auto", bind=bind)
    report = remat.plan(model, budget="80%", bind=bind)  # memory report + decisions
    rows = remat.sweep(model, budgets=["100%", "60%", "min"], bind=bind)
    onnx.save(step, "model.remat.onnx")
    assert onnx.load("model.remat.onnx").graph.output[0].name == "loss"
    assert report["remat"]
    assert len(rows) >= 2
