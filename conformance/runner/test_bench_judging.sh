#!/usr/bin/env bash
# bench.judging: how `xmc bench` judges rows, on synthetic xmc_gpu_bench JSON
# (no GPU): a ratio is the median of paired samples with its spread (the median's 95% interval
# where the pairs are given, else their quartiles); a row whose
# spread straddles its target or baseline floor is noisy (exit 3 when nothing
# else fails), not passed or failed; a broken measurement is judged on the
# median, not one pair, and beyond the pairs' spread; baselines hold ratios with a tolerance per row derived
# from 5 runs (--make-baseline), so a machine whose own peak moved passes and a
# backend 10% slower fails 5 runs of 5.
#   test_bench_judging.sh XMC WORK
set -uo pipefail
xmc=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; }

# row PATH UNIT FIGURE PEAK RATIO LO HI [TARGET REQUIREMENT [MIN MAX]]: one paired row of xmc_gpu_bench's JSON.
row() {
  local min=${10:-$6} max=${11:-$7}
  printf '{"path":"%s","unit":"%s","figure":%s,"peak":%s,"ratio":%s,"requirement":"%s","target":%s,"samples":9,"ratio_lo":%s,"ratio_hi":%s,"ratio_min":%s,"ratio_max":%s}' \
    "$1" "$2" "$3" "$4" "$5" "${9:-}" "${8:-0}" "$6" "$7" "$min" "$max"
}
# run FILE ROW...: one xmc_gpu_bench JSON at 1 GiB.
run() {
  local f=$1; shift
  local rows; rows=$(IFS=,; echo "$*")
  printf '{"device":"NVIDIA H200","devices":1,"driver":13000,"bytes":1073741824,"rows":[%s]}\n' "$rows" >"$f"
}
# expect RC PATTERN NAME -- ARGS: xmc's exit status and a line of its output.
expect() {
  local want=$1 pattern=$2 name=$3; shift 4
  "$xmc" "$@" >"$work/$name.out" 2>&1; local rc=$?
  if [ "$rc" -eq "$want" ] && grep -qE -- "$pattern" "$work/$name.out"; then ok "$name: exit $rc, $(grep -m1 -E -- "$pattern" "$work/$name.out" | cut -c1-150)"
  else bad "$name: exit $rc (want $want), no line matching '$pattern':"; grep -E 'FAILED|NOISY|figures|exit|xmc bench:' "$work/$name.out" | head -8; fi
}

pinned='H2D from pinned (pin_alloc, device 0)'
# A clear pass: the pairs' quartiles above the target.
run "$work/pass.json" "$(row "$pinned" GB/s 54.1 54.9 0.985 0.975 0.992 0.97 PIN-DEVICE)"
expect 0 'figures, none broken, every target met$' pass -- bench --from "$work/pass.json" --json "$work/pass-doc.json"
# The spread in the JSON, the CSV and the table.
jq -e '.rows[0] | .samples == 9 and .ratio == 0.985 and .ratio_lo == 0.975 and .ratio_hi == 0.992' "$work/pass-doc.json" >/dev/null &&
  ok "bench.json keeps the median ratio of 9 pairs and its quartiles" || bad "bench.json lost the pairs' spread: $(jq -c '.rows[0]' "$work/pass-doc.json")"
head -n1 "$work/pass-doc.csv" | grep -q '^path,series,bytes,size,figure,unit,peak,ratio,ratio_lo,ratio_hi,ratio_min,ratio_max,samples,requirement,target,baseline,verdict$' &&
  grep -q ',0.985,0.975,0.992,0.975,0.992,9,PIN-DEVICE,0.97,,ok$' "$work/pass-doc.csv" &&
  ok "bench.csv carries the spread (ratio_lo, ratio_hi, ratio_min, ratio_max, samples)" || { bad "bench.csv lacks the spread:"; cat "$work/pass-doc.csv"; }
grep -q '0.975-0.992' "$work/pass.out" && ok "the table shows the pairs' quartiles" || bad "the table has no spread column"

# Noisy: the median above the target, the lower quartile below it; and the median below, the upper
# quartile above (the H200's granule cycle, 0.765-0.88 against 0.80).
granule='VMM one granule full cycle vs the same raw calls'
run "$work/noisy.json" "$(row "$pinned" GB/s 54.4 54.9 0.99 0.96 1.0 0.97 PIN-DEVICE)" \
  "$(row "$granule" us 130 104 0.79 0.765 0.82 0.8 VMM-SPEED)"
