#!/usr/bin/env bash
# The CUDA self-test on a GPU, through the interposer over the real driver (issue 28 item 5): each
# broken CUDA backend named (default: every conformance/broken/*/<bug>.cpp whose declarations say
# `base cuda`, run by qualify in one process world) is qualified as its ctest qualifies it over the
# fake, from the same `// xmc-selftest:` lines (filter, fails, may-fail, timeout, env), and must
# fail exactly what it declares. Bugs that live only on an error path (a chunk whose undo is
# skipped, an unregistration failing halfway, a copy into a released slot) need the interposer's
# fault scripts to be reached at all on a real driver.
#   run_selftest_gpu.sh B OUT [bug...]
# B/bin/xmc, B/lib/libxmc_cuda_interpose.so and B/lib/libxmc_backend_broken_<bug>.so (gpu-carry).
# XMC_CUDA_INTERPOSE_REAL names the driver beneath (default libcuda.so.1; the fake, to try this
# script without a GPU). JOBS (default 1) qualifications run at once: four at once on one H200 made
# REG-THREADS and PIN-REFS time out on backends whose bug has nothing to do with them. Each
# requirement's limit is the declared one, but at least TIMEOUT_FLOOR (default 60) seconds: the
# declared limits fit the fake, and a real registration is slower.
# Bugs between processes (`multirank N`) run their bodies under MPIEXEC (default mpirun) -np N with
# B/bin/xmc_multirank --expect-fail, every rank through the interposer, as their ctests run them.
# Left out, each saying why: bugs on the fake NCCL (`fake-nccl`; one GPU cannot hold two NCCL
# ranks), by the benchmarks only (`bench-only`), those whose `env`
# sets the fake's own configuration (XMC_FAKE_CUDA_*, which only the fake can answer), and those
# that declare `devices N` on a machine with fewer GPUs (nvidia-smi).
# OUT/selftest-gpu.tsv: bug, verdict, qualify's exit, the detail. Verdicts: caught (exactly what it
# declares), caught+more (every declared requirement failed, and others with it: the bug reaches
# further on this driver; the others are named), MISSED (a declared requirement passed), left-out.
set -uo pipefail
b=${1:?usage: run_selftest_gpu.sh B OUT [bug...]} out=${2:?usage: run_selftest_gpu.sh B OUT [bug...]}
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
ip=$b/lib/libxmc_cuda_interpose.so
[ -x "$b/bin/xmc" ] && [ -r "$ip" ] || { echo "run_selftest_gpu.sh: $b/bin/xmc or $ip is missing (gpu-carry)"; exit 2; }
mkdir -p "$out"
if [ $# -gt 0 ]; then bugs=("$@"); else
  mapfile -t bugs < <(grep -l '^// xmc-selftest: base cuda$' "$here"/conformance/broken/*/*.cpp | xargs -n1 basename | sed 's/\.cpp$//' | sort)
fi

# one BUG: qualify it, print "bug<TAB>verdict<TAB>exit<TAB>reason".
one() {
  local bug=$1 src; src=$(ls "$here"/conformance/broken/*/"$bug".cpp 2>/dev/null | head -n 1)
  [ -n "$src" ] || { printf '%s\tMISSED\t-\tno conformance/broken/*/%s.cpp\n' "$bug" "$bug"; return; }
  local fails="" may="" filter="" timeout=60 envs=() key value gpus nps=""
  while IFS= read -r line; do
    key=${line#// xmc-selftest: }; value=${key#* }; key=${key%% *}; [ "$value" = "$key" ] && value=""
    case $key in
      fails) fails=$value ;;
      may-fail) may=${value%%:*} ;;
      filter) filter=$value ;;
      timeout) timeout=$value ;;
      env) case $value in
             XMC_FAKE_CUDA_*) printf '%s\tleft-out\t-\tits env %s is the fake'"'"'s own configuration\n' "$bug" "$value"; return ;;
             *) envs+=("$value") ;;
           esac ;;
      devices) gpus=""  # no nvidia-smi: over the fake (XMC_CUDA_INTERPOSE_REAL), whose devices are its own
               command -v nvidia-smi >/dev/null && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
               if [ -n "$gpus" ] && [ "$gpus" -lt "$value" ]; then
                 printf '%s\tleft-out\t-\tneeds %s devices, this machine has %s\n' "$bug" "$value" "$gpus"; return
               fi ;;
      multirank) nps=${value%%,*} ;;
      fake-nccl|bench-only) printf '%s\tleft-out\t-\t%s (not a one-process qualification)\n' "$bug" "$key"; return ;;
    esac
  done < <(grep '^// xmc-selftest: ' "$src")
  [ -n "$filter" ] || filter="${fails%%-*}-*"
  [ "$timeout" -ge "${TIMEOUT_FLOOR:-60}" ] || timeout=${TIMEOUT_FLOOR:-60}
  local lib=$b/lib/libxmc_backend_broken_$bug.so
  [ -r "$lib" ] || { printf '%s\tMISSED\t-\t%s not built\n' "$bug" "$lib"; return; }
  local rc
  if [ -n "$nps" ]; then
    # A bug between processes: its bodies under mpirun, one rank per process on the one GPU, every
    # rank's driver calls through the interposer (the world fault sweep aims its faults there), as
    # its multirank ctest runs them over the fake.
    local mr=$b/bin/xmc_multirank mpi=${MPIEXEC:-mpirun}
    if [ ! -x "$mr" ] || ! command -v "$mpi" >/dev/null; then
      printf '%s\tleft-out\t-\tmultirank: no %s or no %s\n' "$bug" "$mr" "$mpi"; return
    fi
    local xs=() e; for e in "${envs[@]}"; do xs+=(-x "$e"); done
    env XMC_CUDA_DRIVER="$ip" XMC_LEDGER_EVERY_TEST=1 "${envs[@]}" timeout $((timeout * 5)) "$mpi" -np "$nps" \
      --allow-run-as-root --oversubscribe --bind-to none --mca btl self,tcp --mca btl_tcp_if_include lo \
      --mca oob_tcp_if_include lo -x LD_LIBRARY_PATH -x XMC_CUDA_DRIVER -x XMC_LEDGER_EVERY_TEST "${xs[@]}" \
      "$mr" --backend "$lib" --expect-fail "$fails" --gtest_filter="*/TransferTest.${filter//-/_}_*" >"$out/$bug.log" 2>&1
    rc=$?
  else
    local args=(qualify --backend "$lib" --procs 0 --out "$out/$bug" --filter "$filter" --timeout "$timeout")
    if [ "$fails" != none ]; then args+=(--expect-fail "$fails"); [ -n "$may" ] && args+=(--may-fail "$may"); fi
    env XMC_CUDA_DRIVER="$ip" RC_PARAMS=noshrink=1 "${envs[@]}" "$b/bin/xmc" "${args[@]}" >"$out/$bug.log" 2>&1
    rc=$?
  fi
  local missed more
  missed=$(sed -n 's/^xmc selftest: NOT CAUGHT: \([A-Z0-9-]*\) .*/\1/p' "$out/$bug.log" | paste -sd, -)
  more=$(sed -n 's/^xmc selftest: UNEXPECTED: \([A-Z0-9-]*\) failed.*/\1/p' "$out/$bug.log" | paste -sd, -)
  if [ $rc -eq 0 ]; then printf '%s\tcaught\t0\tfails exactly %s\n' "$bug" "$fails"
  elif [ -z "$missed" ] && [ -n "$more" ]; then printf '%s\tcaught+more\t%d\tfails %s, and also %s\n' "$bug" "$rc" "$fails" "$more"
  else printf '%s\tMISSED\t%d\tnot caught: %s; also failed: %s; %s\n' "$bug" "$rc" "${missed:-?}" "${more:--}" \
         "$(grep -m1 -E '^xmc( selftest)?: .*(FAILED|error|cannot)' "$out/$bug.log" | cut -c1-160)"; fi
}
export -f one
export b out here ip
printf '%s\n' "${bugs[@]}" | xargs -P "${JOBS:-1}" -I{} bash -c 'one "$@"' _ {} >"$out/selftest-gpu.tsv"
sort -o "$out/selftest-gpu.tsv" "$out/selftest-gpu.tsv"
echo "through $ip over ${XMC_CUDA_INTERPOSE_REAL:-libcuda.so.1}:"
if command -v column >/dev/null; then column -t -s $'\t' "$out/selftest-gpu.tsv"; else cat "$out/selftest-gpu.tsv"; fi
caught=$(grep -c $'\tcaught\t' "$out/selftest-gpu.tsv") missed=$(grep -c $'\tMISSED\t' "$out/selftest-gpu.tsv")
more=$(grep -c $'\tcaught+more\t' "$out/selftest-gpu.tsv")
echo "run_selftest_gpu.sh: $caught caught exactly, $more caught with more, $missed missed, $(grep -c $'\tleft-out\t' "$out/selftest-gpu.tsv") left out"
[ "$missed" -eq 0 ] && [ $((caught + more)) -gt 0 ]
