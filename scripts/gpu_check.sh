#!/usr/bin/env bash
# Everything GPU-side of the CUDA backend in one command, in two halves (the GPU test machine has
# nvcc, CMake, ninja and PyTorch but none of the Debian packages the build needs - OpenBLAS,
# nlohmann-json, Highway, PCRE2, utf8proc, GoogleTest - and no network):
#
#   scripts/gpu_check.sh pack [BUILD_DIR]   on the development machine (CUDA toolkit + the
#       Debian packages): configures BUILD_DIR (default build/gpu: CUDA on; benchmarks and
#       -march=native off), builds the `cuda` tests and the zero CLI, and packs them with every
#       shared library `ldd` names that the GPU machine lacks, and a relocatable OpenMPI, into
#       build/gpu-bundle/bundle.tar.xz (git-ignored, about 25 MB with xz; name build/gpu-bundle
#       in the device tool's `carry`). The CUDA
#       libraries (cudart, cuBLASLt) are not packed: the GPU machine's CUDA 13 provides them.
#   scripts/gpu_check.sh run [BUNDLE]       on the GPU machine: prints the device, runs the `cuda`
#       tests (3 minutes at most each), the multi-rank ones under the bundle's own OpenMPI
#       (`mpirun -np 2`, two processes sharing the GPU), `zero train --device cuda`
#       on the tiny GPT-2 and Llama models (f32 and bf16), TensorBoard loading zero's event files
#       (scripts/tensorboard_check.py), and a summary table last.
#   scripts/gpu_check.sh sanitize [BUNDLE]  on the GPU machine: compute-sanitizer memcheck and
#       racecheck on the op tests (sanitize_binaries below; a device call of its own: racecheck
#       is slow). SANITIZE_TOOLS, SANITIZE_LIMIT_S (per tool and binary) and SANITIZE_FILTER (a
#       gtest filter for every binary) narrow it; SANITIZE_BINARY names the binaries instead.
#   scripts/gpu_check.sh build              on the GPU machine: tries a configure and build in
#       place and says which dependency is missing (the fallback when no bundle was carried).
#   scripts/gpu_check.sh all [WORKLOAD ...]  on the GPU machine: `run` (capped at GPU_RUN_CAP_S,
#       default 300 s), then `speed` with what is left of GPU_ALL_BUDGET_S (default 540 s): one
#       device call for a lease that has room for one. GPU_ALL_AB="VAR=VALUE ..." adds a run of
#       zero alone with those settings (an A/B against the full run); several settings separated
#       by ';' run one after another while time is left (e.g. "ZERO_CUDA_ATTENTION_BWD=v2;
#       ZERO_CUDA_ATTENTION_BWD=v2-hoist"), each on the first workload named unless the group
#       says AB_WORKLOAD=<workload>; GPU_ALL_NCU=1 adds Nsight
#       Compute reports of the attention and norm kernels (profile_kernels); GPU_ALL_GENERATE=1
#       adds `zero generate` speeds (generate_speed); GPU_ALL_SANITIZE=1 adds
#       compute-sanitizer memcheck with the time left; GPU_ALL_FIXTURES=1 makes the Hugging Face
#       reference fixtures (tools/hf_reference/make_reference.py) beside the run. Everything but
#       the speed record comes
#       back in run_logs.tar.gz and extra.tar.gz (the device tool returns at most 8 files).
#   scripts/gpu_check.sh speed [WORKLOAD ...] on the GPU machine: issue 13's benchmark,
#       bench/gpu_speed.sh with the bundle's bin/zero (zero train vs PyTorch torch.compile and
#       eager, same shapes, same card); writes gpu_latest.json, gpu_kernels_latest.md and the
#       logs under $OUT. About 5-6 minutes; bench/gpu_speed_notes.md says what it measures.
#
# Example (device tool): carry ["build/gpu-bundle"], command "scripts/gpu_check.sh run"
# (or "scripts/gpu_check.sh speed").
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-run}
# The GPU test binaries (ctest label `cuda`): built, packed and run together.
cuda_tests=(backend_test_cuda_runtime backend_test_cuda_ops backend_test_cuda_vocab_slice
            backend_test_cuda_strided_logits backend_test_cuda_cross_entropy_paths
            backend_test_cuda_mixed_gradients engine_test_cuda_training backend_test_cuda_nccl
            model_test_cuda_hf_reference tools_test_cuda_train_cli engine_test_cuda_offload
            backend_test_cuda_gemm_split backend_test_cuda_norms backend_test_cuda_pointwise_vectors
            backend_test_cuda_attention_variants backend_test_cuda_column_sums
            backend_test_cuda_gemm_autotune backend_test_cuda_cublaslt_library
            backend_test_cuda_gelu_epilogue backend_test_cuda_onebit backend_test_cuda_muon
            backend_test_cuda_cached_attention generation_test_cuda_generation
            backend_test_cuda_moe backend_test_cuda_qk_norm backend_test_cuda_int8_groups)