expect 3 'NOISY: VMM one granule full cycle .*median of 9 paired ratios 0.790 \(pairs. quartiles 0.765-0.820\) straddles its target 0.80' \
  noisy -- bench --from "$work/noisy.json" --json "$work/noisy-doc.json"
grep -q 'only noisy rows stand between this run and a pass' "$work/noisy.out" && ok "exit 3 says only noisy rows stand between it and a pass" ||
  bad "exit 3 gave no reason"
jq -e '[.rows[].verdict] == ["noisy", "noisy"]' "$work/noisy-doc.json" >/dev/null && ok "both straddling rows are 'noisy', neither passed nor failed" ||
  bad "verdicts: $(jq -c '[.rows[].verdict]' "$work/noisy-doc.json")"
! grep -q 'FAILED' "$work/noisy.out" && ok "a noisy row is not a failure" || bad "a noisy row was reported as FAILED"

# A clear miss: the whole spread below the target fails, noisy rows beside it or not.
run "$work/miss.json" "$(row "$pinned" GB/s 49.4 54.9 0.90 0.89 0.91 0.97 PIN-DEVICE)" \
  "$(row "$granule" us 130 104 0.79 0.765 0.82 0.8 VMM-SPEED)"
expect 1 'FAILED: target missed: H2D from pinned .*median of 9 paired ratios 0.900 \(pairs. quartiles 0.890-0.910\) below PIN-DEVICE.s target 0.97' \
  miss -- bench --from "$work/miss.json"

# A broken measurement is judged on the median: one pair at 1.14 is not one, a median of 1.08 is.
reg='register+unregister 1 MiB'
run "$work/lucky.json" "$(row "$reg" ms 0.30 0.31 1.02 0.99 1.04 0 '' 0.95 1.14)"
expect 0 'none broken' lucky_pair -- bench --from "$work/lucky.json"
run "$work/broken.json" "$(row "$reg" ms 0.28 0.31 1.08 1.06 1.10 0 '' 1.01 1.14)"
expect 1 'FAILED: broken measurement: register\+unregister 1 MiB \(1 MiB\): .*median of 9 paired ratios 1.080, above 1.05' \
  broken_median -- bench --from "$work/broken.json"
# And beyond the pairs' spread, as a target is: a median above 1.05 with a quartile below it is noisy.
run "$work/broken_noisy.json" "$(row "D2D copy (read+write)" GB/s 1739 1699 1.06 0.897 1.096)"
expect 3 'NOISY: D2D copy \(read\+write\) .*median of 9 paired ratios 1.060 \(pairs. quartiles 0.897-1.096\) straddles its broken-measurement bound 1.05' \
  broken_noisy -- bench --from "$work/broken_noisy.json"
# With every pair in the JSON ("pairs"), a row is judged on its median's 95% interval (order
# statistics), which narrows as pairs are added, not on the quartiles of one pair, which do not:
# 201 pairs evenly from 0.90 to 1.07 (median 0.985, quartiles 0.9425-1.0275, the median's interval
# order statistics 87..115: 0.9731-0.9969) meet a target of 0.96 that their quartiles straddle.
many=$(awk 'BEGIN { for (i = 0; i <= 200; i++) printf "%s%.4f", (i ? "," : ""), 0.90 + 0.17 * i / 200 }')
printf '{"device":"NVIDIA H200","devices":1,"driver":13000,"bytes":1073741824,"rows":[{"path":"host callback round trip","unit":"us","figure":9.1,"peak":8.95,"ratio":0.985,"requirement":"X","target":0.96,"samples":201,"ratio_lo":0.9425,"ratio_hi":1.0275,"ratio_min":0.9,"ratio_max":1.07,"pairs":[%s]}]}\n' \
  "$many" >"$work/many.json"
expect 0 'every target met' many_pairs -- bench --from "$work/many.json" --json "$work/many-doc.json"
jq -e '.rows[0] | .samples == 201 and .median_lo == 0.9731 and .median_hi == 0.9969 and (.pairs | length) == 201' "$work/many-doc.json" >/dev/null &&
  ok "bench.json carries the pairs and the median's interval (order statistics 87..115 of 201)" ||
  bad "the median's interval: $(jq -c '.rows[0] | del(.pairs)' "$work/many-doc.json")"
