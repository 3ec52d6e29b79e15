#!/usr/bin/env bash
# Installs remat from BUILD_DIR into a temporary prefix, checks what
# libremat.so exports, then configures, builds and runs a C++ consumer
# (find_package(remat), tests/install/cpp) and a C consumer (pkg-config,
# tests/install/c) against the installed tree only.
#   tests/install/run.sh BUILD_DIR MODEL BIND BUDGET
set -euo pipefail
build_dir=$(cd "$1" && pwd)
model=$2 bind=$3 budget=$4
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/remat-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build_dir" --prefix "$prefix" >/dev/null
for f in bin/remat-opt bin/remat-run bin/remat-sweep lib/libremat.so \
         include/remat/remat.h include/remat/Version.h include/remat-c/remat.h \
         lib/cmake/remat/rematConfig.cmake lib/cmake/remat/rematConfigVersion.cmake \
         lib/pkgconfig/remat.pc; do
  [ -e "$prefix/$f" ] || { echo "install: $f is missing"; exit 1; }
done
# Internal headers stay internal.
if [ -e "$prefix/include/ir" ] || [ -e "$prefix/include/driver" ]; then
  echo "install: internal headers were installed"; exit 1
fi

# libremat.so exports the C API (remat*) and the C++ API (remat::Model,
# remat::getVersion, remat::planJointGraph, remat::checkRematFlags) only: no LLVM, no internal remat symbol.
exported=$(nm -D --defined-only "$prefix/lib/libremat.so" | awk '{print $3}')
count=$(printf '%s\n' "$exported" | grep -c .)
bad=$(printf '%s\n' "$exported" | c++filt | grep -Ev '^(remat[A-Z][A-Za-z]*|remat::Model::.*|remat::getVersion\(\)|remat::planJointGraph\(.*\)|remat::checkRematFlags\(.*\)|typeinfo.* for remat::Model)$' || true)
if [ -n "$bad" ]; then
  echo "libremat.so exports symbols outside the API:"; printf '%s\n' "$bad" | head -20; exit 1
fi
echo "libremat.so exports $count symbols, all of the API"

# C++: find_package(remat 0.1) + remat::remat.
cmake -S "$here/cpp" -B "$work/cpp" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cpp" >/dev/null
"$work/cpp/consumer" "$model" "$bind" "$budget" "$work/cpp.onnx" >"$work/cpp.out"
echo "C++ consumer: $(head -c 120 "$work/cpp.out") ..."
[ -s "$work/cpp.onnx" ] || { echo "C++ consumer wrote no model"; exit 1; }

# C: pkg-config --cflags --libs remat.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -std=c11 -Wall -Werror "$here/c/main.c" -o "$work/c-consumer" \
  $(pkg-config --cflags --libs remat) -Wl,-rpath,"$prefix/lib"
"$work/c-consumer" "$model" "$bind" "$budget" "$work/c.onnx" >"$work/c.out"
echo "C consumer: $(head -c 120 "$work/c.out") ..."
cmp "$work/cpp.onnx" "$work/c.onnx" || { echo "C and C++ consumers wrote different models"; exit 1; }

# An error comes back as the message remat-opt prints.
if "$work/c-consumer" "$model" "$bind" 1KiB "$work/small.onnx" 2>"$work/c.err"; then
  echo "C consumer: a 1KiB budget did not fail"; exit 1
fi
"$prefix/bin/remat-opt" "$model" --bind "$bind" --budget 1KiB --strategy auto -o "$work/opt.onnx" 2>"$work/opt.err" || true
cmp "$work/c.err" "$work/opt.err" || { echo "C consumer and remat-opt print different errors"; exit 1; }
echo "install: ok"
