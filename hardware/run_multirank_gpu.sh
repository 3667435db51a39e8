#!/usr/bin/env bash
# The transfer bodies (AFF-*) with one rank per process, every process on GPU 0, on the real CUDA
# driver (tier gpu1: two processes on one GPU):
#   run_multirank_gpu.sh <path> <mpiexec> <np flag> <np> <xmc_multirank> [mpiexec flags...]
# <path> is the data path the bodies run on (XMC_TRANSFER_PATH: staged, ipc, nccl; AFF-PATH fails
# when the backend does not take it between these processes). Without a GPU it exits 77 (ctest:
# skipped) and says why.
set -uo pipefail
path=$1 mpiexec=$2 npflag=$3 np=$4 bin=$5; shift 5
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" -lt 1 ]; then
  echo "gpu1 multirank: skipped: needs a GPU, this machine has ${gpus:-0} (nvidia-smi)"
  exit 77
fi
# The real libcuda.so.1, or through the interposer over it (XMC_CUDA_INTERPOSE names
# libxmc_cuda_interpose.so: every rank's driver calls are counted, and the ledger is checked after
# every test, issue 28).
unset XMC_CUDA_DRIVER
if [ -n "${XMC_CUDA_INTERPOSE:-}" ]; then export XMC_CUDA_DRIVER=$XMC_CUDA_INTERPOSE XMC_LEDGER_EVERY_TEST=1; fi
# Path nccl with more processes than visible GPUs: NCCL refuses two ranks on one device
# (ncclCommInitRank: invalid usage), so every body would fail on NCCL's refusal, not on the
# backend. NCCL is asked first (xmc_nccl_probe, beside the runner: two ranks on the one GPU), and
# the run skips with NCCL's own answer; an NCCL that takes them runs the bodies.
visible=${CUDA_VISIBLE_DEVICES:-0}
visible=$(echo "$visible" | tr ',' '\n' | grep -c .)
if [ "$path" = nccl ] && [ "$visible" -lt "$np" ]; then
  probe=$(dirname "$bin")/xmc_nccl_probe
  if [ ! -x "$probe" ]; then
    echo "gpu1 multirank nccl: skipped: $np processes on $visible GPU(s), which NCCL refuses (invalid usage), and no $probe to ask NCCL itself"
    exit 77
  fi
  answer=$("$probe" 2>&1 | grep -m1 '^nccl probe: two ranks on one GPU:')
  case $answer in
    *answered*)
      echo "gpu1 multirank nccl: skipped: $np processes on $visible GPU(s): NCCL refuses two ranks on one GPU: ${answer#nccl probe: two ranks on one GPU: }"
      exit 77 ;;
    *joined*joined*) ;;  # this NCCL takes two ranks on one GPU: the bodies run
    *)
      echo "gpu1 multirank nccl: xmc_nccl_probe gave no answer for two ranks on one GPU: ${answer:-nothing}"
      exit 1 ;;
  esac
fi
# NCCL refuses two ranks on one GPU, and with no IPC path the backend's own choice between two
# processes is NCCL: a run on another path leaves NCCL out (an NCCL that cannot load is no path).
if [ "$path" != nccl ]; then export XMC_NCCL_LIBRARY=/nonexistent/libnccl.so.2; fi
export XMC_TRANSFER_PATH=$path CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
pass=(-x XMC_TRANSFER_PATH -x CUDA_VISIBLE_DEVICES)
if [ -n "${XMC_NCCL_LIBRARY:-}" ]; then pass+=(-x XMC_NCCL_LIBRARY); fi
if [ -n "${XMC_CUDA_DRIVER:-}" ]; then pass+=(-x XMC_CUDA_DRIVER -x XMC_LEDGER_EVERY_TEST); fi
exec "$mpiexec" "$npflag" "$np" "$@" "${pass[@]}" "$bin" --backend cuda