grep -q '0.973-0.997' "$work/many_pairs.out" && ok "the table shows the interval a verdict is judged on" || bad "the table's spread: $(grep callback "$work/many_pairs.out")"
# And five pairs whose quartiles clear the target but whose interval (the extremes, for 5) does not: noisy.
printf '{"device":"NVIDIA H200","devices":1,"driver":13000,"bytes":1073741824,"rows":[{"path":"%s","unit":"GB/s","figure":54,"peak":54.9,"ratio":0.985,"requirement":"PIN-DEVICE","target":0.97,"samples":5,"ratio_lo":0.98,"ratio_hi":0.99,"ratio_min":0.96,"ratio_max":0.995,"pairs":[0.99,0.96,0.985,0.995,0.98]}]}\n' \
  "$pinned" >"$work/few.json"
expect 3 "NOISY: H2D from pinned .*median of 5 paired ratios 0.985 \(median.s 95% interval 0.960-0.995, pairs. quartiles 0.980-0.990\) straddles its target 0.97" \
  few_pairs -- bench --from "$work/few.json"
# A row of an older run (no pairs) is judged on its one ratio, as before.
printf '{"device":"NVIDIA H200","devices":1,"driver":13000,"bytes":1073741824,"rows":[{"path":"%s","unit":"GB/s","figure":52,"peak":54.9,"ratio":0.947,"requirement":"PIN-DEVICE","target":0.97}]}\n' \
  "$pinned" >"$work/old.json"
expect 1 'FAILED: target missed: H2D from pinned .*: ratio 0.947 below' unpaired_row -- bench --from "$work/old.json"

