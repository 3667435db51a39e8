#!/usr/bin/env bash
# What a GPU session carries (the device machine has no rapidcheck, gloo or Level Zero and no
# package registry, and takes at most 64 MiB of working tree): the gpu-carry build's runner,
# benchmarks, probes and the cuda/host backends, the interposer and qualify's process world,
# stripped, with gloo and the libraries it needs beside them, in OUT/bin and OUT/lib.
#   cmake --preset gpu-carry && cmake --build --preset gpu-carry
#   hardware/carry.sh build/gpu-carry build/carry [BUG...]
# BUG: broken backends to carry too (libxmc_backend_broken_BUG.so), e.g. cuda_bench_slowed_ten_percent
# for hardware/run_bench_honesty.sh; the whole CUDA self-test is over the limit beside the rest:
# carry its backends in a second folder (hardware/run_selftest_gpu.sh reads B/lib).
set -euo pipefail
b=${1:?usage: carry.sh B OUT [BUG...]} out=${2:?usage: carry.sh B OUT [BUG...]}
shift 2
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for x in xmc xmc_gpu_bench xmc_gpu_transfer_bench xmc_cuda_probe xmc_nccl_probe xmc_cuda_interpose_cost \
         xmc_multirank xmc_multirank_ipc_bench; do
  [ -x "$b/bin/$x" ] && cp "$b/bin/$x" "$out/bin/"
done
for l in libxmc_backend_cuda.so libxmc_backend_host.so libxmc_cuda_interpose.so libxmc_procs_world.so; do
  [ -f "$b/lib/$l" ] && cp "$b/lib/$l" "$out/lib/"
done
for bug in "$@"; do cp "$b/lib/libxmc_backend_broken_$bug.so" "$out/lib/"; done
# gloo and what it needs, from where the loader finds them here
for dep in libgloo.so.0 libhiredis.so.0.14 libibverbs.so.1 libnl-3.so.200 libnl-route-3.so.200; do
  f=$(ldconfig -p | awk -v n="$dep" '$1 == n && /x86-64/ {print $NF; exit}')
  [ -n "$f" ] || { echo "carry.sh: $dep not found here (ci/install-deps)" >&2; exit 2; }
  cp -L "$f" "$out/lib/$dep"
done
strip --strip-unneeded "$out"/bin/* "$out"/lib/*.so* 2>/dev/null || true
du -sh "$out"
