#!/usr/bin/env bash
# Runs one hardware tier's conformance on the real CUDA driver:
#   run_tier.sh <tier> <min GPUs> <xmc> <out dir> [qualify args...]
# With XMC_CUDA_INTERPOSE=<path to libxmc_cuda_interpose.so> (preset gpu-carry builds it in
# lib/), the backend runs through the interposer over the real driver (fakes/cuda_interpose,
# issue 28): the fault-injection and ledger tests run there instead of being unsupported, and
# every test ends checking the ledger empty (XMC_LEDGER_EVERY_TEST=1).
# On a machine without enough GPUs it exits 77 (ctest: skipped) and says why.
# A tier that should run but passes no requirement fails (SPEC 6).
set -uo pipefail
tier=$1 need=$2 xmc=$3 out=$4; shift 4
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" -lt "$need" ]; then
  echo "$tier: skipped: needs $need GPU(s), this machine has ${gpus:-0} (nvidia-smi)"
  exit 77
fi
unset XMC_CUDA_DRIVER  # the real libcuda.so.1
if [ -n "${XMC_CUDA_INTERPOSE:-}" ]; then
  if [ ! -r "$XMC_CUDA_INTERPOSE" ]; then
    echo "$tier: FAILED: XMC_CUDA_INTERPOSE='$XMC_CUDA_INTERPOSE' is not a readable file"
    exit 2
  fi
  # The interposer loads the real driver itself (XMC_CUDA_INTERPOSE_REAL, default libcuda.so.1).
  export XMC_CUDA_DRIVER=$XMC_CUDA_INTERPOSE
  # ... and every test checks the driver's ledger empty once its instances are closed.
  export XMC_LEDGER_EVERY_TEST=${XMC_LEDGER_EVERY_TEST:-1}
  echo "$tier: through the interposer $XMC_CUDA_DRIVER over ${XMC_CUDA_INTERPOSE_REAL:-libcuda.so.1}"
fi
"$xmc" qualify --backend cuda --out "$out" "$@"
rc=$?
passed=$(sed -n 's/.*passed:\([0-9]*\).*/\1/p' "$out/summary.txt" 2>/dev/null)
if [ "${passed:-0}" -eq 0 ]; then
  echo "$tier: FAILED: the tier should run on this machine but passed no requirement"
  exit 1
fi
exit $rc
