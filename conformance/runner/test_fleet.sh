#!/usr/bin/env bash
# package.fleet: qualification at fleet scale (SPEC 9) and benchmarks that say
# when they miss (SPEC 10).
#   test_fleet.sh XMC HOST_PACKAGE BROKEN_QUERY RACY SOURCE_DIR WORK
# HOST_PACKAGE: a serial `qualify --backend host --bench` (test package.host).
# BROKEN_QUERY: libxmc_backend_broken_query_start_only.so (PIN-QUERY fails).
# RACY: libxmc_backend_broken_racy_accounting.so (PIN-THREADS fails in most runs).
# The benchmark checks judge recorded runs (xmc bench --from, the H200's
# hardware/results/), so that nothing here depends on this machine's speed.
set -uo pipefail
xmc=$1 serial=$2 broken=$3 racy=$4 src=$5 work=$6
rm -rf "$work" && mkdir -p "$work"
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
verdicts() { jq -r '.requirements[] | .id + " " + .verdict' "$1/results.json"; }
# refused NAME REGEX CMD...: CMD exits 2 and prints a line matching REGEX.
refused() {
  local name=$1 re=$2; shift 2
  local rc=0
  "$@" >"$work/$name.out" 2>&1 || rc=$?
  if [ "$rc" -eq 2 ] && grep -Eq -- "$re" "$work/$name.out"; then ok "$name refused: $(grep -Em1 -- "$re" "$work/$name.out")"
  else bad "$name: expected exit 2 and '$re', got exit $rc:"; sed 's/^/    /' "$work/$name.out"; fi
}
# rejected NAME DIR REGEX: xmc verify DIR exits 1 naming REGEX.
rejected() {
  local rc=0
  "$xmc" verify "$2" >"$work/$1.verify" 2>&1 || rc=$?
  if [ "$rc" -eq 1 ] && grep -Eq "PROBLEM: .*$3" "$work/$1.verify"; then
    ok "$1 rejected by verify: $(grep -Em1 "PROBLEM: .*$3" "$work/$1.verify" | sed 's/^xmc verify: PROBLEM: //')"
  else bad "$1: expected verify to reject it with '$3', got exit $rc:"; sed 's/^/    /' "$work/$1.verify"; fi
}
# only_incomplete NAME DIR: verify's only problems are must-pass rows a filtered run left out.
only_incomplete() {
  "$xmc" verify "$2" >"$work/$1.verify" 2>&1
  if grep 'PROBLEM' "$work/$1.verify" | grep -vq 'has no result in results.json (the run selected'; then
    bad "$1: verify found more than the rows the filter left out:"; grep PROBLEM "$work/$1.verify" | grep -v 'has no result' | head
  else ok "$1: verify finds nothing but the must-pass rows its filter left out"; fi
}
jqi() { jq "$2" "$1" >"$1.tmp" && mv "$1.tmp" "$1"; }

# ---- --jobs 2: the verdicts of the serial run, in catalogue order ------------
"$xmc" qualify --backend host --jobs 2 --out "$work/jobs2" >"$work/jobs2.log" 2>&1 || true
if diff <(verdicts "$serial") <(verdicts "$work/jobs2") >"$work/jobs2.diff"; then
  ok "--jobs 2 gives the serial run's verdicts, in catalogue order ($(verdicts "$serial" | wc -l) requirements)"
else bad "--jobs 2 verdicts differ from the serial run:"; cat "$work/jobs2.diff"; fi
[ "$(head -n1 "$serial/summary.txt")" = "$(head -n1 "$work/jobs2/summary.txt")" ] && ok "--jobs 2 summary: $(cat "$work/jobs2/summary.txt")" ||
  bad "--jobs 2 summary '$(cat "$work/jobs2/summary.txt")' is not the serial '$(cat "$serial/summary.txt")'"
