#!/usr/bin/env bash
# The interposer's cost on `xmc bench` when no fault is scripted (issue 28: within 1%): PAIRS
# (default 3) pairs of runs on the reference CUDA backend, one straight on the driver and one
# through B/lib/libxmc_cuda_interpose.so, alternating so that a machine that drifts drifts for both.
# Each row's figure (not its ratio: the raw peak beside it goes through the interposer as well) is
# compared, through / straight, as the median over the pairs, oriented so that above 1 is slower.
# A row is `within` 1%, `over` it, or `noisy` where the straight runs alone spread wider than the
# difference found (rerun it).
#   run_interpose_overhead.sh B OUT      (SIZES default 16M,256M,1G; BASELINE=FILE: each run also
#                                         judged against that baseline, its verdict in its log)
# Straight is the driver the environment names (XMC_CUDA_DRIVER, else libcuda.so.1); through is the
# interposer over XMC_CUDA_INTERPOSE_REAL (default libcuda.so.1): over the fake, both, to try it here.
# OUT/overhead.md: the table; OUT/straight-N.json, OUT/through-N.json: the runs.
set -uo pipefail
b=${1:?usage: run_interpose_overhead.sh B OUT} out=${2:?usage: run_interpose_overhead.sh B OUT}
ip=$b/lib/libxmc_cuda_interpose.so
[ -x "$b/bin/xmc" ] && [ -x "$b/bin/xmc_gpu_bench" ] && [ -r "$ip" ] ||
  { echo "run_interpose_overhead.sh: $b/bin/xmc, $b/bin/xmc_gpu_bench or $ip is missing (gpu-carry)"; exit 2; }
mkdir -p "$out"
for i in $(seq 1 "${PAIRS:-3}"); do
  for how in straight through; do
    t0=$SECONDS
    if [ $how = through ]; then
      XMC_CUDA_DRIVER=$ip "$b/bin/xmc" bench --backend cuda --sizes "${SIZES:-16M,256M,1G}" --json "$out/$how-$i.json" \
        ${BASELINE:+--baseline "$BASELINE"} >"$out/$how-$i.log" 2>&1
    else
      "$b/bin/xmc" bench --backend cuda --sizes "${SIZES:-16M,256M,1G}" --json "$out/$how-$i.json" \
        ${BASELINE:+--baseline "$BASELINE"} >"$out/$how-$i.log" 2>&1
    fi
    echo "== $how $i: exit $? after $((SECONDS - t0)) s"
  done
done
python3 - "$out" "${PAIRS:-3}" <<'EOF'
import json, statistics, sys
out, pairs = sys.argv[1], int(sys.argv[2])
def rows(path):
    try:
        d = json.load(open(path))
    except (OSError, ValueError) as e:
        sys.exit(f"run_interpose_overhead.sh: {path}: {e}")
    return {(r["series"], r["bytes"]): r for r in d["rows"] if r.get("figure")}
straight = [rows(f"{out}/straight-{i}.json") for i in range(1, pairs + 1)]
through = [rows(f"{out}/through-{i}.json") for i in range(1, pairs + 1)]
keys = [k for k in straight[0] if all(k in s for s in straight) and all(k in t for t in through)]
lines = ["| row | size | straight (median) | through (median) | cost | straight's own spread | verdict |",
         "|---|---|---|---|---|---|---|"]
count = {"within": 0, "over": 0, "noisy": 0}
for k in keys:
    hib = straight[0][k].get("higher_is_better", True)
    # cost > 0: slower through the interposer
    costs = [(s[k]["figure"] / t[k]["figure"] if hib else t[k]["figure"] / s[k]["figure"]) - 1
             for s, t in zip(straight, through)]
    cost = statistics.median(costs)
    figs = [s[k]["figure"] for s in straight]
    spread = max(figs) / min(figs) - 1
    verdict = "within" if abs(cost) <= 0.01 else ("noisy" if spread >= abs(cost) else "over")
    count[verdict] += 1
    unit = straight[0][k].get("unit", "")
    lines.append(f"| {k[0]} | {k[1] >> 20} MiB | {statistics.median(figs):.4g} {unit} | "
                 f"{statistics.median(t[k]['figure'] for t in through):.4g} {unit} | {cost:+.2%} | {spread:.2%} | {verdict} |")
summary = (f"{len(keys)} rows, {pairs} pairs: {count['within']} within 1%, {count['over']} over, "
           f"{count['noisy']} noisy (the straight runs alone spread wider than the difference)")
open(f"{out}/overhead.md", "w").write("# The interposer's cost on xmc bench, no fault scripted\n\n" + summary + "\n\n" + "\n".join(lines) + "\n")
print("\n".join(lines)); print(summary)
EOF
