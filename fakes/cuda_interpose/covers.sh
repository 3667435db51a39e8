#!/bin/sh
# cuda_interpose.covers_*: the interposer forwards every driver entry point that a program run over
# it resolves, so that nothing it asks falls through to "not found" and reads as unsupported (the
# gpu1 tier through the interposer once skipped PIN-KINDS's lock checks: the harness asks
# cuMemHostGetFlags, which the interposer did not forward).
#   covers.sh SOURCE_ROOT groups   every XMC_CU_* group of reference/cuda/cuda.hpp
#   covers.sh SOURCE_ROOT entries  every entry xmc_gpu_bench (hardware/gpu_bench.hpp: XMC_CU(...))
#                                  and the conformance harness (dlsym/resolve/find("cu...")) load
root=$1 ip=$1/fakes/cuda_interpose/interpose.hpp
case $2 in
  groups)
    for g in $(sed -n 's/^#define \(XMC_CU_[A-Z_0-9]*\)(X).*/\1/p' "$root/reference/cuda/cuda.hpp"); do
      grep -q "$g(X)" "$ip" || { echo "$g is not forwarded"; exit 1; }; echo "$g forwarded"
    done ;;
  entries)
    n=0
    for e in $( { sed -n 's/^ *XMC_CU(\(cu[A-Za-z0-9]*\),.*/\1/p' "$root/hardware/gpu_bench.hpp"
                  grep -rhoE '(dlsym\(h|resolve\(h|find\()\s*, *"cu[A-Za-z0-9_]*"|find\("cu[A-Za-z0-9_]*"' "$root/conformance/harness" |
                    sed 's/.*"\(cu[A-Za-z0-9_]*\)"/\1/'; } | sed 's/_v[0-9]*$//' | sort -u); do
      n=$((n + 1))
      grep -q "X($e)" "$root/reference/cuda/cuda.hpp" "$ip" || { echo "$e is loaded by the bench or the harness and not forwarded"; exit 1; }
    done
    echo "all $n forwarded" ;;
  *) echo "covers.sh ROOT groups|entries"; exit 2 ;;
esac
