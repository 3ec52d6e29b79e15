"""Round trip of torch-exported fixtures through remat-opt (see
tests/tools/onnx-roundtrip.test). Prints one line per fixture; exits 1 on the
first difference, printing what differed."""
import subprocess
import sys
from pathlib import Path


def run(*args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"command failed: {' '.join(map(str, args))}\n{result.stderr}")
    return result


def main():
    args = sys.argv[1:]
    decomposes = args[0] == "--decomposes"
    if decomposes:
        args = args[1:]
    remat_opt, test_python, fixtures, work = args[:4]
    work = Path(work)
    for name in args[4:]:
        model = Path(fixtures) / name / "model.onnx"
        canonical = work / f"{name}.rir"
        exported = work / f"{name}.onnx"
        reimported = work / f"{name}.reimported.rir"
        bind = ["--bind", "batch=2,seq=16", "-p", "canonicalize"]
        run(remat_opt, model, *bind, "-o", canonical)
        run(remat_opt, model, *bind, "-o", exported)
        run(test_python, "-c",
            "import onnx, sys; onnx.checker.check_model("
            "onnx.load(sys.argv[1]), full_check=True)", exported)
        run(remat_opt, exported, "-o", reimported)
        expected = canonical
        if decomposes:
            # Export the re-imported graph again: from here on the graph is
            # made of opset-17 ops only and must not change any more.
            again = work / f"{name}.again.onnx"
            run(remat_opt, reimported, "-o", again)
            expected = reimported
            reimported = work / f"{name}.again.rir"
            run(remat_opt, again, "-o", reimported)
        text = canonical.read_text()
        nodes = sum(1 for line in text.splitlines() if " = " in line)
        shapes = sum(1 for line in text.splitlines() if "= Shape(" in line)
        if expected.read_bytes() != reimported.read_bytes():
            sys.exit(f"{name}: {expected} and {reimported} differ")
        suffix = " after decomposition" if decomposes else ""
        print(f"{name}: {nodes} nodes, {shapes} Shape, checker ok, "
              f"round trip identical{suffix}")


if __name__ == "__main__":
    main()
