#!/usr/bin/env bash
# One GPU machine's session in one call: the gpu1 tier (serial and --jobs 4),
# the slot and copy benchmarks at 16 MiB..1 GiB with their same-run peaks and a
# baseline recorded from them, the PyTorch tier and the IPC bench where built.
# Usage (from the repository root, binaries from the gpu-carry preset):
#   hardware/run_h200_session.sh build/gpu-carry "$OUT"
# Every step's log and package lands in OUT (packages as .tgz: a GPU machine
# hands back a few files only).
set -uo pipefail
b=$1 out=$2
x=$b/bin/xmc
mkdir -p "$out" /tmp/xmc-h200
w=/tmp/xmc-h200
step() { local name=$1; shift; local t0=$SECONDS; echo "== $name: $*"; "$@" >"$w/$name.log" 2>&1; local rc=$?
         echo "== $name: exit $rc after $((SECONDS - t0)) s"; tail -n 25 "$w/$name.log"; return 0; }
{ nvidia-smi; nvidia-smi topo -m; lscpu | head -20; } >"$w/machine.txt" 2>&1
step gpu1 hardware/run_tier.sh gpu1 1 "$x" "$w/gpu1" --tier gpu1 --timeout 60 --waivers hardware/waivers-cuda-real-driver.tsv
step gpu1-jobs4 hardware/run_tier.sh gpu1 1 "$x" "$w/gpu1-jobs4" --tier gpu1 --timeout 60 --jobs 4 --waivers hardware/waivers-cuda-real-driver.tsv
step bench "$x" bench --backend cuda --sizes 16M,64M,256M,1G --json "$w/bench.json" --write-baseline "$w/baseline.json" --tolerance 0.05
[ -x "$b/bin/xmc_gpu_transfer_bench" ] && step ipc-bench "$b/bin/xmc_gpu_transfer_bench" --backend cuda --check-targets --json "$w/transfer-bench.json"
[ -x hardware/run_pytorch_tier.sh ] && step pytorch hardware/run_pytorch_tier.sh "$x" "$w/pytorch"
tar czf "$out/h200-session.tgz" -C /tmp xmc-h200
cp "$w"/*.log "$w/machine.txt" "$out/" 2>/dev/null
ls -la "$out"
