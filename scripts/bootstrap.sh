#!/usr/bin/env bash
# Installs the Debian packages zero.cpp builds with. Idempotent: packages already present are
# skipped; prints what it installs. Works as root on a fresh Debian 12 machine (or with sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  ccache                      # the CUDA simulator's build reuses the default build's objects
  libopenblas-openmp-dev      # BLAS (OpenMP threading, shares the pool with our kernels)
  libopenmpi-dev openmpi-bin  # MPI for multi-rank runs
  nlohmann-json3-dev          # JSON (configs, safetensors headers)
  libgtest-dev libgmock-dev   # tests
  libbenchmark-dev            # micro-benchmarks
  liburing-dev                # NVMe offload (io_uring)
  zlib1g-dev                  # `zero plot` PNG output
  libpcre2-dev                # tokenizer.json pre-tokenizer regexes (Unicode classes)
  libutf8proc-dev             # tokenizer.json normalizers (NFC, NFKC, ...)
  libhwy-dev                  # SIMD CPU optimizer (offload), runtime-dispatched
  clang libclang-rt-14-dev libomp-14-dev  # the `fuzz` preset: clang 14, libFuzzer + sanitizers, OpenMP
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "bootstrap: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "bootstrap: done"