jq -e '.jobs == 2' "$work/jobs2/results.json" >/dev/null && ok "results.json records jobs 2" || bad "results.json does not record --jobs 2"
ran=$(grep -E "^xmc qualify: [0-9]+ requirement\(s\) ran in [0-9.]+ s \(--jobs 2\)$" "$work/jobs2.log")
[ -n "$ran" ] && ok "--jobs 2 says how long it took: ${ran#xmc qualify: }" || bad "--jobs 2 does not say how long the requirements took"
# The rows whose tests mostly sleep run in the waiting lane, and say so.
for id in COPY-REUSE AFF-STAGING-REUSE; do
  "$xmc" where "$id" | grep -q "runs in the waiting lane under qualify --jobs: " && ok "$id is a waiting row" ||
    bad "xmc where $id does not name the waiting lane"
done
# The host backend's device is each process's own: the VMM rows share the machine.
grep -q "another saw 1073741824 bytes free: each process's own; the rows 'alone on a shared device' run beside the others" \
  "$work/jobs2.log" && ok "--jobs 2 finds the host device private to each process" ||
  { bad "--jobs 2 did not find the host device private:"; grep "jobs 2:" "$work/jobs2.log"; }
"$xmc" verify "$work/jobs2" >"$work/jobs2.verify" 2>&1 && ok "verify accepts the --jobs 2 package" ||
  { bad "verify rejects the --jobs 2 package:"; cat "$work/jobs2.verify"; }

# ---- --shard 1/2 + 2/2, merged, verified -------------------------------------
for i in 1 2; do
  "$xmc" qualify --backend host --jobs 2 --shard "$i/2" --out "$work/shard$i" >"$work/shard$i.log" 2>&1 || true
done
n1=$(jq '.requirements | length' "$work/shard1/results.json") n2=$(jq '.requirements | length' "$work/shard2/results.json")
[ $((n1 + n2)) -eq "$(verdicts "$serial" | wc -l)" ] && ok "the shards split the catalogue: $n1 + $n2 rows" || bad "shards hold $n1 + $n2 rows"
# Every other row: shard 1 has the 1st, 3rd, ... row of the catalogue.
if diff <(verdicts "$serial" | awk 'NR % 2 == 1') <(verdicts "$work/shard1") >/dev/null; then ok "shard 1/2 is every other catalogue row from the first"
else bad "shard 1/2 is not every other row"; fi
"$xmc" merge "$work/shard1" "$work/shard2" --out "$work/merged" >"$work/merge.log" 2>&1 && ok "merge: $(head -n1 "$work/merge.log")" ||
  { bad "merge of two good shards failed:"; cat "$work/merge.log"; }
"$xmc" verify "$work/merged" >"$work/merged.verify" 2>&1 && ok "verify accepts the merged package: $(grep -m1 'complete' "$work/merged.verify")" ||
  { bad "verify rejects the merged package:"; cat "$work/merged.verify"; }
diff <(verdicts "$serial") <(verdicts "$work/merged") >/dev/null && ok "the merged package has the serial run's verdicts" ||
  bad "the merged package's verdicts differ from the serial run's"
d1=$(sha256sum "$work/shard1/results.json" | cut -d' ' -f1)
jq -e --arg d "$d1" '.shards | length == 2 and .[0].index == 1 and .[0].results_sha256 == $d and .[1].index == 2' \
  "$work/merged/results.json" >/dev/null && ok "the merged results.json records its shards and their digests" || bad "the merged package does not record its shards"
grep -q 'A merge (xmc merge) of 2 shards' "$work/merged/report.html" && ok "the merged report says it is a merge of 2 shards" ||
  bad "the merged report does not show its shards"
rejected shard_alone "$work/shard1" "has no result in results.json \\(the run selected requirements with --shard 1/2"

# Refusals: overlap, gap, a package that is no shard, another backend, suite,
# environment, N.
refused merge_overlap "the shards overlap: CORE-INSTANCE is in .*shard1 \\(shard 1/2\\) and in .*shard1" \
  "$xmc" merge "$work/shard1" "$work/shard1" --out "$work/m-overlap"