# The op tests compute-sanitizer runs (`sanitize`): every kernel's own test. In
# backend_test_cuda_ops only the kernel tests (the rest drive whole models, slow under racecheck).
sanitize_binaries=(backend_test_cuda_ops backend_test_cuda_norms backend_test_cuda_pointwise_vectors
                   backend_test_cuda_column_sums backend_test_cuda_mixed_gradients
                   backend_test_cuda_attention_variants backend_test_cuda_gelu_epilogue
                   backend_test_cuda_onebit backend_test_cuda_muon backend_test_cuda_cached_attention
                   backend_test_cuda_moe backend_test_cuda_qk_norm backend_test_cuda_int8_groups)
sanitize_ops_filter='CudaOps.Embedding*:CudaOps.Norms*:CudaOps.Attention*:CudaOps.CrossEntropy*:CudaOps.Sums*:CudaOps.Rounding*:CudaOps.CopyWith*:CudaOps.Optimizer*:CudaOps.Rope*:CudaOps.Large*'
# Multi-rank GPU tests, run as `mpirun -np 2` (ranks sharing the one GPU through HostStagedComm).
mpi_cuda_tests=(engine_mpi_test_cuda_host_staged)

pack() {
  local build=${1:-$root/build/gpu}
  local bundle=$root/build/gpu-bundle-staging
  set -e
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZERO_CUDA=ON -DZERO_MPI=ON \
    -DZERO_BUILD_BENCH=OFF -DZERO_NATIVE=OFF \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
  cmake --build "$build" -j"$(nproc)" --target zero_cli "${cuda_tests[@]}" "${mpi_cuda_tests[@]}"
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib"
  local bins=("$build/src/zero") t
  for t in "${cuda_tests[@]}" "${mpi_cuda_tests[@]}"; do bins+=("$build/tests/$t"); done
  for b in "${bins[@]}"; do
    cp "$b" "$bundle/bin/"
    strip --strip-debug "$bundle/bin/$(basename "$b")" || true
  done
  # Every resolved shared library except glibc's, the compiler runtime's (the GPU machine's are
  # newer, and compute-sanitizer must not load ours), zlib/udev (in every base image), the CUDA
  # toolkit's and the driver's, and NCCL's (218 MB: PyTorch's wheels carry it, see use_bundle).
  for b in "${bins[@]}"; do
    ldd "$b" | awk '/=> \// {print $3}'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*|libz.so*|libudev*|libcuda.so*|libcudart*|libcublas*|libnccl*) ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done
  pack_mpi_runtime "$bundle"
  # OpenBLAS alone is 36 MB: compressed, the bundle fits the device tool's 64 MiB carry.
  rm -rf "$root/build/gpu-bundle"
  mkdir -p "$root/build/gpu-bundle"
  # The commit the binaries were built from (the GPU machine's copy may have no .git).
  git -C "$root" describe --always --dirty >"$bundle/COMMIT" 2>/dev/null || echo unknown >"$bundle/COMMIT"
  # xz with a dictionary larger than the whole tar: every test binary carries the same ~18 MB
  # fatbin of the kernels, which the window then stores once (178 MB with xz's default 8 MiB
  # window, 24 MB with this one; decompressing needs 256 MiB of memory).
  tar -cf - -C "$bundle" bin lib ompi pmix2 COMMIT |
    xz -T2 --lzma2=preset=6,dict=256MiB >"$root/build/gpu-bundle/bundle.tar.xz"
  rm -rf "$bundle"
  echo "bundle: build/gpu-bundle/bundle.tar.xz ($(du -sh "$root/build/gpu-bundle/bundle.tar.xz" | cut -f1))"
  # The device tool carries at most 64 MiB: say so here rather than at the device.
  local bytes
  bytes=$(stat -c %s "$root/build/gpu-bundle/bundle.tar.xz")
  if (( bytes > 60 * 1024 * 1024 )); then
    echo "the bundle is over 60 MiB, too big for the device tool's carry; its largest files:" >&2
    tar -tJvf "$root/build/gpu-bundle/bundle.tar.xz" | sort -k3 -n | tail -3 >&2
    return 1
  fi
}

