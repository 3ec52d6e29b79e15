"""remat.torch: a torch.compile backend whose save/recompute decision is
remat's.

    import remat.torch
    step = remat.torch.compile(model, budget="6GiB")      # or "40%", bytes
    loss = step(batch); loss.backward()

    torch.compile(model, backend=remat.torch.backend(budget="40%",
                                                     explain=True))

Inside, AOTAutograd traces the joint forward+backward graph of each
captured graph and calls remat's partition function (``partition``). It
writes the joint graph as remat IR: each FX node one ``remat.Extern`` node
with its result types, its stage (forward when the forward outputs need it,
backward otherwise) and its cost (aten mm/bmm/addmm/baddbmm/convolution and
scaled-dot-product attention compute-bound with their FLOPs, the rest
memory-bound with their bytes); views are their base tensor. remat's own
solver (remat::planJointGraph: the segments, strategies, candidate pool and
monotone choice of remat-opt, less the nested and chunked plans, which a
set of saved values cannot express) plans it under the budget; the forward
module then saves exactly the values remat keeps, and the backward module
recomputes everything else it needs from them, each value just before its
first use (torch's own extraction and reordering helpers, as the min-cut
partitioner uses them).

Random ops (dropout) follow PyTorch's rule for a partitioner without rng
functionalization: they are never recomputed. Where remat's plan would
rebuild one, its outputs are saved instead (a warning says so; the predicted
peak then undercounts those bytes).

Supported: torch 2.15 (the version tested). The torch internals used are
those of torch._functorch.partitioners that min_cut_rematerialization_partition
itself calls (_extract_fwd_bwd_outputs, _extract_fwd_bwd_modules,
classify_nodes, force_save_*, reordering_to_mimic_autograd_engine,
raise_getitems, thread_graphsafe_rng_from_hops, default_partition,
is_sym_node) and torch._dynamo.backends.common.aot_autograd; with
fw_compiler="inductor", torch._inductor.compile_fx.compile_fx and
torch._inductor.config.custom_partitioner_fn.
"""

import functools
import itertools
import json
import os
import warnings

try:
    import torch
    import torch.fx
except ImportError as error:  # pragma: no cover - tested by a subprocess
    raise ImportError(
        "remat.torch needs PyTorch, which is not installed: install the "
        "extra with `pip install .[torch]` (from remat's source tree) or "
        "`pip install torch`") from error

from . import _remat
from ._remat import Error

__all__ = ["backend", "compile", "partition", "joint_graph_to_rir",
           "measured_peak", "run_as_traced", "Error"]

_aten = torch.ops.aten

# Compute-bound aten ops: their FLOPs from torch.utils.flop_counter.
_GEMM_OPS = {
    "mm", "bmm", "addmm", "baddbmm", "convolution", "convolution_backward",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_cudnn_attention_backward",
}

_DTYPES = {
    torch.float32: "f32", torch.float64: "f64", torch.float16: "f16",
    torch.bfloat16: "bf16", torch.int64: "i64", torch.int32: "i32",
    torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool",
}


def _partitioners():
    from torch._functorch import partitioners
    return partitioners


def _tensor_type(value):
    """The .rir type of a tensor value: its dtype and dims, or u8[bytes] for
    a dtype remat lacks (the bytes are what planning needs)."""
    shape = [int(d) for d in value.shape]
    dtype = _DTYPES.get(value.dtype)
    if dtype is None:
        count = 1
        for d in shape:
            count *= d
        return "u8[%d]" % (count * value.element_size())
    return "%s[%s]" % (dtype, ",".join(str(d) for d in shape))


def _nbytes(value):
    count = 1
    for d in value.shape:
        count *= int(d)
    return count * value.element_size()


def _is_tensor(value):
    return isinstance(value, torch.Tensor)


def _has_symbolic_shape(value):
    return any(not isinstance(d, int) for d in value.shape)


