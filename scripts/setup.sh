#!/usr/bin/env bash
# Installs the Debian packages remat needs to build and test. Idempotent and
# quiet when everything is already present.
set -euo pipefail

packages=(
  cmake ninja-build g++ python3
  llvm-14-dev llvm-14-tools       # LLVMSupport, FileCheck, lit
  doctest-dev
  libonnx-dev libprotobuf-dev protobuf-compiler   # ONNX 1.12, protobuf 3.21
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