# Debian's OpenMPI runtime (mpirun, orted, the MCA components, help texts) and its PMIx, laid
# out under the bundle so that OPAL_PREFIX and PMIX_PREFIX relocate them (use_bundle): the GPU
# machine has no MPI. Components for fabrics a single machine never uses (InfiniBand verbs, UCX,
# libfabric, PSM) stay behind with their libraries. Their shared libraries join the bundle's.
pack_mpi_runtime() {
  local bundle=$1 arch=x86_64-linux-gnu
  local components=/usr/lib/$arch/openmpi/lib/openmpi3
  mkdir -p "$bundle/ompi/bin" "$bundle/ompi/share" "$bundle/ompi/lib/$arch/openmpi/lib/openmpi3" \
    "$bundle/pmix2/lib"
  cp -L /usr/bin/orterun "$bundle/ompi/bin/mpirun"
  cp -L /usr/bin/orted "$bundle/ompi/bin/orted"
  local c
  for c in "$components"/*.so; do
    case "$(basename "$c")" in
      *ucx*|*ofi*|*openib*|*psm*|*verbs*|*usnic*|*portals*|*java*) ;;
      *) cp -L "$c" "$bundle/ompi/lib/$arch/openmpi/lib/openmpi3/" ;;
    esac
  done
  cp -rL /usr/share/openmpi "$bundle/ompi/share/"
  cp -rL "/usr/lib/$arch/pmix2/lib/pmix" "$bundle/pmix2/lib/"
  cp -rL "/usr/lib/$arch/pmix2/share" "$bundle/pmix2/"
  local f
  for f in "$bundle/ompi/bin/"* "$bundle/ompi/lib/$arch/openmpi/lib/openmpi3/"*.so \
           "$bundle/pmix2/lib/pmix/"*.so; do
    ldd "$f" | awk '/=> \// {print $3}'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*|libz.so*|libudev*) ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done
}

build_in_place() {
  echo "== configuring on this machine (CUDA on)"
  local log=/tmp/zero_gpu_configure.log
  if ! cmake -S "$root" -B "$root/build/gpu-local" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DZERO_CUDA=ON -DZERO_BUILD_BENCH=OFF -DZERO_NATIVE=OFF >"$log" 2>&1; then
    echo "configure failed; the missing dependency:"
    grep -E "Could NOT find|not found|No package|Could not find" "$log" | head -5
    grep -q GTest "$log" && echo "GoogleTest is missing here: the cuda tests cannot be built on this machine."
    echo "Build the bundle on the development machine instead: scripts/gpu_check.sh pack, then carry build/gpu-bundle."
    return 1
  fi
  cmake --build "$root/build/gpu-local" -j"$(nproc)" --target zero_cli "${cuda_tests[@]}" || return 1
  mkdir -p "$root/build/gpu-bundle/bin"
  cp "$root/build/gpu-local/src/zero" "$root/build/gpu-local/tests/"*cuda* "$root/build/gpu-bundle/bin/" 2>/dev/null
}

# Unpacks the carried bundle (or takes a bin/ folder built in place) and points the library path
# at its libraries and the CUDA toolkit's; sets `bundle` to the folder holding bin/.
use_bundle() {
  bundle=${1:-$root/build/gpu-bundle}
  if [[ -f "$bundle/bundle.tar.xz" ]]; then
    mkdir -p /tmp/zero-gpu-bundle
    # Python's tarfile (lzma) where the machine has no xz for tar.
    tar -xJf "$bundle/bundle.tar.xz" -C /tmp/zero-gpu-bundle 2>/dev/null ||
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$bundle/bundle.tar.xz" /tmp/zero-gpu-bundle
    bundle=/tmp/zero-gpu-bundle
  fi
  if [[ ! -x "$bundle/bin/zero" ]]; then
    echo "no bundle at $bundle: run 'scripts/gpu_check.sh pack' on the development machine and carry" \
         "build/gpu-bundle, or 'scripts/gpu_check.sh build' here"
    return 1
  fi
  export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  export PATH="$PATH:/usr/local/cuda/bin"  # nvcc, compute-sanitizer
  # PyTorch's wheels carry cuBLASLt too: a fallback where the toolkit's lib64 lacks it.
  local torch_libs
  torch_libs=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
  [[ -n "$torch_libs" ]] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$torch_libs"
  # NCCL is not packed (too big): the toolkit's when it has one, else PyTorch's wheel's.
  local nccl_libs
  nccl_libs=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
  [[ -n "$nccl_libs" ]] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl_libs"
  # The binaries were built elsewhere: the Hugging Face fixtures are this tree's.
  export ZERO_TEST_FIXTURES="$root/tests/fixtures"
  export ZERO_CLI_PATH="$bundle/bin/zero"  # the tests that run `zero` as a user would
  # The packed OpenMPI, relocated (pack_mpi_runtime); the device machine runs as root.
  if [[ -x "$bundle/ompi/bin/mpirun" ]]; then
    export PATH="$bundle/ompi/bin:$PATH" OPAL_PREFIX="$bundle/ompi" PMIX_PREFIX="$bundle/pmix2"
    export PMIX_MCA_pcompress=^zlib OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_rmaps_base_oversubscribe=1
  fi
  return 0
}

run() {
  use_bundle "${1:-}" || return 1
  local out=${OUT:-/tmp/zero_gpu_check}
  mkdir -p "$out"
  echo "== device"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  nvcc --version 2>/dev/null | tail -1
  echo "== libraries"
  ldd "$bundle/bin/backend_test_cuda_ops" | grep -E "not found|cudart|cublas" || true

  declare -A status
  local t
  for t in "${cuda_tests[@]}"; do
    echo "== $t"
    # A hang must not eat the device call (10 minutes): each binary gets 3.
    timeout 180 "$bundle/bin/$t" --gtest_color=no 2>&1 | tee "$out/$t.log" | grep -E "^\[  (FAILED|SKIPPED|  OK|PASSED) |Failure|error|Expected|Which is|cpu |gpu |on the (CPU|GPU)" | head -120
    case ${PIPESTATUS[0]} in
      0) status[$t]=pass ;;
      124) status[$t]="FAIL (timed out)" ;;
      *) status[$t]=FAIL ;;
    esac
    grep -qE "SKIPPED \] [1-9]" "$out/$t.log" && status[$t]="${status[$t]} (skips)"
  done

  for t in "${mpi_cuda_tests[@]}"; do
    echo "== mpirun -np 2 $t"
    if ! command -v mpirun >/dev/null; then
      status[$t]="FAIL (no mpirun: the bundle has no ompi/)"
      continue
    fi
    OMP_NUM_THREADS=1 timeout 300 mpirun --oversubscribe -np 2 "$bundle/bin/$t" --gtest_color=no 2>&1 |
      tee "$out/$t.log" | grep -E "^\[  (FAILED|SKIPPED|  OK|PASSED) |Failure|rank [0-9]|Expected|Which is" | head -60
    case ${PIPESTATUS[0]} in
      0) status[$t]=pass ;;
      124) status[$t]="FAIL (timed out)" ;;
      *) status[$t]=FAIL ;;
    esac
    grep -qE "SKIPPED \] [1-9]" "$out/$t.log" && status[$t]="${status[$t]} (skips)"
  done

  local model precision
  for model in tiny tiny-llama; do
    for precision in f32 bf16; do
      local flags=()
      [[ $precision == bf16 ]] && flags=(--bf16 true)
      echo "== zero train --device cuda --model $model ($precision)"
      "$bundle/bin/zero" train --device cuda --model "$model" --steps 20 --seq-len 64 "${flags[@]}" \
        --log-json "$out/train_${model}_${precision}.jsonl" 2>&1 | tee "$out/train_${model}_${precision}.log" | tail -8
      local rc=${PIPESTATUS[0]}
      echo "-- the same run on the CPU oracle"
      "$bundle/bin/zero" train --device cpu --model "$model" --steps 20 --seq-len 64 "${flags[@]}" 2>&1 | tail -3
      status[train_${model}_${precision}]=$([[ $rc -eq 0 ]] && echo ran || echo "FAIL (rc $rc)")
    done
  done

  # Issue 17: TensorBoard itself loads the event files zero writes (the tensorboard package is
  # on this machine, not on the development one), checked against the csv_monitor files.
  echo "== TensorBoard reads zero's event files"
  local tb_out=$out/monitors
  rm -rf "$tb_out"
  cat >"$out/tb_config.json" <<EOF
{"train_micro_batch_size_per_gpu": 4, "steps_per_print": 5,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
 "tensorboard": {"enabled": true, "output_path": "$tb_out", "job_name": "tb"},
 "csv_monitor": {"enabled": true, "output_path": "$tb_out", "job_name": "csv"}}
EOF
  if "$bundle/bin/zero" train --device cpu --model tiny --steps 20 --seq-len 32 \
      --deepspeed "$out/tb_config.json" >"$out/tb_train.log" 2>&1; then
    env -u LD_LIBRARY_PATH python3 "$root/scripts/tensorboard_check.py" "$tb_out/tb" "$tb_out/csv"
    case $? in
      0) status[tensorboard]=pass ;;
      2) status[tensorboard]="skipped (no tensorboard package)" ;;
      *) status[tensorboard]=FAIL ;;
    esac
  else
    tail -5 "$out/tb_train.log"
    status[tensorboard]="FAIL (zero train)"
  fi

  echo
  echo "== summary ($(date -u +%FT%TZ), $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo no-git))"
  local key
  for key in $(printf '%s\n' "${!status[@]}" | sort); do
    printf '  %-36s %s\n' "$key" "${status[$key]}"
  done
}

# Nsight Compute on the first launch of each attention and norm kernel of one GPT-2 124M
# training step (B 16, T 1024, bf16): throughput against the card's peaks, occupancy, launch
# shape and warp stall reasons, one text report per kernel under OUT_DIR. The clocks stay as the
# card has them (--clock-control none: leave the card's settings alone).
# Generation speed (zero generate, key/value cache): GPT-2 124M and the 1B Llama shape with
# random weights, bf16, a 128-token prompt and 256 new tokens, at batch 1 and 8. Prints the
# --json records (prefill seconds, decode tokens/s, cache bytes).
generate_speed() {
  use_bundle "" || return 1
  local ids model batch
  ids=$(seq -s, 1 128)
  for model in gpt2-124m llama-1b; do
    for batch in 1 8; do
      echo "== generate $model, batch $batch"
      timeout 120 "$bundle/bin/zero" generate --model "$model" --device cuda --dtype bf16 \
        --prompt-ids "$ids" --max-new-tokens 256 --ignore-eos --num-sequences "$batch" \
        --allow-long-sequences true --json | head -c 2000
      echo
    done
  done
}

profile_kernels() {
  local out_dir=$1
  use_bundle "" || return 1
  if ! command -v ncu >/dev/null; then
    echo "ncu not found"
    return 1
  fi
  local kernel
  # The default kernels (the norms' are templates over the norm's math: norm_*_kernel), in one
  # step of NCU_MODEL (default the Llama shape: head dimension 128, where attention is furthest
  # behind PyTorch's; gpt2-124m with NCU_BATCH=16 NCU_SEQ=1024 for D = 64).
  local model=${NCU_MODEL:-llama-1b-mha} batch=${NCU_BATCH:-4} seq=${NCU_SEQ:-2048}
  for kernel in mma_attention_forward mma_attention_dkv_v2 mma_attention_dq_from_ds \
                norm_backward_rows_kernel norm_finish_kernel embedding_backward_kernel; do
    echo "== ncu $kernel ($model, B=$batch, T=$seq)"
    timeout 90 ncu --clock-control none --kernel-name "regex:$kernel" --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis \
      "$bundle/bin/zero" train --device cuda --model "$model" --micro-batch "$batch" \
      --seq-len "$seq" --steps 1 --bf16 true --peak-tflops 989 --tiled-mlp off \
      >"$out_dir/ncu_$kernel.txt" 2>&1
    echo "rc $?"
    grep -E "Duration|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy" \
      "$out_dir/ncu_$kernel.txt" | head -8
  done
}

# compute-sanitizer memcheck and racecheck on the op tests: its own device call, as racecheck
# slows kernels down many times over.
sanitize() {
  use_bundle "${1:-}" || return 1
  local out=${OUT:-/tmp/zero_gpu_check}
  mkdir -p "$out"
  if ! command -v compute-sanitizer >/dev/null; then
    echo "compute-sanitizer not found (PATH has /usr/local/cuda/bin)"
    return 1
  fi
  # The op tests (the kernels' own tests) by default; SANITIZE_BINARY names one binary instead.
  local -a binaries=(${SANITIZE_BINARY:-${sanitize_binaries[*]}})
  local tool binary filter rc failed=0
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
    for binary in "${binaries[@]}"; do
      filter=${SANITIZE_FILTER:-*}
      if [[ -z ${SANITIZE_FILTER:-} && $binary == backend_test_cuda_ops ]]; then
        filter=$sanitize_ops_filter
      fi
      echo "== compute-sanitizer $tool ($binary)"
      timeout "${SANITIZE_LIMIT_S:-280}" compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$bundle/bin/$binary" --gtest_color=no --gtest_filter="$filter" \
        >"$out/sanitizer_${tool}_$binary.log" 2>&1
      rc=$?
      tail -5 "$out/sanitizer_${tool}_$binary.log"
      echo "-- $tool $binary: $([[ $rc -eq 0 ]] && echo clean || echo "FAIL (rc $rc)")"
      [[ $rc -eq 0 ]] || failed=1
    done
  done
  # One archive: the device tool brings back at most 8 files.
  (cd "$out" && tar -czf sanitizer_logs.tar.gz sanitizer_*.log && rm -f sanitizer_*.log)
  return $failed
}

# Issue 13's side-by-side benchmark with the carried bundle's zero (bench/gpu_speed.sh).
# PyTorch runs with the library path as it was: the bundle's libraries (libgomp, OpenMPI) are
# for zero alone.
speed() {
  local torch_path=${LD_LIBRARY_PATH:-}
  use_bundle "" || return 1
  ZERO_COMMIT=$(cat "$bundle/COMMIT" 2>/dev/null) TORCH_LD_LIBRARY_PATH=$torch_path \
    "$root/bench/gpu_speed.sh" "$bundle/bin/zero" "$@"
}

# A whole lease in one device call: `run` under a cap (its own process group, so a hung test binary
# dies with it), its logs packed into one file (the device tool brings back at most 8), then
# `speed` with what is left of GPU_ALL_BUDGET_S. Prints the run's console tail and the speed
# summary last, where the device tool's reply shows them.
all() {
  local budget=${GPU_ALL_BUDGET_S:-540} run_cap=${GPU_RUN_CAP_S:-300} start=$SECONDS
  local final_out=${OUT:-/tmp/zero_gpu_check} run_out=/tmp/zero_gpu_run
  rm -rf "$run_out"
  mkdir -p "$run_out" "$final_out"
  # GPU_ALL_FIXTURES=1: Hugging Face reference fixtures (tools/hf_reference/make_reference.py,
  # torch on the CPU) made beside the GPU run rather than after it; they come back in
  # extra.tar.gz under fixtures/hf.
  local fixtures=/tmp/zero_gpu_fixtures fixtures_pid=""
  if [[ ${GPU_ALL_FIXTURES:-0} == 1 ]]; then
    rm -rf "$fixtures"
    mkdir -p "$fixtures"
    env -u LD_LIBRARY_PATH timeout 300 python3 "$root/tools/hf_reference/make_reference.py" \
      "$fixtures/hf" >"$fixtures/console.log" 2>&1 &
    fixtures_pid=$!
  fi
  OUT=$run_out setsid "$0" run >"$run_out/console.log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null && ((SECONDS - start < run_cap)); do sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "== run: still going after ${run_cap} s, stopped" >>"$run_out/console.log"
    kill -KILL -- "-$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
  tar -czf "$final_out/run_logs.tar.gz" -C "$run_out" .
  local left=$((budget - (SECONDS - start)))
  if ((left >= 150)); then
    OUT=$final_out SPEED_BUDGET_S=$left speed "$@" >"$final_out/speed_console.log" 2>&1
  else
    echo "no time left for speed ($left s)" >"$final_out/speed_console.log"
  fi
  # GPU_ALL_AB="VAR=VALUE ...[;VAR=VALUE ...]": zero alone once more with each group of
  # settings in turn, on the first workload named or the group's AB_WORKLOAD.
  local extra=/tmp/zero_gpu_extra
  rm -rf "$extra"
  mkdir -p "$extra"
  local settings ab=0
  local -a ab_settings=()
  IFS=';' read -r -a ab_settings <<<"${GPU_ALL_AB:-}"
  for settings in "${ab_settings[@]}"; do
    [[ -n ${settings// /} ]] || continue
    left=$((budget - (SECONDS - start)))
    ((left >= 60)) || break
    ab=$((ab + 1))
    local workload=${1:-gpt2-124m-b16-t1024}
    if [[ $settings =~ (^|[[:space:]])AB_WORKLOAD=([^[:space:]]+) ]]; then
      workload=${BASH_REMATCH[2]}
    fi
    echo "settings: $settings" >"$extra/ab${ab}_console.log"
    # shellcheck disable=SC2086  # a list of assignments
    env $settings SPEED_ZERO_ONLY=1 OUT="$extra/ab$ab" SPEED_BUDGET_S=$((left - 10)) \
      "$0" speed "$workload" >>"$extra/ab${ab}_console.log" 2>&1
  done
  left=$((budget - (SECONDS - start)))
  if [[ ${GPU_ALL_NCU:-0} == 1 ]] && ((left >= 100)); then
    profile_kernels "$extra" >"$extra/ncu_console.log" 2>&1
  fi
  left=$((budget - (SECONDS - start)))
  if [[ ${GPU_ALL_GENERATE:-0} == 1 ]] && ((left >= 60)); then
    generate_speed >"$extra/generate_console.log" 2>&1
  fi
  left=$((budget - (SECONDS - start)))
  if [[ ${GPU_ALL_SANITIZE:-0} == 1 ]] && ((left >= 90)); then
    OUT="$extra/sanitize" SANITIZE_TOOLS=memcheck \
      SANITIZE_LIMIT_S=$(((left - 15) / ${#sanitize_binaries[@]})) "$0" sanitize \
      >"$extra/sanitize_console.log" 2>&1
  fi
  if [[ -n $fixtures_pid ]]; then
    wait "$fixtures_pid"
    cp -r "$fixtures" "$extra/fixtures"
  fi
  # The device tool brings back at most 8 files: the rest travels in one archive.
  mv "$final_out/speed_logs.tar.gz" "$final_out/speed_console.log" "$extra/" 2>/dev/null
  tar -czf "$final_out/extra.tar.gz" -C "$extra" .
  echo "== run console (tail; all logs in run_logs.tar.gz), $((SECONDS - start)) s in all"
  tail -c 6000 "$run_out/console.log"
  echo "== speed"
  tail -c 2500 "$extra/speed_console.log"
  local log
  for log in "$extra"/ab*_console.log; do
    [[ -f $log ]] || continue
    echo "== A/B: $(head -1 "$log")"
    tail -c 900 "$log"
  done
  if [[ -f $extra/ncu_console.log ]]; then
    echo "== ncu"
    tail -c 1500 "$extra/ncu_console.log"
  fi
  if [[ -f $extra/sanitize_console.log ]]; then
    echo "== sanitize"
    tail -c 900 "$extra/sanitize_console.log"
  fi
  if [[ -f $extra/fixtures/console.log ]]; then
    echo "== fixtures"
    tail -c 900 "$extra/fixtures/console.log"
  fi
}

case "$mode" in
  all) shift || true; all "$@" ;;
  pack) shift; pack "$@" ;;
  build) build_in_place ;;
  run) shift || true; run "$@" ;;
  sanitize) shift || true; sanitize "$@" ;;
  speed) shift; speed "$@" ;;
  *) echo "usage: scripts/gpu_check.sh pack [BUILD_DIR] | all [WORKLOAD ...] | run [BUNDLE] | sanitize [BUNDLE] | build | speed [WORKLOAD ...]" >&2; exit 2 ;;
esac