def _packet_name(node):
    target = node.target
    packet = getattr(target, "_overloadpacket", None)
    return getattr(packet, "__name__", None) if packet is not None else None


def _is_view(node):
    """Whether node's result aliases its first operand (aten views)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None or len(schema.returns) != 1:
        return False
    alias = schema.returns[0].alias_info
    return (alias is not None and not alias.is_write and node.args and
            isinstance(node.args[0], torch.fx.Node))


def is_random(node):
    """Whether node draws random numbers (aten's nondeterministic_seeded
    tag: dropout, rand_like, ...)."""
    tags = getattr(node.target, "tags", ())
    return torch.Tag.nondeterministic_seeded in tags


def _flops(node, result):
    from torch.utils.flop_counter import flop_registry
    packet = getattr(node.target, "_overloadpacket", None)
    formula = flop_registry.get(packet)
    if formula is None:
        return None
    fetch = lambda a: a.meta.get("val") if isinstance(a, torch.fx.Node) else a
    args = torch.fx.node.map_aggregate(node.args, fetch)
    kwargs = torch.fx.node.map_aggregate(node.kwargs, fetch)
    try:
        return int(formula(*args, **kwargs, out_val=result))
    except Exception:  # a formula that does not fit these arguments
        return None


class JointGraph:
    """A joint FX graph written as remat IR (``text``), with the FX node of
    each remat value (``fx_of``) and what it could not express."""

    def __init__(self, text, fx_of, name):
        self.text = text
        self.fx_of = fx_of
        self.name = name


def _name_value(node, val, value_of, fx_of):
    """Makes node's tensor val the remat value of its name."""
    if _has_symbolic_shape(val):
        raise Error("remat.torch plans static shapes; %s has the shape %s "
                    "(compile with dynamic=False)" %
                    (node.name, tuple(val.shape)))
    value_of[node] = node.name
    fx_of[node.name] = node


