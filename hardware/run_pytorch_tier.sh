#!/usr/bin/env bash
# The PyTorch adapter on a real GPU (label gpu1): builds adapters/pytorch
# against this machine's torch (the `python3` that imports it) unless an
# adapter library is given, then qualifies it on pinning, PIN-*, twice: with
# PyTorch's default pinned allocator (cudaHostAlloc) and with
# PYTORCH_CUDA_ALLOC_CONF=pinned_use_cuda_host_register:True (malloc +
# cudaHostRegister). The allocator's own known failures are waived, each with
# its reason and a link (hardware/waivers-pytorch.tsv); anything else that
# fails stays failed.
#   run_pytorch_tier.sh <xmc> <out dir> [<libxmc_backend_pytorch.so>]
# Writes <out>/pytorch (default mode) and <out>/pytorch_host_register, each a
# qualification package (xmc verify accepts it), their logs, and
# <out>/summary.txt (one line per mode). Exits 77 (ctest: skipped), saying
# why, without a GPU or a CUDA build of torch; 1 when a mode failed a
# requirement or passed none.
set -uo pipefail
xmc=$(readlink -f "$1") out=$2 adapter=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out" && out=$(cd "$out" && pwd)
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" -lt 1 ]; then
  echo "gpu1 pytorch: skipped: needs 1 GPU, this machine has ${gpus:-0} (nvidia-smi)"
  exit 77
fi
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.version.cuda else 1)' 2>/dev/null; then
  echo "gpu1 pytorch: skipped: python3 imports no torch built with CUDA"
  exit 77
fi
unset XMC_CUDA_DRIVER  # the real libcuda.so.1, for the adapter and for the suite's lock checks
# Without cmake (a GPU machine with PyTorch but no build tools beyond a C++
# compiler): the adapter is one file, compiled as adapters/pytorch/CMakeLists.txt
# would, against the same torch.
build_without_cmake() {
  local torch abi cxx=${CXX:-c++} src=$here/../adapters/pytorch/pytorch_backend.cpp
  torch=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))') || return 1
  abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))') || return 1
  mkdir -p "$out/adapter-build"
  local flags=(-std=c++20 -O2 -shared -fPIC -fvisibility=hidden -D_GLIBCXX_USE_CXX11_ABI="$abi" -I"$here/../include"
               -isystem "$torch/include" -isystem "$torch/include/torch/csrc/api/include")
  local libs=(-L"$torch/lib" -Wl,--no-as-needed -ltorch_cuda -Wl,--as-needed -ltorch_cpu -lc10 -ldl
              -Wl,-rpath,"$torch/lib")
  # The cudaError_t carrier where this torch has it (CMakeLists.txt probes the same).
  "$cxx" "${flags[@]}" -DXMC_TORCH_HAS_ACCELERATOR_ERROR=1 "$src" "${libs[@]}" \
      -o "$out/adapter-build/libxmc_backend_pytorch.so" > "$out/adapter-build.log" 2>&1 ||
    "$cxx" "${flags[@]}" "$src" "${libs[@]}" -o "$out/adapter-build/libxmc_backend_pytorch.so" \
      >> "$out/adapter-build.log" 2>&1
}
if [ -z "$adapter" ] && ! command -v cmake >/dev/null; then
  echo "gpu1 pytorch: no cmake here: compiling the adapter with ${CXX:-c++} directly"
  build_without_cmake || { tail -40 "$out/adapter-build.log"; echo "gpu1 pytorch: FAILED: the adapter does not build"; exit 1; }
  adapter=$out/adapter-build/libxmc_backend_pytorch.so
fi
if [ -z "$adapter" ]; then
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$here/../adapters/pytorch" -B "$out/adapter-build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    > "$out/adapter-configure.log" 2>&1 || { cat "$out/adapter-configure.log"; echo "gpu1 pytorch: FAILED: the adapter does not configure"; exit 1; }
  grep 'xmc: the PyTorch adapter' "$out/adapter-configure.log"
  cmake --build "$out/adapter-build" > "$out/adapter-build.log" 2>&1 ||
    { tail -40 "$out/adapter-build.log"; echo "gpu1 pytorch: FAILED: the adapter does not build"; exit 1; }
  adapter=$out/adapter-build/libxmc_backend_pytorch.so
  if [ ! -f "$adapter" ]; then
    echo "gpu1 pytorch: FAILED: configure built no adapter (adapter-configure.log says why)"
    exit 1
  fi
fi
python3 -c 'import torch; print("gpu1 pytorch: torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name(0))'
rc=0
: > "$out/summary.txt"
for mode in pytorch pytorch_host_register; do
  conf=
  [ "$mode" = pytorch_host_register ] && conf=pinned_use_cuda_host_register:True
  echo "gpu1 pytorch: qualifying $mode (PYTORCH_CUDA_ALLOC_CONF=${conf:-unset})"
  PYTORCH_CUDA_ALLOC_CONF=$conf "$xmc" qualify --backend "$adapter" --filter 'PIN-*' --timeout 120 \
    --waivers "$here/waivers-pytorch.tsv" --out "$out/$mode" > "$out/$mode.log" 2>&1
  r=$?
  cat "$out/$mode.log"
  line=$(grep '^xmc: tests:' "$out/$mode/summary.txt" 2>/dev/null)
  echo "$mode: ${line:-no summary} (exit $r)" >> "$out/summary.txt"
  passed=$(sed -n 's/.*passed:\([0-9]*\).*/\1/p' "$out/$mode/summary.txt" 2>/dev/null)
  if [ "${passed:-0}" -eq 0 ]; then
    echo "gpu1 pytorch: FAILED: $mode should run on this machine but passed no requirement"
    rc=1
  fi
  [ "$r" -ne 0 ] && rc=1
  # The package is checked whole, except that a run filtered to PIN-* has no
  # result for the other must-pass requirements (verify says so, naming the filter).
  # (In the mode's environment: the adapter names itself by it.)
  PYTORCH_CUDA_ALLOC_CONF=$conf "$xmc" verify "$out/$mode" >> "$out/$mode.log" 2>&1
  problems=$(PYTORCH_CUDA_ALLOC_CONF=$conf "$xmc" verify "$out/$mode" 2>&1 | grep 'PROBLEM' | grep -v 'the run selected requirements with --filter' || true)
  if [ -n "$problems" ]; then
    echo "$problems"
    echo "gpu1 pytorch: xmc verify refused the $mode package"
    rc=1
  fi
done
cat "$out/summary.txt"
exit $rc
