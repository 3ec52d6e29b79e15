"""Tests of remat.torch, the torch.compile backend whose save/recompute
decision is remat's (python/remat/torch.py).

Small models only (hidden 64, 2 layers, dropout off): a BERT-style encoder
and a GPT-style decoder written in plain torch, and transformers' BERT, GPT-2
and Llama at tiny configs. Each is trained one step under several budgets;
the loss and every parameter gradient must equal eager's within 1e-5
relative L2, the measured peak (torch.profiler's live CPU tensor bytes) must
not rise as the budget falls. Then every bad input of issue 37, and a
2-process gloo DDP run.
"""

import json
import os
import pathlib
import socket
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import remat  # noqa: E402
import remat.torch  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOL = 1e-5

torch.set_num_threads(2)


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------

class Block(nn.Module):
    """A pre-LN transformer block; causal for the GPT-style model."""

    def __init__(self, hidden, heads, causal):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2)
                   for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / (h // self.heads) ** 0.5
        if self.causal:
            mask = torch.ones(s, s, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        attn = scores.softmax(-1) @ v
        x = x + self.proj(attn.transpose(1, 2).reshape(b, s, h))
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))


class TinyLM(nn.Module):
    def __init__(self, causal, hidden=64, layers=2, heads=2, vocab=97,
                 seq=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, causal)
                                    for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids, labels):
        x = self.embed(ids) + self.pos.weight[: ids.shape[1]]
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def make_model(kind):
    torch.manual_seed(0)
    if kind in ("bert", "gpt"):
        return TinyLM(causal=kind == "gpt").eval()
    transformers = pytest.importorskip("transformers")
    common = dict(vocab_size=97, hidden_size=64, num_hidden_layers=2,
                  num_attention_heads=2, intermediate_size=128)
    if kind == "hf-bert":
        config = transformers.BertConfig(
            **common, max_position_embeddings=64, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)
        model = transformers.BertForMaskedLM(config)
    elif kind == "hf-gpt2":
        config = transformers.GPT2Config(
            vocab_size=97, n_embd=64, n_layer=2, n_head=2, n_positions=64,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
            eos_token_id=0)
        model = transformers.GPT2LMHeadModel(config)
    else:
        config = transformers.LlamaConfig(
            **common, num_key_value_heads=2, max_position_embeddings=64)
        model = transformers.LlamaForCausalLM(config)
    model.config.use_cache = False
    if hasattr(model.config, "_attn_implementation"):
        model.config._attn_implementation = "eager"
    return model.eval()


def make_batch(batch=2, seq=32, vocab=97, seed=1):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq), generator=generator)
    labels = torch.randint(0, vocab, (batch, seq), generator=generator)
    return ids, labels


def loss_of(model, kind, ids, labels):
    if kind in ("bert", "gpt"):
        return model(ids, labels)
    return model(input_ids=ids, labels=labels).loss


def train_step(model, kind, batch, call=None):
    """Loss and each parameter's gradient of one step."""
    for p in model.parameters():
        p.grad = None
    loss = call(*batch) if call else loss_of(model, kind, *batch)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in
                           model.named_parameters() if p.grad is not None}


def rel_l2(a, b):
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def compiled_step(model, kind, budget, **options):
    be = remat.torch.backend(budget=budget, **options)
    fn = torch.compile(lambda ids, labels: loss_of(model, kind, ids, labels),
                       backend=be, dynamic=False)
    return be, fn


# ---------------------------------------------------------------------------
# Loss and gradients vs eager
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["bert", "hf-gpt2", "hf-llama"])
def test_gradients_match_eager_at_every_budget(kind):
    torch._dynamo.reset()
    model = make_model(kind)
    batch = make_batch()
    eager_loss, eager_grads = train_step(model, kind, batch)
    assert eager_grads
    seen_saved = set()
    # The weights and their gradients are most of these tiny steps, so the
    # budgets are bytes: none, halfway to the smallest plan, the smallest.
    smallest, halfway = smallest_budget(model, kind, batch)
    for budget in ["100%", halfway, smallest]:
        torch._dynamo.reset()
        be, fn = compiled_step(model, kind, budget)
        for p in model.parameters():
            p.grad = None
        loss = fn(*batch)
        loss.backward()
        assert rel_l2(loss.detach(), eager_loss) <= TOL, budget
        for name, p in model.named_parameters():
            if name in eager_grads:
                assert p.grad is not None, name
                assert rel_l2(p.grad, eager_grads[name]) <= TOL, (budget, name)
        plans = be.planner.plans
        assert plans, "the backend planned no graph"
        seen_saved.add(tuple(tuple(p["saved"]) for p in plans))
    # The budgets chose at least two different sets of saved values.
    assert len(seen_saved) >= 2


