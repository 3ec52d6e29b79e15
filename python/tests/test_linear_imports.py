"""Resize and DFT, which remat imports as MatMuls by constant matrices
(frontends/onnx/Resize.h, Dft.h), train as torch's F.interpolate and torch.fft do: a
parameter read through each mode, exported by torch, gets torch's gradient from one
remat-run step, and the loss is torch's. ONNX's conformance cases check the forward
against ONNX's reference; this checks the backward, against an independent
implementation.
"""

import os
import pathlib
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the reference is torch's autograd")
onnx = pytest.importorskip("onnx", reason="the inputs and results are TensorProtos")
from onnx import numpy_helper  # noqa: E402

REMAT_OPT = os.environ.get("REMAT_OPT")

# (case, F.interpolate's arguments, exporter): upsampling and downsampling, every mode
# torch exports as Resize, an axis that is not among the last two (trilinear), and a
# rank-3 tensor (linear). TorchScript cannot export antialias (an opset-18 attribute):
# those go through dynamo, with one of the others in dynamo's form.
CASES = [
    ("bilinear-up", dict(scale_factor=2, mode="bilinear", align_corners=False), "ts17"),
    ("bilinear-corners", dict(size=(7, 5), mode="bilinear", align_corners=True), "ts17"),
    ("bilinear-down", dict(size=(3, 2), mode="bilinear", align_corners=False), "ts17"),
    ("bicubic-up", dict(size=(9, 11), mode="bicubic", align_corners=False), "ts17"),
    ("nearest-up", dict(scale_factor=3, mode="nearest"), "ts17"),
    ("bicubic-dynamo", dict(scale_factor=2, mode="bicubic", align_corners=False), "dynamo"),
    ("trilinear", dict(size=(3, 5, 6), mode="trilinear", align_corners=False), "ts17"),
    ("linear-1d", dict(size=13, mode="linear", align_corners=False), "ts17"),
    ("bilinear-antialias", dict(size=(2, 3), mode="bilinear", antialias=True), "dynamo"),
    ("bicubic-antialias", dict(size=(3, 2), mode="bicubic", antialias=True), "dynamo"),
]


# (case, the transform of a real [2, 6, 5] tensor, as a real tensor): FNet's token
# mixing (two transforms, the real part), the onesided forward, the inverse of a complex
# signal, and the inverse of a onesided spectrum (a real result). TorchScript does not
# export torch.fft: all through dynamo.
FFTS = [
    ("fftn-real", lambda x: torch.fft.fftn(x, dim=(1, 2)).real),
    ("rfft", lambda x: torch.view_as_real(torch.fft.rfft(x, dim=1))),
    ("ifft", lambda x: torch.fft.ifft(torch.fft.fft(x, dim=1), dim=2).real),
    ("irfft", lambda x: torch.fft.irfft(torch.fft.rfft(x, dim=2), dim=2)),
]


class Interpolated(torch.nn.Module):
    """loss = sum(interpolate(x * scale) * weight): scale's gradient passes back through
    the interpolation."""

    def __init__(self, shape, args):
        super().__init__()
        gen = torch.Generator().manual_seed(40)
        self.args = args
        self.scale = torch.nn.Parameter(torch.rand(shape[1:], generator=gen) + 0.5)
        out = torch.nn.functional.interpolate(torch.zeros(shape), **args).shape
        self.weight = torch.nn.Parameter(torch.randn(out[1:], generator=gen))

    def forward(self, x):
        y = torch.nn.functional.interpolate(x * self.scale, **self.args)
        return (y * self.weight).sum()


class Transformed(torch.nn.Module):
    """loss = sum(transform(x * scale) * weight)."""

    def __init__(self, shape, transform):
        super().__init__()
        gen = torch.Generator().manual_seed(40)
        self.transform = transform
        self.scale = torch.nn.Parameter(torch.rand(shape[1:], generator=gen) + 0.5)
        out = transform(torch.zeros(shape)).shape
        self.weight = torch.nn.Parameter(torch.randn(out[1:], generator=gen))

    def forward(self, x):
        return (self.transform(x * self.scale) * self.weight).sum()


def shape_for(args):
    if args["mode"] == "trilinear":
        return (2, 2, 4, 6, 5)
    if args["mode"] == "linear":
        return (2, 3, 6)
    return (2, 3, 6, 5)


@pytest.mark.parametrize("case,args,exporter", CASES, ids=[c[0] for c in CASES])
def test_resize_trains_as_torch_interpolates(tmp_path, case, args, exporter):
    shape = shape_for(args)
    check_step(tmp_path, case, Interpolated(shape, args), shape, exporter, "Resize")


@pytest.mark.parametrize("case,transform", FFTS, ids=[c[0] for c in FFTS])
def test_dft_trains_as_torch_transforms(tmp_path, case, transform):
    shape = (2, 6, 5)
    check_step(tmp_path, case, Transformed(shape, transform), shape, "dynamo", "DFT")


def check_step(tmp_path, case, model, shape, exporter, op):
    """Exports the model with the exporter, checks that the export has the op, and
    compares remat's loss and the gradients of scale and weight with torch's."""
    if not REMAT_OPT:
        pytest.skip("REMAT_OPT is not set (ctest sets it to the build's remat-opt)")
    remat_run = pathlib.Path(REMAT_OPT).parent / "remat-run"
    x = torch.rand(shape, generator=torch.Generator().manual_seed(41))
    path = tmp_path / "model.onnx"
    if exporter == "dynamo":
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
        torch.onnx.export(model, (x,), str(path), input_names=["x"], dynamo=True)
    else:
        torch.onnx.export(model, (x,), str(path), input_names=["x"], opset_version=17,
                          dynamo=False)
    graph = onnx.load(str(path)).graph
    assert any(n.op_type == op for n in graph.node), f"the export has no {op}"
    names = {init.name for init in graph.initializer}
    assert {"scale", "weight"} <= names, names

    loss = model(x)
    loss.backward()

    (tmp_path / "x.pb").write_bytes(numpy_helper.from_array(x.numpy(), "x").SerializeToString())
    train = tmp_path / "train.rir"
    subprocess.run([REMAT_OPT, str(path), "-p", "canonicalize,autodiff", "-o", str(train)],
                   check=True, capture_output=True)
    out = tmp_path / "out"
    subprocess.run([str(remat_run), str(train), "--input", f"x={tmp_path / 'x.pb'}",
                    "--threads", "2", "--dump", str(out)], check=True, capture_output=True)
    results = {p.stem: numpy_helper.to_array(onnx.load_tensor(str(p)))
               for p in out.glob("*.pb")}
    loss_name = graph.output[0].name
    got, want_loss = float(np.asarray(results[loss_name]).reshape(-1)[0]), loss.item()
    assert abs(got - want_loss) <= 1e-5 * abs(want_loss), (got, want_loss)
    for name, param in (("scale", model.scale), ("weight", model.weight)):
        want = param.grad.numpy()
        have = results[f"{name}_grad"]
        err = np.linalg.norm(have - want) / max(np.linalg.norm(want), 1e-30)
        assert err <= 1e-5, f"{case}: {name}'s gradient relative error {err:.2e}"
