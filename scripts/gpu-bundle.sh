#!/usr/bin/env bash
# Builds, on this machine, a self-contained bundle for a GPU machine that has
# the NVIDIA driver, CUDA (cuBLAS) and PyTorch but none of the Debian
# libraries remat links (ONNX, protobuf, OpenBLAS, ...):
#
#   build-gpu-bundle/bundle/
#     bin/remat-run, bin/remat-cuda-tests   wrappers: LD_LIBRARY_PATH=lib + CUDA
#     libexec/                              the stripped Release binaries
#     lib/                                  every non-glibc, non-CUDA library
#                                           they load (from ldd)
#     models/, tests/...                    the models and fixtures gpu-check uses
#     gpu-check.sh, gpu_torch_bench.py      the check (scripts/gpu-check.sh)
#
# cudart is linked statically; cuBLAS/cuBLASLt (hundreds of MiB, opened
# with dlopen) and the driver come from the GPU machine (gpu-check.sh finds them in the CUDA
# toolkit or PyTorch's nvidia-* wheels). The bundle must stay under 64 MiB:
# the script fails if it does not.
#
# Usage: scripts/gpu-bundle.sh [BUILD_DIR]   (default build-gpu-bundle)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${1:-build-gpu-bundle}
bundle=$build/bundle
limit_mib=64

if [ -f /work/ccache.env ]; then . /work/ccache.env; fi
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
start=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DREMAT_WERROR=ON \
  -DREMAT_CUDA=ON "${launcher[@]}" >"$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j"${JOBS:-2}" --target remat-run remat-cuda-tests
echo "gpu-bundle: built in $(( $(date +%s) - start )) s"

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/libexec" "$bundle/lib" "$bundle/tests"
for exe in "$build/remat-run" "$build/tests/remat-cuda-tests"; do
  strip -o "$bundle/libexec/$(basename "$exe")" "$exe"
done

# Libraries: everything ldd resolves except glibc's own, the dynamic loader
# and the CUDA libraries the GPU machine brings.
is_system() {
  case "$1" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*) return 0 ;;
    libcuda.so*|libcudart.so*|libcublas.so*|libcublasLt.so*) return 0 ;;
  esac
  return 1
}
for exe in "$bundle"/libexec/*; do
  ldd "$exe" | awk '/=>/ { print $1, $3 }' | while read -r name path; do
    if is_system "$name"; then continue; fi
    if [ "$path" = "not" ]; then echo "gpu-bundle: $name not found for $exe" >&2; exit 1; fi
    [ -e "$bundle/lib/$name" ] || cp -L "$path" "$bundle/lib/$name"
  done
done
strip --strip-unneeded "$bundle"/lib/*.so* 2>/dev/null || true
# OpenBLAS carries kernels for every x86 CPU (35 MiB): libraries over 8 MiB
# travel xz-compressed and unpack-libs.sh restores them on first use.
for lib in "$bundle"/lib/*; do
  if [ "$(stat -c %s "$lib")" -gt $((8 << 20)) ]; then xz -6 -T2 "$lib"; fi
done
cat >"$bundle/unpack-libs.sh" <<'UNPACK'
#!/usr/bin/env bash
# Restores the bundle's xz-compressed libraries (once; xz or Python's lzma).
here=$(cd "$(dirname "$0")" && pwd)
for packed in "$here"/lib/*.xz; do
  [ -e "$packed" ] || continue
  lib=${packed%.xz}
  [ -e "$lib" ] && continue
  if command -v xz >/dev/null; then
    xz -dc "$packed" >"$lib.tmp"
  else
    "${PYTHON:-python3}" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$packed" "$lib.tmp"
  fi && mv "$lib.tmp" "$lib" || { echo "unpack-libs: cannot unpack $packed" >&2; exit 1; }
done
UNPACK
chmod +x "$bundle/unpack-libs.sh"

for tool in remat-run remat-cuda-tests; do
  cat >"$bundle/bin/$tool" <<WRAP
#!/usr/bin/env bash
# Runs libexec/$tool with the bundle's libraries (and the CUDA ones
# gpu-check.sh put in REMAT_CUDA_LIBS).
here=\$(cd "\$(dirname "\$0")/.." && pwd)
"\$here/unpack-libs.sh" || exit 1
export LD_LIBRARY_PATH="\$here/lib\${REMAT_CUDA_LIBS:+:\$REMAT_CUDA_LIBS}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "\$here/libexec/$tool" "\$@"
WRAP
  chmod +x "$bundle/bin/$tool"
done

cp -r models "$bundle/models"
mkdir -p "$bundle/tests/onnx" "$bundle/tests/tools/Inputs"
cp -r tests/fixtures "$bundle/tests/fixtures"
rm -rf "$bundle/tests/fixtures/__pycache__"
cp -r tests/onnx/Inputs "$bundle/tests/onnx/Inputs"
cp tests/tools/Inputs/remat-mlp.rir tests/tools/Inputs/preln.rir \
  tests/tools/Inputs/bert-tiny-nodrop.json "$bundle/tests/tools/Inputs/"
cp scripts/gpu-check.sh scripts/gpu_torch_bench.py "$bundle/"
git -C "$root" describe --always --dirty --abbrev=40 >"$bundle/COMMIT" 2>/dev/null || true

size_kib=$(du -sk "$bundle" | cut -f1)
echo "gpu-bundle: $bundle: $((size_kib / 1024)) MiB ($size_kib KiB), limit $limit_mib MiB"
du -sk "$bundle"/* | sort -rn | head -8
if [ "$size_kib" -ge $((limit_mib * 1024)) ]; then
  echo "gpu-bundle: error: the bundle is over $limit_mib MiB" >&2
  exit 1
fi