refused merge_gap "the shards leave a gap: no package given holds PIN-ALLOC \\(shard 2/2\\)" \
  "$xmc" merge "$work/shard1" --out "$work/m-gap"
refused merge_not_shard "is not a shard package: its results.json records no --shard" \
  "$xmc" merge "$serial" "$work/shard2" --out "$work/m-noshard"
edit_shard() { rm -rf "$work/$1" && cp -r "$work/shard2" "$work/$1" && (cd "$work/$1" && eval "$2"); }
edit_shard s2-backend "jqi results.json '.backend.name = \"other\"'"
refused merge_other_backend "not of one backend \\(name, version, library, capabilities\\): .* has host .* has other" \
  "$xmc" merge "$work/shard1" "$work/s2-backend" --out "$work/m-backend"
edit_shard s2-suite "jqi results.json '.suite.version = \"9.9.9\"'"
refused merge_other_suite "not of one suite \\(version and git revision\\): .* has 0\\.3\\.0 .* has 9\\.9\\.9" \
  "$xmc" merge "$work/shard1" "$work/s2-suite" --out "$work/m-suite"
edit_shard s2-env "jqi environment.json '.devices[0].uuid = \"00000000-0000-0000-0000-000000000000\"'"
refused merge_other_environment "not of one environment \\(the devices\\)" \
  "$xmc" merge "$work/shard1" "$work/s2-env" --out "$work/m-env"
edit_shard s2-count "jqi results.json '.shard.count = 3'"
refused merge_other_n "not of one number of shards" "$xmc" merge "$work/shard1" "$work/s2-count" --out "$work/m-n"
refused merge_no_package "is not a qualification package: it holds no readable results.json" \
  "$xmc" merge "$work/shard1" "$work" --out "$work/m-none"
# verify checks a merge's record of its shards.
rm -rf "$work/merged-edit" && cp -r "$work/merged" "$work/merged-edit" && jqi "$work/merged-edit/results.json" 'del(.shards[1])'
rejected merged_shard_removed "$work/merged-edit" "is in no merged shard"
rm -rf "$work/merged-edit2" && cp -r "$work/merged" "$work/merged-edit2" && jqi "$work/merged-edit2/results.json" '.shards[1].backend.version = "9"'
rejected merged_shard_other_backend "$work/merged-edit2" "merged shard 2/2 is of backend"

# ---- --rerun-failed: exactly what failed, the rest taken over ------------------
"$xmc" qualify --backend "$broken" --filter 'PIN-*' --out "$work/parent" >"$work/parent.log" 2>&1
"$xmc" qualify --backend "$broken" --rerun-failed "$work/parent" --out "$work/rerun" >"$work/rerun.log" 2>&1
pd=$(sha256sum "$work/parent/results.json" | cut -d' ' -f1)
others=$(( $(jq '.requirements | length' "$work/parent/results.json") - 1 ))  # every PIN-* row but PIN-QUERY
if jq -e --arg d "$pd" --arg p "$work/parent" --argjson n "$others" '.parent.results_sha256 == $d and .parent.path == $p and .parent.rerun == ["PIN-QUERY"]
     and (.parent.taken_over | length) == $n and ([.requirements[] | select(.taken_over)] | length) == $n
     and (.requirements[] | select(.id == "PIN-QUERY") | .rerun and .verdict == "failed")' "$work/rerun/results.json" >/dev/null; then
  ok "--rerun-failed reran exactly PIN-QUERY, took the other $others over, and names its parent and its digest"
else bad "--rerun-failed did not record what it should:"; jq '.parent' "$work/rerun/results.json"; fi
grep -q "rerunning the 1 requirement(s) that failed in .*: PIN-QUERY; the other $others are taken over" "$work/rerun.log" &&
  ok "--rerun-failed says what it reruns" || bad "--rerun-failed did not say what it reruns"
grep -q 'A rerun (--rerun-failed) of the parent package' "$work/rerun/report.html" && ok "the rerun's report names its parent" ||
  bad "the rerun's report does not name its parent"
