#!/usr/bin/env bash
# One GPU machine's session in one call: the steps named (default all) of
#   gpu1     the gpu1 tier through the interposer over the real driver (B/lib/libxmc_cuda_interpose.so:
#            every fault-injection test, the fault sweeps and the ledger after every test run on the
#            GPU, issue 28), recording the driver's own answers other than success (answers.tsv, for
#            hardware/compare_answers.sh against the fake); then once straight on the driver with
#            --jobs 4, so that a bug of the interposer cannot hide a driver fact (gpu1-interposed:
#            the first half alone)
#   selftest the CUDA self-test through the interposer (hardware/run_selftest_gpu.sh: each broken
#            CUDA backend must fail exactly what it declares, error-path bugs included)
#   overhead-per-call  the interposer's cost per driver call when no fault is scripted, in one
#            process (xmc_cuda_interpose_cost, alone and beside a thread polling as the slot watcher does)
#   overhead the same on xmc bench's rows (hardware/run_interpose_overhead.sh; BASELINE=FILE also
#            judges each run against a baseline)
#   bench    xmc bench at 16 MiB..1 GiB (each row beside its same-run peak) and a baseline from it
#   transfer xmc_gpu_transfer_bench (skips itself below two GPUs)
#   ipc      path IPC between two processes on one GPU: the transfer bodies (AFF-*) under
#            mpirun -np 2 on path ipc (hardware/run_multirank_gpu.sh), then xmc_multirank_ipc_bench
#            (dense 16 MiB, 256 MiB, 1 GiB pulled over IPC vs a raw cuMemcpyDtoD in the same run,
#            and vs the staged path); MPIEXEC names mpirun (default: mpirun on PATH). Both link
#            gloo, which the GPU machine lacks: B/lib must hold libgloo.so.0 and what it needs
#            there (libhiredis.so.0.14, libibverbs.so.1, libnl-3.so.200, libnl-route-3.so.200)
#   ipc-interposed  the ipc step's transfer bodies through the interposer (every rank's driver
#            calls through libxmc_cuda_interpose.so, the ledger checked after every test)
#   probe    the probe's fidelity cases (hardware/probe/probe_cases_fidelity.cpp) on the real
#            driver: OUT/probe-fidelity.tsv, to replay against the fake (xmc_cuda_probe --replay)
#   pytorch  the PyTorch adapter's tier (hardware/run_pytorch_tier.sh)
#   nccl     the NCCL path on one GPU: xmc_nccl_probe (a single-rank communicator's local path, and
#            what NCCL answers two ranks on one GPU), the paths the AFF-* bodies find with NCCL
#            (ranks as threads), and with mpirun two processes on the GPU forced onto NCCL (skipped
#            with NCCL's own answer where it refuses two ranks on one GPU). NCCL is
#            XMC_NCCL_LIBRARY, else PyTorch's wheel's (site-packages/nvidia/nccl/lib), else the
#            toolkit's, else libnccl.so.2 on the loader's path.
# Usage, from the repository root, with the runner, benchmarks and the cuda and
# host backends of the gpu-carry preset in B/bin and B/lib (hardware/carry.sh build/gpu-carry B):
#   hardware/run_h200_session.sh B OUT [step...]
# Each step's log and package land in OUT as files (a GPU machine hands back a
# few files only: packages are packed into OUT/<step>.tgz). Each step has a
# time limit, so that one that hangs still leaves the others' results.
set -uo pipefail
b=$1 out=$2; shift 2
steps=${*:-gpu1 bench transfer ipc pytorch}
x=$b/bin/xmc
w=/tmp/xmc-h200
# gloo and what it needs, beside the binaries (the GPU machine lacks them): the multirank runs and
# qualify's process world (libxmc_procs_world.so; without it the gpu1 tier's transfer rows that
# run in two processes read unsupported: 60/0/20 where 74/0/6 with it, H100 2026-12-06)
export LD_LIBRARY_PATH=$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$out" "$w"
step() { local name=$1 limit=$2; shift 2; local t0=$SECONDS; echo "== $name: $*"
         timeout "$limit" "$@" >"$w/$name.log" 2>&1; local rc=$?
         echo "== $name: exit $rc after $((SECONDS - t0)) s"; tail -n 40 "$w/$name.log"; cp "$w/$name.log" "$out/"; }
{ nvidia-smi; nvidia-smi topo -m; lscpu | head -20; } >"$out/machine.txt" 2>&1
mpi=${MPIEXEC:-mpirun}
mpiflags=(--allow-run-as-root --oversubscribe --bind-to none --mca btl self,tcp --mca btl_tcp_if_include lo
          --mca oob_tcp_if_include lo -x LD_LIBRARY_PATH)
