#!/usr/bin/env bash
# Is `xmc bench` honest on this GPU? One command (issue 30 item 6, SPEC 9 and 10):
#   peaks     xmc's copy peaks beside NVIDIA nvbandwidth's at 16 MiB..1 GiB (hardware/nvbandwidth.sh;
#             target: each within 2%); needs NVB (a built nvbandwidth) or NVB_SRC (its source tree,
#             built here: nvcc, Boost program_options or BOOST_DIR, NVML), else skipped saying why
#   reference 5 runs of `xmc bench` on the reference CUDA backend (none may fail: exit 0, or 3 where
#             only noisy rows stand between a run and a pass), then a baseline of ratios from them
#             (xmc bench --make-baseline), and each run judged again against a baseline made from
#             the other four (a run is never held to a baseline it is part of)
#   slowed    5 runs on the bench-only broken backend cuda_bench_slowed_ten_percent (every row about
#             10% slower: conformance/broken/copy/), judged against the reference baseline: each
#             must fail (exit 1)
#   report    OUT/bench-honesty.md: a row per run (exit, verdict, counts of failed and noisy rows),
#             the catch rates, the peaks table
# Usage, from the repository root, with the binaries of `cmake --build --preset gpu-bench` (the
# gpu-carry configuration: xmc, xmc_gpu_bench, the cuda backend, the slowed backend) in B/bin, B/lib:
#   hardware/run_bench_honesty.sh B OUT [step...]        (default: peaks reference slowed report)
# Environment: SIZES (default 16M,64M,256M,1G), RUNS (default 5), NVB or NVB_SRC, BOOST_DIR, NVB_ARCH.
# A step skips the runs whose JSON is already in OUT, so a session cut short resumes where it stopped.
set -uo pipefail
b=${1:?usage: run_bench_honesty.sh B OUT [step...]} out=${2:?usage: run_bench_honesty.sh B OUT [step...]}
shift 2
steps=${*:-peaks reference slowed report}
x=$b/bin/xmc
sizes=${SIZES:-16M,64M,256M,1G}
runs=${RUNS:-5}
slowed=$b/lib/libxmc_backend_broken_cuda_bench_slowed_ten_percent.so
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
[ -x "$x" ] && [ -x "$b/bin/xmc_gpu_bench" ] || { echo "run_bench_honesty.sh: $x or $b/bin/xmc_gpu_bench is missing (cmake --build --preset gpu-bench)"; exit 2; }

# bench NAME ARGS...: one xmc bench run, its output in OUT/NAME.log, its exit in OUT/NAME.rc.
bench() {
  local name=$1; shift
  if [ -s "$out/$name.json" ] && [ -s "$out/$name.rc" ]; then echo "== $name: kept ($(cat "$out/$name.rc"))"; return; fi
  local t0=$SECONDS
  "$x" bench "$@" --sizes "$sizes" --json "$out/$name.json" >"$out/$name.log" 2>&1
  local rc=$?
  echo "$rc" >"$out/$name.rc"
  echo "== $name: exit $rc after $((SECONDS - t0)) s: $(grep -E '^xmc bench: [0-9]+ figures' "$out/$name.log")"
  grep -E '^xmc bench: (FAILED|NOISY)' "$out/$name.log" | head -20
}