only_incomplete rerun "$work/rerun"
refused rerun_other_backend "is a package of backend broken_query_start_only .*, not of host" \
  "$xmc" qualify --backend host --rerun-failed "$work/parent" --out "$work/rerun-host"
refused rerun_not_package "--rerun-failed: .* is not a qualification package" \
  "$xmc" qualify --backend host --rerun-failed "$work/shard1/logs" --out "$work/rerun-none"
jqi "$work/parent/results.json" '.timeout_s = 7'
rejected rerun_parent_changed "$work/rerun" "is not the one this rerun names: its results.json's digest differs"

# ---- --repeat: the flake rate -------------------------------------------------
"$xmc" qualify --backend "$racy" --filter 'PIN-THREADS' --repeat 4 --out "$work/repeat-racy" >"$work/repeat-racy.log" 2>&1
if jq -e '.repeat == 4 and (.requirements[0] | .runs == 4 and .failed_runs >= 1 and .verdict == "failed"
          and .flake_rate == .failed_runs / 4)' "$work/repeat-racy/results.json" >/dev/null; then
  ok "--repeat 4 on the racy backend: PIN-THREADS failed $(jq '.requirements[0].failed_runs' "$work/repeat-racy/results.json") of 4 runs, flake rate $(jq '.requirements[0].flake_rate' "$work/repeat-racy/results.json")"
else bad "--repeat 4 did not record the flake rate:"; jq '.requirements[0] | {runs, failed_runs, flake_rate, verdict}' "$work/repeat-racy/results.json"; fi
[ "$(grep -c '^==== xmc qualify --repeat 4: run' "$work/repeat-racy/logs/PIN-THREADS.log")" -eq 4 ] && ok "the log holds the 4 runs" ||
  bad "the log does not hold 4 runs"
grep -q 'Flake rates (failed runs / runs) above 0: PIN-THREADS' "$work/repeat-racy/report.html" && ok "the report shows the flake rate" ||
  bad "the report does not show the flake rate"
only_incomplete repeat_racy "$work/repeat-racy"
"$xmc" qualify --backend host --filter 'PIN-ALLOC' --repeat 3 --out "$work/repeat-host" >/dev/null 2>&1
jq -e '.requirements[0] | .runs == 3 and .failed_runs == 0 and .flake_rate == 0 and .verdict == "passed"' \
  "$work/repeat-host/results.json" >/dev/null && ok "--repeat 3 on the host: PIN-ALLOC passed 3 of 3" || bad "--repeat 3 on the host"
rm -rf "$work/repeat-edit" && cp -r "$work/repeat-racy" "$work/repeat-edit" && jqi "$work/repeat-edit/results.json" '.requirements[0].flake_rate = 0.1'
rejected flake_rate_edited "$work/repeat-edit" "PIN-THREADS: flake rate 0.100000 is not its failed runs / runs"
rm -rf "$work/repeat-edit2" && cp -r "$work/repeat-racy" "$work/repeat-edit2" && jqi "$work/repeat-edit2/results.json" \
  '(.requirements[0]) |= (.verdict = "passed" | .tests[].status = "passed")'
rejected failed_run_passed "$work/repeat-edit2" "PIN-THREADS failed [0-9]+ of its runs but is 'passed'"

# ---- benchmarks: CSV, verdicts, plots across sizes ----------------------------
if [ -s "$serial/bench.csv" ] && head -n1 "$serial/bench.csv" | grep -q '^path,series,bytes,size,figure,unit,peak,ratio,ratio_lo,ratio_hi,ratio_min,ratio_max,samples,requirement,target,baseline,verdict$' &&
   [ $(($(wc -l <"$serial/bench.csv") - 1)) -eq "$(jq '.rows | length' "$serial/bench.json")" ]; then
  ok "bench.csv beside bench.json: a row per path and size, the measurements as columns"