for s in $steps; do
  case $s in
    gpu1|gpu1-interposed)
      rm -f "$w/answers.tsv"
      XMC_CUDA_INTERPOSE="$b/lib/libxmc_cuda_interpose.so" XMC_CUDA_INTERPOSE_ANSWERS="$w/answers.tsv" \
        step gpu1 300 hardware/run_tier.sh gpu1 1 "$x" "$w/gpu1" --tier gpu1 --timeout 60 --waivers hardware/waivers-cuda-real-driver.tsv
      [ "$s" = gpu1 ] && step gpu1-straight 240 hardware/run_tier.sh gpu1 1 "$x" "$w/gpu1-straight" --tier gpu1 --timeout 60 --jobs 4 --waivers hardware/waivers-cuda-real-driver.tsv
      cp "$w/answers.tsv" "$out/" 2>/dev/null
      tar czf "$out/gpu1.tgz" -C "$w" gpu1 $([ "$s" = gpu1 ] && echo gpu1-straight) ;;
    selftest)
      step selftest 420 hardware/run_selftest_gpu.sh "$b" "$w/selftest"
      cp "$w/selftest/selftest-gpu.tsv" "$out/" 2>/dev/null
      tar czf "$out/selftest.tgz" -C "$w" selftest ;;
    overhead-per-call)
      step overhead-per-call 60 "$b/bin/xmc_cuda_interpose_cost"
      step overhead-per-call-watcher 60 "$b/bin/xmc_cuda_interpose_cost" --watcher ;;
    overhead)
      step overhead 540 hardware/run_interpose_overhead.sh "$b" "$w/overhead"
      cp "$w/overhead/overhead.md" "$out/" 2>/dev/null
      tar czf "$out/overhead.tgz" -C "$w" overhead ;;
    bench)
      step bench 300 "$x" bench --backend cuda --sizes 16M,64M,256M,1G --json "$w/bench.json" --write-baseline "$w/baseline.json" --tolerance 0.05
      tar czf "$out/bench.tgz" -C "$w" bench.json bench.csv baseline.json 2>/dev/null ;;
    transfer)
      step transfer 120 "$b/bin/xmc_gpu_transfer_bench" --backend cuda --check-targets --json "$w/transfer-bench.json" ;;
    ipc)
      step ipc-aff 300 hardware/run_multirank_gpu.sh ipc "$mpi" -np 2 "$b/bin/xmc_multirank" "${mpiflags[@]}"
      step ipc-bench 300 "$mpi" -np 2 "${mpiflags[@]}" -x CUDA_VISIBLE_DEVICES=0 "$b/bin/xmc_multirank_ipc_bench" \
        --sizes 16M,256M,1G --reps 10 --json "$w/ipc-bench.json"
      cp "$w/ipc-bench.json" "$out/" 2>/dev/null ;;
    ipc-interposed)
      XMC_CUDA_INTERPOSE="$b/lib/libxmc_cuda_interpose.so" \
        step ipc-aff-interposed 300 hardware/run_multirank_gpu.sh ipc "$mpi" -np 2 "$b/bin/xmc_multirank" "${mpiflags[@]}" ;;
    probe)
      mapfile -t cases < <(grep -o '{"[a-z0-9_]*", Setup::' hardware/probe/probe_cases_fidelity.cpp | sed 's/{"\([a-z0-9_]*\)".*/\1/')
      step probe 120 env -u XMC_CUDA_DRIVER "$b/bin/xmc_cuda_probe" --out "$out/probe-fidelity.tsv" \
        $(printf -- '--case %s ' "${cases[@]}") ;;
    pytorch)
      step pytorch 420 hardware/run_pytorch_tier.sh "$x" "$w/pytorch"
      tar czf "$out/pytorch.tgz" -C "$w" pytorch ;;
    nccl)
      lib=${XMC_NCCL_LIBRARY:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)}
      [ -f "$lib" ] || lib=$(ls /usr/local/cuda/lib*/libnccl.so.2 /usr/local/cuda/targets/*/lib/libnccl.so.2 2>/dev/null | head -n 1)
      [ -n "$lib" ] || lib=libnccl.so.2
      echo "== nccl: XMC_NCCL_LIBRARY=$lib"
      step nccl-probe 120 env -u XMC_CUDA_DRIVER XMC_NCCL_LIBRARY="$lib" "$b/bin/xmc_nccl_probe"
      step nccl-paths 300 env -u XMC_CUDA_DRIVER XMC_NCCL_LIBRARY="$lib" "$x" run --backend cuda \
        --gtest_filter='*AFF_PATH_EveryPathIsTakenOrRefusedByEveryRank*:*AFF_NO_HANG_TwoWayExchange*'
      if command -v mpirun >/dev/null && [ -x "$b/bin/xmc_multirank" ]; then
        (export XMC_NCCL_LIBRARY="$lib"; step nccl-multirank 300 hardware/run_multirank_gpu.sh nccl mpirun -np 2 \
          "$b/bin/xmc_multirank" --allow-run-as-root --oversubscribe --bind-to none)
      else
        echo "== nccl-multirank: skipped: no mpirun or no $b/bin/xmc_multirank"
      fi ;;
  esac
done
ls -la "$out"
