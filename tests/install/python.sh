#!/usr/bin/env bash
# Installs remat from BUILD_DIR into a temporary prefix, pip-installs the
# Python package (pyproject.toml) over that prefix, so that only the
# extension is compiled, and runs its pytest suite (python/tests) with
# PYTHON, which must have nanobind, scikit-build-core, pytest, onnx and
# onnxruntime (scripts/setup.sh puts them in .venv). Exits 77 (skipped) when
# those packages are missing.
#   tests/install/python.sh BUILD_DIR PYTHON REMAT_OPT
set -euo pipefail
build_dir=$(cd "$1" && pwd)
python=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
remat_opt=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
root=$(cd "$(dirname "$0")/../.." && pwd)
if ! "$python" -c "import nanobind, scikit_build_core, pytest, onnx, onnxruntime" 2>/dev/null; then
  echo "skipped: $python lacks nanobind, scikit-build-core, pytest, onnx or onnxruntime (scripts/setup.sh installs them)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/remat-python.XXXXXX")
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
# The user's command is `pip install .`; this one builds over the installed
# libremat.so, without build isolation (no index needed), into a folder.
"$python" -m pip install --quiet --disable-pip-version-check --no-build-isolation \
  --no-deps --target "$work/site" \
  -C cmake.define.REMAT_PREFIX="$work/prefix" -C build-dir="$work/build" "$root"
cd "$work"
PYTHONPATH="$work/site" REMAT_OPT="$remat_opt" \
  "$python" -m pytest -q -p no:cacheprovider "$root/python/tests"