else bad "bench.csv is missing or does not match bench.json"; fi
points=$(grep -o '<polyline points="[^"]*" fill="none" stroke="#1f5fa8"' "$serial/plots/pin-alloc-free.svg" | wc -w)
[ "$points" -ge 5 ] && ok "the pin alloc+free plot draws one curve across its 3 sizes" || bad "the pin alloc+free plot has no curve across sizes"
grep -q 'class="bench-' "$serial/report.html" && ok "the report colours each bench row by its verdict" || bad "the report's bench rows have no verdict class"
rm -rf "$work/bench-edit" && cp -r "$serial" "$work/bench-edit" && jqi "$work/bench-edit/bench.json" \
  '.rows[0] |= ((if .pairs then .pairs |= map(1.2) else . end) | .ratio = 1.2 | .figure = 1.2 * .peak | .ratio_lo = 1.2 | .ratio_hi = 1.2 | .ratio_min = 1.2 | .ratio_max = 1.2 | .median_lo = 1.2 | .median_hi = 1.2)'
rejected broken_not_flagged "$work/bench-edit" "has verdict 'ok', but its ratio, target and peak give 'broken'"
# Recorded H200 runs, judged again: a broken measurement, and misses, fail.
h200=$src/hardware/results
"$xmc" bench --from "$h200/h200x2-driver580/bench.json" >"$work/from-broken.out" 2>&1; rc=$?
[ "$rc" -eq 1 ] && grep -q 'FAILED: broken measurement: H2D from pageable (1 GiB): the figure 8.66 GB/s beats its same-run peak 7.04 GB/s: ratio 1.230' "$work/from-broken.out" &&
  ok "a figure 1.23 of its peak (H200, H2D from pageable) is a broken measurement and fails xmc bench" ||
  { bad "the broken measurement was not failed (exit $rc):"; grep -E 'FAILED|figures' "$work/from-broken.out"; }
# A target applies at every size: the 1 GiB run meets VMM-SPEED, the same rows at 16 MiB miss it.
jq '.bytes = 16777216 | .rows |= map(.path |= sub(" 1 GiB "; " 16 MiB ")
    | if (.path | startswith("VMM reload")) and .target > 0 then .figure = 0.8 * .peak | .ratio = 0.8 else . end)' \
  "$h200/h200x2-driver580-issue7/gpu1-bench.json" >"$work/gpu-16M.json"
jq '.rows |= map(select(.path | startswith("VMM")))' "$h200/h200x2-driver580-issue7/gpu1-bench.json" >"$work/gpu-1G.json"
jq '.rows |= map(select(.path | startswith("VMM")))' "$work/gpu-16M.json" >"$work/gpu-16M-vmm.json"
"$xmc" bench --from "$work/gpu-16M-vmm.json" --from "$work/gpu-1G.json" --json "$work/sizes.json" >"$work/from-sizes.out" 2>&1; rc=$?
if [ "$rc" -eq 1 ] && grep -q 'FAILED: target missed: VMM reload of a remapped slot 16 MiB vs raw copy into a fresh mapping (16 MiB): ratio 0.800 below VMM-SPEED' "$work/from-sizes.out" &&
   ! grep -q 'FAILED: target missed: .*(1 GiB)' "$work/from-sizes.out"; then
  ok "a miss at 16 MiB fails xmc bench though 1 GiB meets the target"
else bad "the 16 MiB miss did not fail xmc bench (exit $rc):"; grep -E 'FAILED|figures|VMM' "$work/from-sizes.out"; fi
jq -e '[.rows[] | select(.series == "VMM reload of a remapped slot vs raw copy into a fresh mapping") | .bytes] == [16777216, 1073741824]' \
  "$work/sizes.json" >/dev/null && ok "a path with its size inside is one series across sizes (one curve)" ||
  { bad "the VMM rows of two sizes are not one series:"; jq -r '.rows[].series' "$work/sizes.json"; }
