#!/usr/bin/env bash
# Installs what remat needs to build and test: Debian packages with apt-get,
# and a Python venv (.venv) with onnx, onnxruntime and numpy for the
# reference checks (never used to build or run remat). Idempotent and quiet
# when everything is already present.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  cmake ninja-build g++ python3 python3-venv
  llvm-14-dev llvm-14-tools                       # LLVMSupport, FileCheck, lit
  doctest-dev
  libonnx-dev libprotobuf-dev protobuf-compiler   # ONNX 1.12, protobuf 3.21
  libopenblas-dev                                 # MatMul/Gemm on the CPU
  clang-14 libclang-rt-14-dev                     # scripts/fuzz.sh: libFuzzer, ASan, UBSan
  python3-dev pkg-config                          # the Python package; the C consumer test
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if [ ${#missing[@]} -ne 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Reference-check packages. A failed install here is a warning; the tests
# that need them then fail under scripts/test.sh (REMAT_REQUIRE_REFERENCE=1)
# and are listed as skipped elsewhere.
# nanobind, scikit-build-core and pytest build and test the Python package
# (pyproject.toml, tests/install/python.sh); highspy solves the MILP of
# tools/bench/remat_oracle.py (tests/tools/remat-oracle.test).
python_packages=(onnx==1.23.2 onnxruntime==1.32.0 numpy==2.4.6
                 nanobind==3.1.0 scikit-build-core==1.1.2 pytest==9.2.0
                 highspy==1.15.1)
if ! .venv/bin/python -c "import onnx, onnxruntime, numpy, nanobind, scikit_build_core, pytest, highspy" 2>/dev/null; then
  echo "setup: creating .venv with ${python_packages[*]}"
  if ! { python3 -m venv .venv && .venv/bin/pip install -q --no-cache-dir --disable-pip-version-check "${python_packages[@]}"; }; then
    echo "setup: warning: could not install ${python_packages[*]}; the reference checks will be skipped" >&2
  fi
fi

# remat.torch (python/remat/torch.py, pip install .[torch]) and its tests in
# python/tests: torch and transformers, pinned to the versions tested; and
# onnxscript (with the onnx-ir it was tested with), which torch's dynamo
# exporter needs (tests/fixtures: make_fixtures.py, coverage.py). Large
# (torch's wheel brings CUDA libraries); a failed install is a warning and
# python/tests/test_torch.py and test_coverage.py are then skipped.
torch_packages=(torch==2.15.0 transformers==5.23.0 onnxscript==0.7.2 onnx-ir==1.1.0)
if ! .venv/bin/python -c "import torch, transformers, onnxscript" 2>/dev/null; then
  echo "setup: installing ${torch_packages[*]} into .venv"
  if ! .venv/bin/pip install -q --no-cache-dir --disable-pip-version-check "${torch_packages[@]}"; then
    echo "setup: warning: could not install ${torch_packages[*]}; remat.torch's tests will be skipped" >&2
  fi
fi
