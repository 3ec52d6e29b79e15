"""The coverage harness over Hugging Face's architectures (tests/fixtures/coverage.py,
issue 40) on one small architecture: the case runs in its own process, passes every stage
and lands in the results JSON, and --table renders it. The sweep itself is a benchmark run
outside CI (docs/coverage.md).
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="the harness exports with torch")
pytest.importorskip("transformers", reason="the harness builds transformers' models")
pytest.importorskip("onnx", reason="the harness reads the exports with onnx")

ROOT = pathlib.Path(__file__).resolve().parents[2]
REMAT_OPT = os.environ.get("REMAT_OPT")


def run_case(tmp_path, case, exporter):
    """Runs the harness on the one case `case` ('Class/exporter'); returns the finished
    process and the results file."""
    if not REMAT_OPT:
        pytest.skip("REMAT_OPT is not set (ctest sets it to the build's remat-opt)")
    remat_run = pathlib.Path(REMAT_OPT).parent / "remat-run"
    if not remat_run.exists():
        pytest.skip(f"no remat-run next to {REMAT_OPT}")
    out = tmp_path / "coverage.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests/fixtures/coverage.py"), "--remat-opt", REMAT_OPT,
         "--remat-run", str(remat_run), "--only", f"^{case}$", "--exporters", exporter,
         "--timeout", "240", "--out", str(out), "--work", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done, out


def test_one_architecture(tmp_path):
    done, out = run_case(tmp_path, "GPT2LMHeadModel/ts17", "ts17")
    assert "[1/1 " in done.stderr and "GPT2LMHeadModel/ts17" in done.stderr
    doc = json.loads(out.read_text())
    assert not doc["partial"]
    [res] = doc["results"]
    assert (res["arch"], res["task"], res["exporter"], res["opset"]) == \
        ("GPT2LMHeadModel", "causal-lm", "ts17", 17)
    assert res["stages"] == {s: "ok" for s in
                             ("config", "export", "import", "train", "remat", "dropout")}
    assert res["smallest_peak_bytes"] > 0
    table = subprocess.run([sys.executable, str(ROOT / "tests/fixtures/coverage.py"),
                            "--table", str(out)], capture_output=True, text=True, check=True)
    assert "| GPT2LMHeadModel | causal-lm | pass |" in table.stdout
    # run, exported, imported, train and match, bitwise of those, all, dropout
    assert "| ts17 | 1 | 1 | 1 | 1 (100%) | 1 of 1 | 1 | 1 |" in table.stdout
    assert re.search(r"^- `coverage.json`: 1 cases, complete", table.stdout, re.M)
    assert re.search(r"^- 1 of the \d+ cases of the installed transformers have a result",
                     table.stdout, re.M)

    # --into rewrites only the generated section of the document
    doc = tmp_path / "coverage.md"
    begin = "<!-- coverage.py --table: begin (generated, do not edit by hand) -->"
    end = "<!-- coverage.py --table: end -->"
    doc.write_text(f"# head\n\n{begin}\nold table\n{end}\n\ntail\n")
    subprocess.run([sys.executable, str(ROOT / "tests/fixtures/coverage.py"), "--table", str(out),
                    "--into", str(doc)], capture_output=True, text=True, check=True)
    assert doc.read_text() == f"# head\n\n{begin}\n{table.stdout}{end}\n\ntail\n"
    doc.write_text("# no generated section\n")
    bad = subprocess.run([sys.executable, str(ROOT / "tests/fixtures/coverage.py"), "--table",
                          str(out), "--into", str(doc)], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.startswith(f"error: {doc}: no ")
    assert doc.read_text() == "# no generated section\n"


def test_a_dynamo_export_whose_parameters_were_folded_is_exported_again(tmp_path):
    """Gemma's norms compute `1 + weight`: the dynamo exporter's optimizer folds that into a
    new initializer, and no initializer is torch's parameter. The harness exports the case
    again without the optimizer, says so, and the case passes."""
    pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    _, out = run_case(tmp_path, "GemmaForCausalLM/dynamo", "dynamo")
    [res] = json.loads(out.read_text())["results"]
    assert res["stages"] == {s: "ok" for s in
                             ("config", "export", "import", "train", "remat", "dropout")}
    assert "params without initializer ['model.model.layers.0.input_layernorm.weight'" in \
        res["dynamo_optimizer_off"]


def test_a_missing_gradient_is_zero_only_where_torchs_is_zero():
    """remat-run writes no gradient for a weight with no differentiable path to the loss
    (MRA's query at the tiny config): that matches torch's gradient when it is all zeros,
    and is a failure otherwise."""
    sys.path.insert(0, str(ROOT / "tests/tools/Inputs"))
    import family_check
    import numpy as np
    zero, one = np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32)
    count, worst, bad = family_check.compare_grads({"w": zero, "v": one}, {"v": one})
    assert (count, worst, bad) == (2, 0.0, [])
    _, _, bad = family_check.compare_grads({"w": one * 1e-3, "v": one}, {"v": one})
    assert bad == ["w missing or misshaped"]


def test_an_image_classifier_is_given_its_image(tmp_path):
    """The wrapper of an image classifier takes pixel_values (it once got input_ids, and every
    image case failed at export). ViT on TorchScript passes every stage, and its workspace is
    removed when the case ends unless --work keeps it."""
    if not REMAT_OPT:
        pytest.skip("REMAT_OPT is not set (ctest sets it to the build's remat-opt)")
    remat_run = pathlib.Path(REMAT_OPT).parent / "remat-run"
    out = tmp_path / "coverage.json"
    env = dict(os.environ, TMPDIR=str(tmp_path))
    subprocess.run(
        [sys.executable, str(ROOT / "tests/fixtures/coverage.py"), "--remat-opt", REMAT_OPT,
         "--remat-run", str(remat_run), "--only", "^ViTForImageClassification/ts17$",
         "--exporters", "ts17", "--timeout", "240", "--out", str(out)],
        capture_output=True, text=True, timeout=300, check=True, env=env)
    [res] = json.loads(out.read_text())["results"]
    assert (res["task"], res["stages"]["export"], res["stages"]["train"]) == \
        ("image-classification", "ok", "ok")
    assert res["stages"]["remat"] == "ok"
    # torch keeps its own caches there; the harness's directories are gone.
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("coverage-")] == []


def test_the_tiny_configs_zero_per_stage_drop_rates_and_shrink_latents():
    """Every dropout is 0 for the reference, per-stage rates too (Cvt's drop_path_rate
    (0.0, 0.0, 0.1) left a RandomUniformLike in the export), and Perceiver's latent stack
    (26 self-attention layers of 1280 over 256 latents) and linear attention's heads are
    shrunk like any other."""
    import importlib.util
    import transformers
    spec = importlib.util.spec_from_file_location("coverage", ROOT / "tests/fixtures/coverage.py")
    coverage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(coverage)
    cvt = coverage.tiny_config(transformers.CvtForImageClassification, "cvt", False)
    assert list(cvt.drop_path_rate) == [0.0] * 3 and list(cvt.drop_rate) == [0.0] * 3
    dropping = coverage.tiny_config(transformers.CvtForImageClassification, "cvt", True)
    assert list(dropping.drop_path_rate) == [0.0] * 3      # stochastic depth: always 0
    assert list(dropping.drop_rate) == [0.1] * 3
    perceiver = coverage.tiny_config(transformers.PerceiverForMaskedLM, "perceiver", False)
    assert perceiver.num_self_attends_per_block <= 2
    assert perceiver.d_latents <= 32 and perceiver.num_latents <= 16
    # Linear attention's heads (Qwen3-Next's gated delta rule: 16 key heads of 128, 32
    # value heads of 128, against a hidden size of 32) shrink like attention's.
    qwen = coverage.tiny_config(transformers.Qwen3NextForCausalLM, "qwen3_next", False)
    assert qwen.linear_key_head_dim == qwen.linear_value_head_dim == 16
    assert qwen.linear_num_key_heads <= 2 and qwen.linear_num_value_heads <= 2
    # Widths and vocabularies by other names: RoCBert's shape and pronunciation
    # embeddings, Gemma 4's per-layer input embedding (262144 x 256).
    roc = coverage.tiny_config(transformers.RoCBertForMaskedLM, "roc_bert", False)
    assert roc.shape_embed_dim <= 32 and roc.pronunciation_embed_dim <= 32
    gemma = coverage.tiny_config(transformers.Gemma4ForCausalLM, "gemma4_text", False)
    assert gemma.vocab_size_per_layer_input <= 300 and gemma.hidden_size_per_layer_input <= 32


def test_a_gradient_zero_in_exact_arithmetic_is_judged_against_zero():
    """A gradient zero in f64 (a bias a batch norm removes) passes when remat's is within
    1e-5 of the largest gradient; one that is not zero in f64, or remat's further from zero,
    does not."""
    import importlib.util
    import numpy as np
    spec = importlib.util.spec_from_file_location("coverage", ROOT / "tests/fixtures/coverage.py")
    coverage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(coverage)
    exact = {"w": np.full((4, 4), 2.0), "b": np.zeros(4), "c": np.full(4, 1e-3)}
    noise = {"w": np.full((4, 4), 2.0, np.float32), "b": np.full(4, 1e-7, np.float32),
             "c": np.full(4, 1e-3, np.float32)}
    assert coverage.zero_gradients(["b"], exact, noise) == ["b"]
    assert coverage.zero_gradients(["b", "c"], exact, noise) is None    # c is not zero
    wrong = dict(noise, b=np.full(4, 1e-3, np.float32))                 # 1.25e-4 of the largest
    assert coverage.zero_gradients(["b"], exact, wrong) is None
    assert coverage.zero_gradients([], exact, noise) is None