for s in $steps; do
  case $s in
    peaks)
      nvb=${NVB:-}
      if [ -z "$nvb" ] && [ -n "${NVB_SRC:-}" ]; then
        nvb=$out/nvbandwidth-bin/nvbandwidth
        [ -x "$nvb" ] || "$here/nvbandwidth.sh" build "$NVB_SRC" "$nvb" >"$out/nvbandwidth-build.log" 2>&1 ||
          { tail -n 5 "$out/nvbandwidth-build.log"; nvb=; }
      fi
      if [ -z "$nvb" ]; then
        why="set NVB to a built one or NVB_SRC to its source tree"
        [ -s "$out/nvbandwidth-build.log" ] && why="its build failed: $(tail -n 1 "$out/nvbandwidth-build.log")"
        echo "== peaks: skipped: no nvbandwidth ($why)" | tee "$out/peaks-skipped.txt"
      else
        mib=
        for z in ${sizes//,/ }; do  # nvbandwidth takes whole MiB
          case $z in *G) mib="$mib $((${z%G} * 1024))" ;; *M) mib="$mib ${z%M}" ;; *K) ;; *) [ $((z >> 20)) -gt 0 ] && mib="$mib $((z >> 20))" ;; esac
        done
        "$here/nvbandwidth.sh" run "$nvb" "$b/bin" "$out/peaks" $mib >"$out/peaks.log" 2>&1
        echo "== peaks: exit $? ($(tail -n 1 "$out/peaks.log"))"
      fi ;;
    reference)
      for i in $(seq 1 "$runs"); do bench "reference-$i" --backend cuda; done
      if [ "$runs" -ge 3 ]; then
        "$x" bench --make-baseline $(for i in $(seq 1 "$runs"); do echo "$out/reference-$i.json"; done) --out "$out/baseline.json" |
          tee "$out/baseline.log"
        # Each run against a baseline of the other runs (out of sample), if there are 3 others.
        if [ "$runs" -ge 4 ]; then
          for i in $(seq 1 "$runs"); do
            others=$(for k in $(seq 1 "$runs"); do [ "$k" -ne "$i" ] && echo "$out/reference-$k.json"; done)
            "$x" bench --make-baseline $others --out "$out/baseline-without-$i.json" >/dev/null 2>&1
            "$x" bench --from "$out/reference-$i.json" --baseline "$out/baseline-without-$i.json" >"$out/reference-$i-vs-others.log" 2>&1
            echo $? >"$out/reference-$i-vs-others.rc"
            echo "== reference-$i against the other runs' baseline: exit $(cat "$out/reference-$i-vs-others.rc")"
          done
        fi
      fi ;;
    slowed)
      [ -f "$slowed" ] || { echo "run_bench_honesty.sh: $slowed is missing (cmake --build --preset gpu-bench)"; exit 2; }
      base=()
      [ -s "$out/baseline.json" ] && base=(--baseline "$out/baseline.json")
      for i in $(seq 1 "$runs"); do bench "slowed-$i" --backend "$slowed" --kind cuda "${base[@]}"; done ;;
    report)
      {
        echo "# xmc bench honesty: $(date -u +%Y-%m-%dT%H:%MZ)"
        echo
        echo "Sizes $sizes, $runs runs each. Exit 0: passed; 1: failed; 3: only noisy rows stand between the run and a pass (neither passed nor failed)."
        echo
        echo "| run | backend | exit | verdict | broken | missed | below baseline | noisy | figures |"
        echo "|---|---|---|---|---|---|---|---|---|"
        for f in "$out"/reference-[0-9].log "$out"/reference-[0-9]-vs-others.log "$out"/slowed-[0-9].log; do
          [ -f "$f" ] || continue
          n=$(basename "$f" .log)
          rc=$(cat "$out/$n.rc" 2>/dev/null || echo '?')
          case $rc in 0) v=passed ;; 1) v='**failed**' ;; 3) v=noisy ;; *) v="error ($rc)" ;; esac
          case $n in slowed*) be=slowed10 ;; *) be=cuda ;; esac
          echo "| $n | $be | $rc | $v | $(grep -c 'FAILED: broken measurement' "$f") | $(grep -c 'FAILED: target missed' "$f") | $(grep -c 'FAILED: below baseline' "$f") | $(grep -c '^xmc bench: NOISY' "$f") | $(grep -oE '^xmc bench: [0-9]+ figures' "$f" | grep -oE '[0-9]+') |"
        done
        echo
        count() { local k=0 t=0; for f in "$out"/$1.rc; do [ -f "$f" ] || continue; t=$((t + 1)); [ "$(cat "$f")" = "$2" ] && k=$((k + 1)); done; echo "$k of $t"; }
        echo "- reference backend failed: $(count 'reference-[0-9]' 1) runs (must be none); noisy: $(count 'reference-[0-9]' 3)"
        echo "- reference runs against the other runs' baseline failed: $(count 'reference-[0-9]-vs-others' 1); noisy: $(count 'reference-[0-9]-vs-others' 3)"
        echo "- slowed backend failed: $(count 'slowed-[0-9]' 1) runs (must be all)"
        [ -f "$out/baseline.log" ] && echo "- baseline: $(tail -n 1 "$out/baseline.log")"
        echo
        if [ -f "$out/peaks/peaks-vs-nvbandwidth.md" ]; then
          echo "## Copy peaks beside nvbandwidth (within 2%)"; echo; cat "$out/peaks/peaks-vs-nvbandwidth.md"
        elif [ -f "$out/peaks-skipped.txt" ]; then cat "$out/peaks-skipped.txt"; fi
      } >"$out/bench-honesty.md"
      cat "$out/bench-honesty.md" ;;
    *) echo "run_bench_honesty.sh: unknown step '$s' (peaks reference slowed report)"; exit 2 ;;
  esac
done