[ -s "$work/sizes.csv" ] && grep -q '^VMM reload of a remapped slot 16 MiB vs raw copy into a fresh mapping,.*,16777216,16 MiB,.*,missed$' "$work/sizes.csv" &&
  ok "xmc bench --json writes the CSV beside it, the verdict in its last column" || bad "no CSV beside --json, or its rows lack the verdict"
# Baselines: written from a run, a drop beyond the tolerance fails, another device is refused.
"$xmc" bench --from "$work/gpu-1G.json" --write-baseline "$work/base.json" --tolerance 0.05 >"$work/write-base.out" 2>&1
jq -e '.format == "xmc-bench-baseline/2" and .device == "NVIDIA H200" and (.rows | length) > 0 and all(.rows[]; .tolerance == 0.05)' \
  "$work/base.json" >/dev/null && ok "--write-baseline wrote a baseline ($(grep -o 'check it in as .*' "$work/write-base.out"))" || bad "--write-baseline wrote no baseline"
"$xmc" bench --from "$work/gpu-1G.json" --baseline "$work/base.json" >"$work/same-base.out" 2>&1 && ok "the run meets its own baseline" ||
  { bad "the run does not meet its own baseline:"; grep FAILED "$work/same-base.out"; }
jq '.rows[0].ratio *= 1.2' "$work/base.json" >"$work/base-high.json"
"$xmc" bench --from "$work/gpu-1G.json" --baseline "$work/base-high.json" >"$work/below-base.out" 2>&1; rc=$?
[ "$rc" -eq 1 ] && grep -q 'FAILED: below baseline: VMM' "$work/below-base.out" && ok "a drop of 17% against a 5% tolerance fails: $(grep -m1 'below baseline' "$work/below-base.out")" ||
  { bad "a drop below the baseline did not fail (exit $rc)"; grep -E 'FAILED|figures' "$work/below-base.out"; }
jq '.device = "NVIDIA H100 80GB HBM3"' "$work/base.json" >"$work/base-h100.json"
refused baseline_other_device "baseline .*base-h100.json is for device 'NVIDIA H100 80GB HBM3' with driver .* but this run measured 'NVIDIA H200'" \
  "$xmc" bench --from "$work/gpu-1G.json" --baseline "$work/base-h100.json"
jq '.driver = "575.57.08"' "$work/base.json" >"$work/base-575.json"
refused baseline_other_driver "is for device 'NVIDIA H200' with driver '575.57.08'" \
  "$xmc" bench --from "$work/gpu-1G.json" --baseline "$work/base-575.json"

# ---- the environment statement: PCI link, NUMA node, huge pages, CPU -----------
jq -e '.cpu.cores >= 1 and (.cpu.model | type) == "string" and (.hugepages.transparent.enabled | type) == "string"
       and (.hugepages.explicit | length) > 0 and all(.devices[]; .pci | type == "object")' "$serial/environment.json" >/dev/null &&
  ok "environment.json records the CPU, the huge pages and each device's PCI facts (or why not): $(jq -c '.devices[0].pci' "$serial/environment.json" | cut -c1-80)..." ||
  bad "environment.json lacks the CPU, huge-page or PCI fields"
for edit in 'del(.hugepages)|lacks .hugepages.' 'del(.devices[0].pci)|device 0 has no .pci.' 'del(.cpu.cores)|the CPU model or core count' \
            '.devices[0].pci = {"bus_id": "0000:18:00.0"}|device 0.s pci lacks .current_link_speed.' \
            'del(.hugepages.transparent.defrag)|transparent huge page settings'; do
  name=env_$(echo "${edit%%|*}" | tr -c 'a-z0-9' '_' | cut -c1-30)
  rm -rf "$work/$name" && cp -r "$serial" "$work/$name" && jqi "$work/$name/environment.json" "${edit%%|*}"
  rejected "$name" "$work/$name" "${edit#*|}"
done

[ "$fails" -eq 0 ] || { echo "package.fleet: $fails check(s) failed"; exit 1; }
echo "package.fleet: every check passed"