def joint_graph_to_rir(joint_module, num_fwd_outputs, name="joint",
                       node_info=None):
    """Writes AOTAutograd's joint graph as one remat IR graph (see the module
    docstring). The trainable weights are the primals with a gradient.
    node_info: torch's classify_nodes of the graph, when at hand."""
    P = _partitioners()
    graph = joint_module.graph
    fwd_outputs, bwd_outputs, _, _ = P._extract_fwd_bwd_outputs(
        joint_module, num_fwd_outputs=num_fwd_outputs)
    if node_info is None:
        node_info = P.classify_nodes(joint_module, [], num_fwd_outputs)
    primals = [n for n in graph.nodes if P._is_primal(n)]
    weights = {primal for primal, grad in zip(primals, bwd_outputs)
               if grad is not None}

    # The remat value of each FX value: a view is its base; a getitem is a
    # result of its tuple node.
    value_of = {}
    fx_of = {}
    inputs, body = [], []
    results_of = {}

    def operands_of(node):
        names = []
        for arg in node.all_input_nodes:
            name = value_of.get(arg)
            if name is not None and name not in names:
                names.append(name)
        return names

    for node in graph.nodes:
        val = node.meta.get("val")
        if node.op in ("placeholder", "get_attr"):
            if _is_tensor(val):
                _name_value(node, val, value_of, fx_of)
                inputs.append("%%%s: %s%s" % (
                    node.name, _tensor_type(val),
                    " weight" if node in weights else ""))
            continue
        if node.op != "call_function":
            continue
        if node.target is _getitem:
            base = node.args[0]
            if base in results_of and _is_tensor(val):
                results_of[base][node.args[1]] = node.name
                value_of[node] = node.name
                fx_of[node.name] = node
            elif base in value_of:  # an element of a view's list
                value_of[node] = value_of[base]
            continue
        if _is_view(node) and node.args[0] in value_of:
            value_of[node] = value_of[node.args[0]]
            continue
        stage = "" if node_info.is_required_fw(node) else " bwd"
        packet = _packet_name(node) or str(node.target)
        if isinstance(val, (tuple, list)):
            if not any(_is_tensor(v) for v in val):
                continue
            results_of[node] = {}
            body.append((node, val, stage, packet))
            continue
        if not _is_tensor(val):
            continue
        _name_value(node, val, value_of, fx_of)
        body.append((node, val, stage, packet))

    lines = []
    for node, val, stage, packet in body:
        if isinstance(val, (tuple, list)):
            names, types = [], []
            for i, v in enumerate(val):
                if not _is_tensor(v):
                    continue
                names.append("%" + results_of[node].get(i, "%s_r%d" % (
                    node.name, i)))
                types.append(_tensor_type(v))
            results = [v for v in val if _is_tensor(v)]
        else:
            names, types, results = ["%" + node.name], [_tensor_type(val)], [val]
        attrs = ['target = "%s"' % str(node.target)]
        out_bytes = sum(_nbytes(v) for v in results)
        in_bytes = sum(_nbytes(a.meta["val"]) for a in node.all_input_nodes
                       if _is_tensor(a.meta.get("val")))
        flops = _flops(node, val) if packet in _GEMM_OPS else None
        if flops is not None:
            attrs.append('cost = "gemm"')
            attrs.append("flops = %d" % flops)
        attrs.append("bytes = %d" % (in_bytes + out_bytes))
        operands = ", ".join("%" + o for o in operands_of(node))
        lines.append("  %s = remat.Extern(%s) {%s} : %s%s" % (
            ", ".join(names), operands, ", ".join(attrs), ", ".join(types),
            stage))

    outputs = []
    for out in list(fwd_outputs) + list(bwd_outputs):
        value = value_of.get(out) if isinstance(out, torch.fx.Node) else None
        if value is not None and "%" + value not in outputs:
            outputs.append("%" + value)
    text = "graph @%s(%s) {\n%s\n  return %s\n}\n" % (
        name, ", ".join(inputs), "\n".join(lines), ", ".join(outputs))
    return JointGraph(text, fx_of, name)


import operator as _operator  # noqa: E402

_getitem = _operator.getitem


def _must_also_save(bwd_outputs, saved):
    """The FX nodes that backward, computing from saved and the
    tangents, would have to rebuild but must not (random ones: dropout's
    mask) or cannot (primals): random ones first, then primals."""
    P = _partitioners()
    stop = set(saved)
    seen, random, primals = set(), [], []
    stack = [o for o in bwd_outputs if isinstance(o, torch.fx.Node)]
    while stack:
        node = stack.pop()
        if node in seen or node in stop or P._is_tangent(node):
            continue
        seen.add(node)
        if node.op in ("placeholder", "get_attr"):
            primals.append(node)
            continue
        base = node.args[0] if node.target is _getitem else node
        if isinstance(base, torch.fx.Node) and base.op == "call_function" \
                and is_random(base) and _is_tensor(node.meta.get("val")):
            random.append(node)
            continue
        stack.extend(node.all_input_nodes)
    return random, primals


class _Planner:
    """The state of one backend: its options, the graphs it planned (for the
    report) and the graph breaks already named."""

    def __init__(self, budget, strategy, explain, report, cost_profile):
        self.budget = budget
        self.strategy = strategy
        self.explain = explain
        self.report = report
        self.cost_profile = cost_profile or ""
        self.reports = []
        self.plans = []
        self.count = itertools.count()
        self.breaks_seen = set(_graph_breaks())
        self.graphs_partitioned = 0

    def partition(self, joint_module, joint_inputs, *, num_fwd_outputs,
                  static_lifetime_input_indices=None, **kwargs):
        self.graphs_partitioned += 1
        return partition(joint_module, joint_inputs,
                         num_fwd_outputs=num_fwd_outputs,
                         static_lifetime_input_indices=(
                             static_lifetime_input_indices),
                         planner=self)

    def record(self, plan):
        self.plans.append(plan)
        self.reports.append(json.loads(plan["report_json"]))
        if self.report:
            with open(self.report, "w") as f:
                json.dump({"version": 1, "graphs": self.reports}, f, indent=2)
                f.write("\n")
        if self.explain and plan["diagnostics"]:
            print(plan["diagnostics"], end="")

    def note_graph(self):
        """Warns about the graph breaks dynamo recorded since the last
        captured graph: each graph is planned on its own."""
        breaks = [b for b in _graph_breaks() if b not in self.breaks_seen]
        self.breaks_seen.update(breaks)
        for reason in breaks:
            warnings.warn(
                "remat.torch: graph break (%s): each captured graph is "
                "planned on its own, under the budget %s" %
                (reason.strip().splitlines()[0], self.budget),
                stacklevel=2)


