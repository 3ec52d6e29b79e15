"""remat: fit a training step into a memory budget by rematerialization.

    import onnx, remat
    step = remat.optimize("bert.onnx", budget="6GiB", strategy="auto",
                          bind={"batch": 8, "seq": 512})
    onnx.save(step, "bert.remat.onnx")

``optimize`` turns an ONNX model (a ModelProto, its serialized bytes, or a
path: .onnx, .rir, or a BERT config .json) into a training step (forward,
backward, each weight's gradient as an output) planned to fit the budget,
as ``remat-opt --budget --strategy`` does. ``plan`` returns the memory
report and the remat decisions, ``sweep`` the memory/time curve of
``remat-sweep``. A failure raises ``remat.Error`` with the message the tools
print after ``error:``.
"""

import json
import os

from . import _remat
from ._remat import Error, Model

__all__ = ["Error", "Model", "load", "optimize", "plan", "sweep", "__version__"]
__version__ = _remat.version()


def _bind_text(bind):
    if bind is None:
        return ""
    if isinstance(bind, str):
        return bind
    return ",".join(f"{name}={int(value)}" for name, value in bind.items())


def load(model, bind=None, base_dir=None):
    """Returns a ``remat.Model`` for ``model``: an onnx.ModelProto, the bytes
    of one, or a path (.onnx, .rir, BERT config .json). ``bind`` gives the
    symbolic dims: {"batch": 8, "seq": 512} or "batch=8,seq=512".

    A ModelProto or bytes with external data (onnx.load(...,
    load_external_data=False)) needs ``base_dir``, the folder its data files
    are in, as if the model were a file there; a location must stay inside
    it once every symbolic link is followed. Without ``base_dir`` external
    data is an error. A path reads its data from the model's own folder."""
    bind = _bind_text(bind)
    base_dir = "" if base_dir is None else os.fspath(base_dir)
    if isinstance(model, Model):
        return model
    if isinstance(model, (bytes, bytearray, memoryview)):
        return Model.from_onnx_bytes(bytes(model), bind, base_dir)
    if isinstance(model, (str, os.PathLike)):
        return Model.load(os.fspath(model), bind)
    if hasattr(model, "SerializeToString"):
        return Model.from_onnx_bytes(model.SerializeToString(), bind,
                                     base_dir)
    raise TypeError(
        "remat: a model is an onnx.ModelProto, bytes or a path, not "
        + type(model).__name__)


def _optimized(model, budget, strategy, bind, pipeline, base_dir):
    loaded = load(model, bind, base_dir)
    loaded.optimize(budget=budget or "", strategy=strategy or "",
                    pipeline=pipeline or "")
    return loaded


def optimize(model, budget=None, strategy="auto", bind=None, pipeline=None,
             base_dir=None):
    """Returns the training step of ``model`` planned to fit ``budget``
    ("6GiB", "512MiB", "40%" of the peak without remat) with ``strategy``
    (auto, none, or a fixed one) as an onnx.ModelProto. ``pipeline`` replaces
    the default passes (remat-opt -p); ``base_dir`` is load's."""
    import onnx

    step = _optimized(model, budget, strategy, bind, pipeline, base_dir)
    return onnx.load_from_string(step.to_onnx_bytes())


def plan(model, budget=None, strategy="auto", bind=None, pipeline=None,
         base_dir=None):
    """Returns what ``optimize`` would plan as a dict: the memory report of
    the training step (docs/memory-report.md: peak, arena, activations kept,
    ...) with the remat pass's per-tensor decisions under "remat"."""
    step = _optimized(model, budget, strategy, bind, pipeline, base_dir)
    return json.loads(step.memory_report_json())


def sweep(model, strategies=("auto",),
          budgets=("100%", "80%", "60%", "40%", "min"), bind=None,
          base_dir=None):
    """Plans every (strategy, budget) point as ``remat-sweep`` does and
    returns its rows (dicts: point, planned_peak_bytes, predicted_ratio,
    pareto, ...)."""
    loaded = load(model, bind, base_dir)
    result = json.loads(loaded.sweep_json(list(strategies), list(budgets)))
    return result["rows"]