def smallest_budget(model, kind, batch):
    """Byte budgets every graph of the step fits: the smallest, and one
    halfway from there to no remat."""
    torch._dynamo.reset()
    be, fn = compiled_step(model, kind, "100%")
    fn(*batch).backward()
    smallest, halfway = 0, 0
    for plan in be.planner.plans:
        answer = remat._remat.plan_joint_graph(plan["rir"], "100%",
                                               smallest=True)
        smallest = max(smallest, answer["smallest_feasible"])
        halfway = max(halfway, (answer["smallest_feasible"] +
                                answer["no_remat_peak"]) // 2)
    torch._dynamo.reset()
    return smallest, max(smallest, halfway)


# ---------------------------------------------------------------------------
# Measured peak: non-increasing as the budget falls
# ---------------------------------------------------------------------------

def measured_peak(fn, batch, model):
    """Bytes of parameters and inputs plus the most CPU tensor bytes the
    step allocated beyond them at once (remat.torch.measured_peak)."""
    for p in model.parameters():
        p.grad = None
    return remat.torch.measured_peak(lambda: fn(*batch).backward(),
                                     list(model.parameters()) + list(batch))


def test_measured_peak_is_the_same_for_every_call_of_a_step():
    # The profiler's running total keeps what an earlier profiled step
    # allocated and freed outside the profiler; the peak must not.
    kept = []

    def step():
        scratch = torch.ones(1000)
        kept.append(torch.ones(2000))
        del scratch

    peaks = []
    for _ in range(3):
        peaks.append(remat.torch.measured_peak(step, [torch.ones(10)]))
        kept.clear()
    assert peaks == [12040] * 3, peaks


def test_measured_peak_never_rises_as_the_budget_falls():
    """GPT-style, batch 8, seq 32, six budgets from no remat down to the
    smallest plan, measured one after the other in this process: the
    measured peak never rises and stays within 10% of remat's prediction
    (measured 3132300 -> 1739280 B for predicted 3157644 -> 1739656 B)."""
    torch._dynamo.reset()
    kind = "gpt"
    model = make_model(kind)
    batch = make_batch(batch=8, seq=32)
    smallest, _ = smallest_budget(model, kind, batch)
    be, fn = compiled_step(model, kind, "100%")
    fn(*batch).backward()
    full = be.planner.plans[0]["no_remat_peak"]
    assert smallest < full
    budgets = [full - (full - smallest) * i // 5 for i in range(6)]
    peaks, predicted = [], []
    for budget in budgets:
        torch._dynamo.reset()
        be, fn = compiled_step(model, kind, budget)
        fn(*batch).backward()  # compile
        peaks.append(measured_peak(fn, batch, model))
        predicted.append(be.planner.plans[0]["predicted_peak"])
        assert predicted[-1] <= budget
    print("budgets", budgets, "predicted", predicted, "measured", peaks)
    assert all(b <= a for a, b in zip(peaks, peaks[1:])), peaks
    assert peaks[-1] < peaks[0], peaks
    # torch runs remat's plan: what it holds is what remat predicted.
    for budget, want, got in zip(budgets, predicted, peaks):
        assert abs(got - want) <= 0.1 * want, (budget, want, got)


def test_smallest_plan_is_one_the_backward_can_run():
    """A 4-layer GPT-style model (hidden 64, batch 8, seq 64), where
    remat-opt's smallest plan of the same joint graph is nested (3602312 B:
    a group rebuilt again inside its own backward, which a set of saved
    values cannot express): remat.torch plans without nested groups, so its
    smallest plan is one torch runs as predicted (3788936 B predicted,
    measured within 10%)."""
    torch._dynamo.reset()
    kind = "gpt"
    torch.manual_seed(0)
    model = TinyLM(causal=True, layers=4, seq=64).eval()
    batch = make_batch(batch=8, seq=64)
    smallest, _ = smallest_budget(model, kind, batch)
    be, fn = compiled_step(model, kind, smallest)
    fn(*batch).backward()  # compile
    plan = be.planner.plans[0]
    assert be.planner.reports[0]["remat"]["strategy"] != "nested"
    assert plan["predicted_peak"] <= smallest
    got = measured_peak(fn, batch, model)
    want = plan["predicted_peak"]
    print("smallest", smallest, "predicted", want, "measured", got)
    assert abs(got - want) <= 0.1 * want, (want, got)


# ---------------------------------------------------------------------------
# Explain and report
# ---------------------------------------------------------------------------

def test_explain_prints_the_table_and_report_writes_remat_opt_json(
        tmp_path, capsys):
    torch._dynamo.reset()
    model = make_model("bert")
    report = tmp_path / "report.json"
    be, fn = compiled_step(model, "bert", "95%", explain=True,
                           report=str(report))
    fn(*make_batch()).backward()
    out = capsys.readouterr().out
    assert "segment" in out and "predicted" in out, out
    assert "keep" in out and "recompute" in out, out
    data = json.loads(report.read_text())
    assert data["version"] == 1 and len(data["graphs"]) == 1
    graph = data["graphs"][0]
    assert graph["graph"] == "joint_0"
    assert graph["peak_bytes"] == be.planner.plans[0]["predicted_peak"]
    assert graph["remat"]["summary"]["planned_peak_bytes"] <= \
        graph["remat"]["summary"]["no_remat_planned_peak_bytes"]
    assert {s["decision"] for s in graph["remat"]["stashed"]} == \
        {"keep", "recompute"}


def test_inductor_compiles_remats_partition():
    """fw_compiler="inductor": Inductor's decompositions, joint-graph passes
    and kernels, with remat's partition in place of its min-cut one. At no
    remat and at the smallest plan of the graph Inductor hands over, the loss
    and every gradient equal eager's within 1e-5, the two plans save
    different values, and a forward-only graph passes with a warning."""
    torch._dynamo.reset()
    kind = "gpt"
    model = make_model(kind)
    batch = make_batch()
    eager_loss, eager_grads = train_step(model, kind, batch)
    saved = []
    budget = "100%"
    for _ in range(2):
        torch._dynamo.reset()
        be, fn = compiled_step(model, kind, budget, fw_compiler="inductor")
        loss, grads = train_step(model, kind, batch, call=fn)
        assert rel_l2(loss, eager_loss) <= TOL, budget
        assert grads.keys() == eager_grads.keys()
        for name, grad in grads.items():
            assert rel_l2(grad, eager_grads[name]) <= TOL, (budget, name)
        (plan,) = be.planner.plans
        saved.append(plan["saved"])
        answer = remat._remat.plan_joint_graph(plan["rir"], "100%",
                                               smallest=True)
        assert answer["smallest_feasible"] < answer["no_remat_peak"]
        budget = answer["smallest_feasible"]
    assert plan["predicted_peak"] <= budget
    assert saved[0] != saved[1]

    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch._dynamo.reset()
        be, fn = compiled_step(model, kind, "50%", fw_compiler="inductor")
        loss = fn(*batch)
    assert any("forward only" in str(w.message) for w in caught)
    assert be.planner.plans == []
    assert rel_l2(loss, eager_loss) <= TOL


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("budget", ["6 lots", "-3GiB", "", True])
def test_unparsable_budget_is_a_remat_error(budget):
    with pytest.raises(remat.Error, match="--budget"):
        remat.torch.backend(budget=budget)


@pytest.mark.parametrize("fw,bw,message", [
    ("aot_eager", None, "fw_compiler: unknown compiler 'aot_eager'"),
    ("inductor", remat.torch.run_as_traced, "together"),
    (None, "inductor", "together")])
def test_unknown_or_mixed_compiler_is_a_remat_error(fw, bw, message):
    with pytest.raises(remat.Error, match=message):
        remat.torch.backend(budget="50%", fw_compiler=fw, bw_compiler=bw)


def test_unknown_strategy_is_a_remat_error():
    with pytest.raises(remat.Error, match="unknown strategy 'fastest'"):
        remat.torch.backend(budget="50%", strategy="fastest")


def test_budget_below_every_plan_names_the_smallest_peak():
    torch._dynamo.reset()
    model = make_model("bert")
    step = remat.torch.compile(
        lambda ids, labels: loss_of(model, "bert", ids, labels), budget=4096)
    with pytest.raises(remat.Error) as error:
        step(*make_batch())
    message = str(error.value)
    # remat-opt's message (error: pass 'remat' failed: budget ...).
    assert message.startswith(
        "pass 'remat' failed: budget 4.00 KiB is below every plan of "
        "strategy 'auto'; the smallest feasible planned peak is "), message
    assert "without remat it is" in message


def test_budget_below_every_plan_on_a_module():
    torch._dynamo.reset()

    class Wrapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = make_model("bert")

        def forward(self, ids, labels):
            return self.inner(ids, labels)

    step = remat.torch.compile(Wrapped(), budget="1%")
    assert isinstance(step, nn.Module)
    with pytest.raises(remat.Error, match=r"budget .* \(1% of .*\) is below"):
        step(*make_batch())


def test_graph_break_plans_each_graph_and_names_the_break():
    torch._dynamo.reset()
    model = make_model("bert")

    def step(ids, labels):
        x = model.embed(ids)
        torch._dynamo.graph_break()
        x = model.blocks[0](x)
        return nn.functional.cross_entropy(
            model.head(x).reshape(-1, 97), labels.reshape(-1))

    # 100%: the graph before the break (the embedding) has no smaller plan.
    be = remat.torch.backend(budget="100%")
    fn = torch.compile(step, backend=be, dynamic=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn(*make_batch()).backward()
    messages = [str(w.message) for w in caught]
    assert any("remat.torch: graph break (" in m and "planned on its own" in m
               for m in messages), messages
    assert len(be.planner.plans) == 2
    # and the gradients are still eager's
    eager_loss, eager_grads = train_step(model, "bert", make_batch(), step)
    for p in model.parameters():
        p.grad = None
    fn(*make_batch()).backward()
    for name, p in model.named_parameters():
        if name in eager_grads:
            assert rel_l2(p.grad, eager_grads[name]) <= TOL, name


def test_forward_only_graph_passes_through_with_a_warning():
    torch._dynamo.reset()
    model = make_model("bert")
    batch = make_batch()
    be = remat.torch.backend(budget="50%")
    fn = torch.compile(lambda ids, labels: loss_of(model, "bert", ids, labels),
                       backend=be, dynamic=False)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss = fn(*batch)
    assert any("forward only" in str(w.message) for w in caught)
    assert be.planner.plans == []
    with torch.no_grad():
        assert torch.equal(loss, loss_of(model, "bert", *batch))


def test_import_without_torch_says_how_to_install_it(tmp_path):
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch' or name.startswith('torch.'):\n"
        "            raise ImportError('No module named ' + repr(name))\n"
        "sys.meta_path.insert(0, Block())\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(tmp_path)] + [p for p in sys.path if p])
    result = subprocess.run(
        [sys.executable, "-c", "import remat.torch"], env=env,
        capture_output=True, text=True)
    assert result.returncode != 0
    assert "ImportError: remat.torch needs PyTorch" in result.stderr
    assert "pip install .[torch]" in result.stderr
    # remat itself still imports.
    result = subprocess.run([sys.executable, "-c", "import remat"], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------------------
# Data parallel: 2 processes, gloo
# ---------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_gloo_two_ranks_match_one_process(tmp_path):
    torch._dynamo.reset()
    model = make_model("bert")
    ids, labels = make_batch(batch=4, seq=16)
    # One process, the whole batch (mean loss: DDP averages the ranks').
    _, grads = train_step(model, "bert", (ids, labels))
    script = pathlib.Path(__file__).with_name("ddp_worker.py")
    port = free_port()
    procs = [subprocess.Popen(
        [sys.executable, str(script), str(rank), "2", str(port),
         str(tmp_path)], env=dict(os.environ, PYTHONPATH=os.pathsep.join(
             p for p in sys.path if p)))
        for rank in range(2)]
    for proc in procs:
        assert proc.wait(timeout=600) == 0
    ranks = [torch.load(tmp_path / ("grads%d.pt" % r)) for r in range(2)]
    for name, grad in grads.items():
        assert torch.equal(ranks[0][name], ranks[1][name]), name
        assert rel_l2(ranks[0][name], grad) <= TOL, name