def _graph_breaks():
    from torch._dynamo.utils import counters
    return list(counters["graph_break"].keys())


def partition(joint_module, joint_inputs=None, *, num_fwd_outputs,
              static_lifetime_input_indices=None, planner=None, budget=None,
              strategy="auto"):
    """AOTAutograd's partition function with remat's decision: returns the
    forward and backward modules. planner carries a backend's options;
    without one, budget and strategy are used."""
    P = _partitioners()
    if planner is None:
        planner = _Planner(_budget_text(budget), strategy, False, None, "")
    joint_module.graph.eliminate_dead_code()
    joint_module.recompile()
    P.force_save_collectives(joint_module)
    P.force_save_effectful_ops(joint_module)
    P.force_save_bw_mutation_src(joint_module)
    static = list(static_lifetime_input_indices or [])
    node_info = P.classify_nodes(joint_module, static, num_fwd_outputs)
    if len(node_info.required_bw_nodes) == 0:
        warnings.warn("remat.torch: the graph has no backward: nothing to "
                      "plan, it runs as traced", stacklevel=2)
        return P.default_partition(
            joint_module, joint_inputs, num_fwd_outputs=num_fwd_outputs,
            static_lifetime_input_indices=static)

    name = "joint_%d" % next(planner.count)
    joint = joint_graph_to_rir(joint_module, num_fwd_outputs, name=name,
                               node_info=node_info)
    plan = _remat.plan_joint_graph(
        joint.text, planner.budget, planner.strategy, planner.cost_profile,
        planner.explain, False)

    _, bwd_outputs, _, _ = P._extract_fwd_bwd_outputs(
        joint_module, num_fwd_outputs=num_fwd_outputs)
    kept = [joint.fx_of[n] for n in plan["kept"] if n in joint.fx_of]
    saved = [n for n in kept if not P._is_tangent(n)]
    # Values the joint graph marks as saved (collectives, effectful ops).
    from torch.utils.checkpoint import CheckpointPolicy
    for node in joint_module.graph.nodes:
        if node.meta.get("recompute") == CheckpointPolicy.MUST_SAVE and \
                node_info.is_required_fw(node) and node not in saved:
            saved.append(node)
    random, primals = _must_also_save(bwd_outputs, saved)
    if random:
        warnings.warn(
            "remat.torch: %s: drawn at random, so saved rather than "
            "recomputed as remat planned (no rng functionalization)" %
            ", ".join(sorted({n.name for n in random})), stacklevel=2)
    saved.extend(n for n in random + primals if n not in saved)
    order = {node: i for i, node in enumerate(joint_module.graph.nodes)}
    saved.sort(key=order.__getitem__)
    plan["saved"] = [n.name for n in saved]
    plan["rir"] = joint.text
    saved_sym = [n for n in saved if P.is_sym_node(n)]
    saved_values = [n for n in saved if not P.is_sym_node(n)]
    for node in node_info.required_fw_nodes:
        if P.is_sym_node(node) and node not in saved_sym and any(
                not node_info.is_required_fw(u) for u in node.users):
            saved_sym.append(node)
    planner.record(plan)

    fw_module, bw_module = P._extract_fwd_bwd_modules(
        joint_module, saved_values, saved_sym_nodes=saved_sym,
        num_fwd_outputs=num_fwd_outputs,
        static_lifetime_input_nodes=node_info.static_lifetime_input_nodes)
    # Recompute each value just before backward first needs it.
    bw_module = P.reordering_to_mimic_autograd_engine(bw_module)
    fw_module = P.raise_getitems(fw_module)
    bw_module = P.raise_getitems(bw_module)
    fw_module = P.thread_graphsafe_rng_from_hops(fw_module, is_backward=False)
    bw_module = P.thread_graphsafe_rng_from_hops(bw_module, is_backward=True)
    return fw_module, bw_module