# ---- noisy rows measured again (--reruns), their pairs pooled ---------------------------------
# A stand-in for xmc_gpu_bench (XMC_GPU_BENCH): its first run gives the graph row 7 pairs whose
# median's interval (the extremes, 0.93-1.00) straddles 0.95; each later run 7 pairs of 0.96-0.99.
# Pooled, 14 pairs: order statistics 3..12, 0.96-0.99, above the target: ok, from 2 runs.
cat >"$work/fake-gpu-bench" <<'FAKE'
#!/usr/bin/env bash
while [ $# -gt 0 ]; do case $1 in --json) out=$2; shift ;; --bytes) bytes=$2; shift ;; esac; shift; done
n=$(cat "$(dirname "$0")/calls" 2>/dev/null || echo 0); echo $((n + 1)) >"$(dirname "$0")/calls"
if [ "$n" -eq 0 ]; then p="0.93,0.94,0.96,0.97,0.98,0.99,1.0"; else p="0.96,0.965,0.97,0.975,0.98,0.985,0.99"; fi
printf '{"device":"NVIDIA H200","devices":1,"driver":13000,"bytes":%s,"rows":[{"path":"graph reading a reloaded slot 16 MiB vs never released","unit":"GB/s","figure":970,"peak":1000,"ratio":0.97,"requirement":"VMM-SPEED","target":0.95,"samples":7,"pairs":[%s]}]}\n' "$bytes" "$p" >"$out"
FAKE
chmod +x "$work/fake-gpu-bench"
rm -f "$work/calls"
XMC_GPU_BENCH=$work/fake-gpu-bench expect 3 'NOISY: graph reading a reloaded slot 16 MiB .*median of 7 paired ratios 0.970 \(median.s 95% interval 0.930-1.000' \
  reruns_none -- bench --backend host --kind cuda --sizes 16M --reruns 0
rm -f "$work/calls"
XMC_GPU_BENCH=$work/fake-gpu-bench expect 0 'every target met' reruns_pool -- bench --backend host --kind cuda --sizes 16M --json "$work/rerun-doc.json"
grep -q 'noisy rows: measuring 1 size(s) again, their pairs pooled (rerun 1 of at most 2)' "$work/reruns_pool.out" &&
  jq -e '(.rows[0] | .samples == 14 and .runs == 2 and .verdict == "ok" and .median_lo == 0.96) and ([.runs[] | select(.rerun == 1)] | length) == 1' \
    "$work/rerun-doc.json" >/dev/null && [ "$(cat "$work/calls")" = 2 ] &&
  ok "a noisy row's size is measured again once, its pairs pooled (14 from 2 runs), then judged ok" ||
  bad "the rerun: $(jq -c '.rows[0] | del(.pairs)' "$work/rerun-doc.json"), $(cat "$work/calls") runs"

# ---- baselines of ratios, a tolerance per row from 5 runs ------------------------
# Five runs of a correct backend: the pinned row steady (0.985-0.995), the granule row wide (0.78-0.90).
i=0
for p in "0.985 0.90" "0.99 0.82" "0.995 0.85" "0.988 0.78" "0.992 0.86"; do
  i=$((i + 1)); set -- $p
  run "$work/ref-gpu-$i.json" "$(row "$pinned" GB/s 54 54.9 "$1" "$(calc "$1 - 0.005")" "$(calc "$1 + 0.004")" 0.97 PIN-DEVICE)" \
    "$(row "$granule" us 125 104 "$2" "$(calc "$2 - 0.01")" "$(calc "$2 + 0.01")")"
  "$xmc" bench --from "$work/ref-gpu-$i.json" --json "$work/ref-$i.json" >/dev/null 2>&1
done
expect 0 'wrote the baseline .*from 5 runs: 2 rows' make_baseline -- bench --make-baseline "$work"/ref-{1,2,3,4,5}.json --out "$work/base.json"
# pinned: median 0.99, largest deviation 0.005 -> 2 x 0.005/0.99 = 0.0101 -> the least tolerance 0.05;
# granule: median 0.85, largest deviation 0.07 -> 2 x 0.07/0.85 = 0.165.
jq -e '.format == "xmc-bench-baseline/2" and .runs == 5 and
       (.rows[0] | .ratio == 0.99 and .tolerance == 0.05 and .runs_min == 0.985 and .runs_max == 0.995) and
       (.rows[1] | .ratio == 0.85 and (.tolerance - 0.1647 | fabs) < 0.001)' "$work/base.json" >/dev/null &&
  ok "--make-baseline: each row's median ratio, and a tolerance from the 5 runs' spread (0.05 steady, $(jq '.rows[1].tolerance * 1000 | round / 1000' "$work/base.json") wide)" ||
  { bad "--make-baseline wrote:"; jq -c '.rows[]' "$work/base.json"; }
for k in 1 2 3 4 5; do
  "$xmc" bench --from "$work/ref-gpu-$k.json" --baseline "$work/base.json" >"$work/ref-judged-$k.out" 2>&1 || echo "exit $?" >>"$work/ref-judged-$k.out"
done
if ! grep -q 'exit' "$work"/ref-judged-*.out; then ok "each of the 5 runs meets the baseline made from them"
else bad "a run of the 5 fails its own baseline:"; grep -h 'FAILED\|NOISY\|exit' "$work"/ref-judged-*.out; fi
# A machine whose own peak moved: raw and backend 10% slower alike, the ratio unchanged.
run "$work/slow-machine.json" "$(row "$pinned" GB/s 43.5 43.7 0.995 0.99 0.999 0.97 PIN-DEVICE)" \
  "$(row "$granule" us 150 125 0.84 0.83 0.85)"
expect 0 'none broken, every target met' slower_machine -- bench --from "$work/slow-machine.json" --baseline "$work/base.json" --json "$work/slow-machine-doc.json"
jq -e '.rows[0].baseline | .ratio == 0.99 and .tolerance == 0.05' "$work/slow-machine-doc.json" >/dev/null &&
  ok "a row names the baseline's ratio and tolerance it was held to" || bad "no baseline on the row: $(jq -c '.rows[0]' "$work/slow-machine-doc.json")"
# A backend 10% slower than the raw path, 5 runs: each fails (the pinned row below its target and
# its floor 0.99 x 0.95), whatever the wide granule row says.
slowed_fail=0
for g in 0.80 0.74 0.77 0.70 0.76; do
  run "$work/slowed.json" "$(row "$pinned" GB/s 49.5 54.9 0.90 0.895 0.905 0.97 PIN-DEVICE)" "$(row "$granule" us 140 104 "$g" "$(calc "$g - 0.02")" "$(calc "$g + 0.02")")"
  "$xmc" bench --from "$work/slowed.json" --baseline "$work/base.json" >"$work/slowed.out" 2>&1
  [ $? -eq 1 ] && grep -q 'FAILED: target missed: H2D from pinned' "$work/slowed.out" && slowed_fail=$((slowed_fail + 1))
done
[ "$slowed_fail" -eq 5 ] && ok "a backend 10% slower fails 5 runs of 5" || bad "the slowed backend failed $slowed_fail runs of 5"
# Below the baseline without a target: the whole spread under the floor fails; a spread across it is noisy.
run "$work/below.json" "$(row "$pinned" GB/s 54 54.9 0.99 0.985 0.995 0.97 PIN-DEVICE)" "$(row "$granule" us 180 104 0.60 0.58 0.62)"
expect 1 'FAILED: below baseline: VMM one granule full cycle .*median of 9 paired ratios 0.600 .* below the baseline.s 0.850 less its tolerance 0.165 \(floor 0.710\)' \
  below_baseline -- bench --from "$work/below.json" --baseline "$work/base.json"
run "$work/straddle.json" "$(row "$pinned" GB/s 54 54.9 0.99 0.985 0.995 0.97 PIN-DEVICE)" "$(row "$granule" us 150 104 0.70 0.66 0.75)"
expect 3 'NOISY: VMM one granule .* straddles its baseline floor 0.710' straddle_floor -- bench --from "$work/straddle.json" --baseline "$work/base.json"

# Refusals: a baseline of figures (format /1), fewer than 3 runs, runs of two devices.
printf '{"format":"xmc-bench-baseline/1","device":"NVIDIA H200","driver":"cuda 13.0","rows":[]}\n' >"$work/base-v1.json"
expect 2 'is of format xmc-bench-baseline/1, which holds figures.*--make-baseline' baseline_v1 -- bench --from "$work/pass.json" --baseline "$work/base-v1.json"
expect 2 'needs at least 3 runs' make_baseline_two -- bench --make-baseline "$work/ref-1.json" "$work/ref-2.json" --out "$work/b2.json"
jq '.device = "NVIDIA H100 80GB HBM3"' "$work/ref-3.json" >"$work/ref-h100.json"
expect 2 'a baseline is of one device model and driver' make_baseline_mixed -- bench --make-baseline "$work/ref-1.json" "$work/ref-2.json" "$work/ref-h100.json" --out "$work/b3.json"
expect 2 '--make-baseline requires --out|--out' make_baseline_no_out -- bench --make-baseline "$work/ref-1.json"

# ---- xmc's copy peaks beside nvbandwidth's (hardware/nvbandwidth.sh writes these files) ----------
nvb() {  # nvb FILE H2D D2H LOCAL: nvbandwidth -j's shape, device 0's value as a string
  printf '{"nvbandwidth":{"testcases":[{"name":"host_to_device_memcpy_ce","status":"Passed","bandwidth_matrix":[["%s"]],"sum":%s},{"name":"device_to_host_memcpy_ce","status":"Passed","bandwidth_matrix":[["%s"]],"sum":%s},{"name":"device_local_copy","status":"Passed","bandwidth_matrix":[["%s"]],"sum":%s}]}}\n' \
    "$2" "$2" "$3" "$3" "$4" "$4" >"$1"
}
mkdir -p "$work/peaks-ok" "$work/peaks-far"
for d in peaks-ok peaks-far; do
  printf '{"device":"NVIDIA H200","bytes":268435456,"peaks":{"h2d":55.1,"d2h":55.2,"d2d_copy":1985.0}}\n' >"$work/$d/xmc-peaks-268435456.json"
done
nvb "$work/peaks-ok/nvbandwidth-268435456.json" 55.4 55.3 2001.7
# The device copy timed as one copy and a host synchronize: 6% under nvbandwidth's (the H200, 2026-12-04).
nvb "$work/peaks-far/nvbandwidth-268435456.json" 55.4 55.3 2111.7
expect 0 '3 of 3 peaks within 2% of nvbandwidth' peaks_within -- bench --peaks-vs-nvbandwidth "$work/peaks-ok"
grep -q '^| 256 MiB | device_local_copy | 1985.00 | 2001.70 | 0.992 | yes |$' "$work/peaks_within.out" &&
  ok "the peaks table: each xmc peak beside nvbandwidth's, with the ratio" || { bad "the peaks table:"; cat "$work/peaks_within.out"; }
expect 1 '^\| 256 MiB \| device_local_copy \| 1985.00 \| 2111.70 \| 0.940 \| \*\*NO\*\* \|$' peaks_far -- bench --peaks-vs-nvbandwidth "$work/peaks-far"
mkdir -p "$work/peaks-none"
expect 2 'no xmc-peaks-<bytes>.json there' peaks_none -- bench --peaks-vs-nvbandwidth "$work/peaks-none"

[ "$fails" -eq 0 ] || { echo "bench.judging: $fails check(s) failed"; exit 1; }
echo "bench.judging: every check passed"