def _budget_text(budget):
    """remat's spelling of a budget: bytes (int), "6GiB", "40%"."""
    if budget is None:
        return "100%"
    if isinstance(budget, bool):
        raise Error("--budget: %r is not a byte count, size or percentage" %
                    budget)
    if isinstance(budget, int):
        return str(budget)
    if isinstance(budget, float) and budget.is_integer():
        return str(int(budget))
    if not str(budget).strip():
        raise Error("--budget: empty; give bytes (6GiB, 512MiB, 1000000) or "
                    "a percentage of the no-remat peak (40%)")
    return str(budget)


def run_as_traced(gm, example_inputs):
    """The default forward and backward compiler: aot_eager's, the module
    run as traced with the boxed calling convention, whose generated code
    empties the argument list on entry. The backward then frees each saved
    tensor after its last use, as remat's plan assumes. (A plain
    make_boxed_func(gm.forward) keeps the list, and so every saved tensor,
    alive until the backward returns.)"""
    from torch._dynamo.backends.debugging import boxed_nop
    return boxed_nop(gm, example_inputs)


def backend(budget=None, strategy="auto", explain=False, report=None,
            fw_compiler=None, bw_compiler=None, cost_profile=None):
    """A torch.compile backend (AOTAutograd with remat's partition function).

    budget: the peak of the training step as remat models it (parameters,
      gradients, inputs, saved activations and backward's working set) in
      bytes (an int, "6GiB", "512MiB") or a percentage of the no-remat plan
      ("40%"); None is "100%". Each captured graph is planned to it.
    strategy: "auto" or one of remat-opt's strategies.
    explain: print remat-opt --explain's table for each graph.
    report: a path; remat-opt --report's JSON of every graph planned.
    fw_compiler, bw_compiler: compile the modules (default:
      ``run_as_traced``, aot_eager's: run them as they are). The string
      "inductor" as fw_compiler compiles the whole step with Inductor
      (torch._inductor.compile_fx: its decompositions, joint-graph passes
      and kernels) with remat's partition in place of its min-cut one;
      bw_compiler must then be None or "inductor".
    """
    from torch._dynamo.backends.common import aot_autograd

    text = _budget_text(budget)
    _remat.check_remat_flags(text, strategy or "")
    planner = _Planner(text, strategy or "auto", explain, report,
                       cost_profile)

    if fw_compiler == "inductor" or bw_compiler == "inductor":
        if fw_compiler != "inductor" or bw_compiler not in (None, "inductor"):
            raise Error("Inductor compiles the forward and the backward "
                        "together: give fw_compiler='inductor' and "
                        "bw_compiler None or 'inductor'")
        return _inductor_backend(planner)
    for name, value in (("fw_compiler", fw_compiler),
                        ("bw_compiler", bw_compiler)):
        if isinstance(value, str):
            raise Error("%s: unknown compiler '%s'; give a callable "
                        "(gm, example_inputs) or 'inductor'" % (name, value))

    fw = fw_compiler or run_as_traced
    bw = bw_compiler or fw_compiler or run_as_traced

    def inference(gm, example_inputs):
        warnings.warn("remat.torch: a graph without backward (forward only): "
                      "nothing to plan, it runs as traced", stacklevel=2)
        return fw(gm, example_inputs)

    compile_aot = aot_autograd(fw_compiler=fw, bw_compiler=bw,
                               inference_compiler=inference,
                               partition_fn=planner.partition)

    def compile_graph(gm, example_inputs):
        planner.note_graph()
        return compile_aot(gm, example_inputs)

    compile_graph.planner = planner
    return compile_graph


def _inductor_backend(planner):
    """Inductor's torch.compile backend with remat's partition function:
    the joint graph goes through Inductor's own decompositions and
    joint-graph passes, then remat partitions it, then Inductor compiles
    both modules (torch._inductor.config.custom_partitioner_fn)."""
    from torch._inductor import config
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.custom_graph_pass import CustomPartitionerFn

    class RematPartition(CustomPartitionerFn):
        def __call__(self, gm, joint_inputs, **kwargs):
            return planner.partition(gm, joint_inputs, **kwargs)

        def uuid(self):
            # The partition depends on the budget and on the graph's plan:
            # None keeps Inductor from reusing a cached compile of another.
            return None

    partition_fn = RematPartition()

    def compile_graph(gm, example_inputs):
        planner.note_graph()
        planned = planner.graphs_partitioned
        with config.patch(custom_partitioner_fn=partition_fn):
            compiled = compile_fx(gm, example_inputs)
        if planner.graphs_partitioned == planned:
            warnings.warn("remat.torch: a graph without backward (forward "
                          "only): nothing to plan, Inductor compiles it as "
                          "it is", stacklevel=2)
        return compiled

    compile_graph.planner = planner
    return compile_graph


def _unwrapped(fn):
    """fn raising remat.Error itself rather than dynamo's
    BackendCompilerFailed around it."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as error:
            inner = getattr(error, "inner_exception", None)
            if isinstance(inner, Error):
                raise inner.with_traceback(None) from None
            raise
    return call


def compile(model_or_fn, budget=None, strategy="auto", explain=False,
            report=None, fw_compiler=None, bw_compiler=None, **kwargs):
    """torch.compile(model_or_fn) with remat's backend (see ``backend``);
    remat's errors are raised as remat.Error. Other keyword arguments go to
    torch.compile (dynamic defaults to False: remat plans static shapes)."""
    kwargs.setdefault("dynamic", False)
    compiled = torch.compile(
        model_or_fn,
        backend=backend(budget=budget, strategy=strategy, explain=explain,
                        report=report, fw_compiler=fw_compiler,
                        bw_compiler=bw_compiler),
        **kwargs)
    if isinstance(compiled, torch.nn.Module):
        compiled.forward = _unwrapped(compiled.forward)
        return compiled
    return _unwrapped(compiled)


def measured_peak(step, persistent=()):
    """The measured peak of one call of step(): the bytes of the tensors in
    persistent (parameters, the batch: alive before and after) plus the most
    CPU tensor bytes step() allocated beyond them at once, from
    torch.profiler's memory events.

    Each event carries the CPU allocator's running total, but that total is
    kept across profiler sessions and misses every free made while no
    profiler runs: the gradients and the loss of an earlier profiled step,
    freed after it, stay in it for good. So the peak is taken relative to the
    total just before the first event of this session, not as the total
    itself (which rises from one profiled step to the next by what the
    earlier ones left behind)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU],
                 profile_memory=True) as prof:
        step()
    events = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        fields = event.extra_fields
        if type(fields).__name__ == "_ExtraFields_Allocation" and \
                str(fields.device) == "cpu":
            events.append((event.start_time_ns, fields.total_allocated,
                           fields.alloc_size))
        stack.extend(event.children)
    peak = 0
    if events:
        events.sort()
        _, total, size = events[0]
        before = total - size
        peak = max(total for _, total, _ in events) - before
    return peak + sum(_nbytes(t) for t in persistent)
