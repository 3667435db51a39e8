#!/usr/bin/env bash
# package.verify: `xmc verify` accepts good packages and rejects each kind of
# bad one with its reason (every check can fail).
#   test_verify.sh XMC HOST_PACKAGE BROKEN_BACKEND WORK
# HOST_PACKAGE: made by `xmc qualify --backend host --bench` (test package.host).
# BROKEN_BACKEND: libxmc_backend_broken_query_start_only.so, whose PIN-QUERY fails.
# Each edit is made with jq or sed on a copy of a good package; the copy must
# be rejected (exit 1) and the output must name the reason.
set -euo pipefail
xmc=$1 good=$2 broken=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
fails=0

# A package with a real failure: the whole catalogue on a backend with one bug.
"$xmc" qualify --backend "$broken" --out "$work/broken" >"$work/broken.log" 2>&1 || true
grep -q 'PIN-QUERY *failed' "$work/broken.log" || { echo "setup: PIN-QUERY did not fail on $broken"; exit 1; }

# Good packages pass; --qualified rejects the one with a failed must-pass requirement.
for pkg in "$good" "$work/broken"; do
  if "$xmc" verify "$pkg" >"$work/verify.out" 2>&1; then echo "ok: accepted $pkg"
  else echo "FAIL: verify rejected a good package $pkg:"; cat "$work/verify.out"; fails=$((fails + 1)); fi
done

# --qualified also requires the must-pass requirements to pass.
if "$xmc" verify --qualified "$work/broken" >"$work/qualified.out" 2>&1; then
  echo "FAIL: verify --qualified accepted a package whose PIN-QUERY failed"; fails=$((fails + 1))
elif grep -q 'PROBLEM: must-pass requirement PIN-QUERY failed' "$work/qualified.out"; then
  echo "ok: verify --qualified rejected the package whose PIN-QUERY failed"
else
  echo "FAIL: verify --qualified did not name PIN-QUERY:"; cat "$work/qualified.out"; fails=$((fails + 1))
fi

# A package held to an earlier suite's must-pass lists (qualify --mustpass
# 0.1.0): mustpass.txt names that version, verify checks the package against
# its lists, and a requirement new since (CORE-INSTANCE, 0.2.0) is not must-pass.
"$xmc" qualify --backend host --mustpass 0.1.0 --out "$work/mustpass-0.1.0" >"$work/mustpass-0.1.0.log" 2>&1 ||
  { cat "$work/mustpass-0.1.0.log"; echo "FAIL: qualify --mustpass 0.1.0 failed"; fails=$((fails + 1)); }
if grep -qx '# suite: 0.1.0' "$work/mustpass-0.1.0/mustpass.txt" &&
   grep -qx '# lists: model pin pin_refs register stream copy vmm transfer' "$work/mustpass-0.1.0/mustpass.txt" &&
   ! grep -qx 'CORE-INSTANCE' "$work/mustpass-0.1.0/mustpass.txt" &&
   jq -e '.mustpass.suite == "0.1.0" and (.requirements[] | select(.id == "CORE-INSTANCE") | .mustpass == false and .verdict == "passed")' \
     "$work/mustpass-0.1.0/results.json" >/dev/null; then
  echo "ok: qualify --mustpass 0.1.0 recorded suite 0.1.0's lists (model, no always); CORE-INSTANCE ran, not must-pass"
else
  echo "FAIL: the 0.1.0 package does not record 0.1.0's must-pass lists:"; head -n 4 "$work/mustpass-0.1.0/mustpass.txt"
  fails=$((fails + 1))
fi
if "$xmc" verify --qualified "$work/mustpass-0.1.0" >"$work/mustpass-0.1.0.out" 2>&1 &&
   grep -q 'complete and consistent .* 49 must-pass' "$work/mustpass-0.1.0.out"; then
  echo "ok: verify accepted the 0.1.0 package against 0.1.0's lists: $(grep -m1 'complete and consistent' "$work/mustpass-0.1.0.out")"
else
  echo "FAIL: verify rejected the 0.1.0 package:"; cat "$work/mustpass-0.1.0.out"; fails=$((fails + 1))
fi
# 0.2.0 predates capability transfer_prepared (0.3.0), which the host declares: held to 0.2.0's
# lists, the host is held to no transfer_prepared list (no "no must-pass list" refusal), and
# AFF-PREPARED-EXACT runs but is not must-pass.
"$xmc" qualify --backend host --mustpass 0.2.0 --filter AFF-PREPARED-EXACT --procs 0 --out "$work/mustpass-0.2.0" \
  >"$work/mustpass-0.2.0.log" 2>&1 || true
if grep -qx '# suite: 0.2.0' "$work/mustpass-0.2.0/mustpass.txt" &&
   jq -e '.mustpass.suite == "0.2.0" and (.mustpass.lists | index("transfer") != null and index("transfer_prepared") == null) and
          (.requirements[] | select(.id == "AFF-PREPARED-EXACT") | .mustpass == false)' \
     "$work/mustpass-0.2.0/results.json" >/dev/null; then
  echo "ok: qualify --mustpass 0.2.0 held the host to 0.2.0's lists, no transfer_prepared list; AFF-PREPARED-EXACT not must-pass"
else
  echo "FAIL: the 0.2.0 package does not record 0.2.0's must-pass lists:"; cat "$work/mustpass-0.2.0.log"
  fails=$((fails + 1))
fi

# expect NAME BASE REASON-REGEX EDIT...: copies BASE, runs EDIT in the copy,
# and requires verify to reject it with a line matching REASON-REGEX.
expect() {
  local name=$1 base=$2 reason=$3; shift 3
  local d="$work/$name"
  rm -rf "$d" && cp -r "$base" "$d"
  (cd "$d" && eval "$*")
  local rc=0
  "$xmc" verify "$d" >"$d.out" 2>&1 || rc=$?
  if [ "$rc" -eq 1 ] && grep -Eq "PROBLEM: .*$reason" "$d.out"; then
    echo "ok: $name rejected: $(grep -E "PROBLEM: .*$reason" "$d.out" | head -n1 | sed 's/^xmc verify: PROBLEM: //')"
  else
    echo "FAIL: $name: expected exit 1 and a problem matching '$reason', got exit $rc:"; cat "$d.out"
    fails=$((fails + 1))
  fi
}
# jq edit of a JSON file in place: jqi FILE FILTER
jqi() { jq "$2" "$1" >"$1.tmp" && mv "$1.tmp" "$1"; }

# Four edits verify must catch: a summary count changed, a must-pass result removed, a waiver for a requirement outside the list, a failure flipped to a pass.
expect summary_count_changed "$good" "summary.txt says .* but the verdicts in results.json count" \
  "sed -i 's/passed:\([0-9]*\)/passed:9\1/' summary.txt"
expect mustpass_result_removed "$good" "must-pass requirement PIN-FREE has no result" \
  "jqi results.json 'del(.requirements[] | select(.id == \"PIN-FREE\"))'"
expect waiver_for_unlisted_requirement "$good" "waiver for VMM-SPEED .*not in the must-pass list" \
  "printf 'VMM-SPEED\thost\t*\tslow on this machine\thttps://example.invalid/1\n' >>waivers.tsv"
expect failed_flipped_to_passed "$work/broken" "summary.txt says .*failed:1.* but the verdicts in results.json count .*failed:0" \
  "jqi results.json '(.requirements[] | select(.id == \"PIN-QUERY\")) |= (.verdict = \"passed\" | .tests[].status = \"passed\")'"

# Every other check.
expect missing_file "$good" "missing file: junit.xml" "rm junit.xml"
expect missing_log "$good" "missing log logs/PIN-ALLOC.log" "rm logs/PIN-ALLOC.log"
expect bad_json "$good" "environment.json is not a valid JSON object" "echo '{' >environment.json"
expect wrong_format "$good" "format 'xmc-qualification/0' is not" "jqi results.json '.format = \"xmc-qualification/0\"'"
expect other_suite "$good" "made by suite 9.9.9" \
  "jqi results.json '.suite.version = \"9.9.9\"'"
expect summary_object_changed "$good" "results.json's summary says" "jqi results.json '.summary.passed += 1'"
expect verdict_without_failing_test "$good" "PIN-ALLOC is 'failed' but none of its tests failed" \
  "jqi results.json '(.requirements[] | select(.id == \"PIN-ALLOC\")).verdict = \"failed\"'"
expect unknown_requirement "$good" "requirement 'PIN-NOPE' is not in the catalogue" \
  "jqi results.json '(.requirements[] | select(.id == \"PIN-ALLOC\")).id = \"PIN-NOPE\"'"
expect mustpass_list_edited "$good" "mustpass.txt leaves out PIN-FREE" "sed -i '/^PIN-FREE\$/d' mustpass.txt"
expect mustpass_lists_renamed "$good" "mustpass.txt names the lists" "sed -i 's/^# lists: model /# lists: /' mustpass.txt"
expect mustpass_version_changed "$work/mustpass-0.1.0" "results.json records the must-pass lists of suite 0.1.0 but mustpass.txt those of suite 0.3.0" \
  "sed -i 's/^# suite: 0.1.0\$/# suite: 0.3.0/' mustpass.txt"
expect mustpass_version_changed_lists "$work/mustpass-0.1.0" "mustpass.txt names the lists \\[model, pin, .*\\] but a backend declaring .* runs against \\[model, always, pin, .*, transfer_prepared\\] of suite 0.3.0" \
  "sed -i 's/^# suite: 0.1.0\$/# suite: 0.3.0/' mustpass.txt && jqi results.json '.mustpass.suite = \"0.3.0\"'"
expect mustpass_version_unknown "$good" "mustpass.txt names suite 9.9.9: this xmc holds no must-pass lists of suite 9.9.9 \\(it holds 0.1.0, 0.2.0, 0.3.0\\)" \
  "sed -i 's/^# suite: .*/# suite: 9.9.9/' mustpass.txt && jqi results.json '.mustpass.suite = \"9.9.9\"'"
expect waived_without_waiver "$work/broken" "PIN-QUERY is 'waived' but waivers.tsv holds no waiver" \
  "jqi results.json '(.requirements[] | select(.id == \"PIN-QUERY\")).verdict = \"waived\"'"
expect unexpected_pass_of_waived "$good" "PIN-ALLOC is waived .* but passed" \
  "printf 'PIN-ALLOC\thost\t*\tknown failure\thttps://example.invalid/2\n' >>waivers.tsv"
expect bad_waiver_line "$good" "waivers.tsv:[0-9]+: a waiver has 5 tab-separated columns" \
  "printf 'PIN-ALLOC\thost\n' >>waivers.tsv"
expect capabilities_changed "$good" "capabilities.json declares \\[pin,pin_refs,register,stream,copy,transfer,graph,register_portable,transfer_prepared\\] but results.json" \
  "jqi capabilities.json '.capabilities -= [\"vmm\"] | .mask -= 64'"
expect capability_mask_changed "$good" "the mask 1 does not match" "jqi capabilities.json '.mask = 1'"
expect backend_renamed "$good" "capabilities.json names backend other" "jqi capabilities.json '.backend = \"other\"'"
expect undeclared_but_passed "$good" "PIN-DEVICE needs capability 'pin_register', which capabilities.json does not declare, yet it is 'passed'" \
  "jqi results.json '(.requirements[] | select(.id == \"PIN-DEVICE\")).verdict = \"passed\"'"
expect library_disagrees "$good" "the library .* is backend host declaring" \
  "jqi capabilities.json '.capabilities = [\"pin\"] | .mask = 1' && jqi results.json '.backend.capabilities = \"pin\"' && jqi environment.json '.backend.capabilities = \"pin\"'"
expect junit_disagrees "$good" "junit.xml disagrees with results.json on PIN-ALLOC" \
  "sed -i '0,/<testcase classname=\"PIN-ALLOC\"\\([^>]*\\) \\/>/s//<testcase classname=\"PIN-ALLOC\"\\1><failure message=\"x\" type=\"failed\">x<\\/failure><\\/testcase>/' junit.xml"
# junit.xml is parsed (pugixml), not searched: a file no XML parser reads is
# rejected with the parser's reason and where; and a failure message must come
# back exactly, its newlines included (pugixml writes them as &#10;; written raw,
# as a hand-made writer would, a parser reads each as a space).
expect malformed_xml "$good" "junit.xml is not well-formed XML: Start-end tags mismatch at offset [0-9]+ \\(line [0-9]+\\)" \
  "sed -i '/<\\/testsuites>/d' junit.xml"
expect truncated_junit "$good" "junit.xml is not well-formed XML: .* at offset [0-9]+ \\(line [0-9]+\\)" \
  "head -c \$((\$(stat -c %s junit.xml) / 2)) junit.xml >junit.cut && mv junit.cut junit.xml"
expect junit_attribute_newline_lost "$work/broken" \
  "junit.xml disagrees with results.json on PIN-QUERY: testcase .*: the failure message differs at character [0-9]+: a newline in results.json, a space in junit.xml" \
  "sed -i '0,/&#10;/s//\\n/' junit.xml"
expect junit_skip_missing "$good" "junit.xml disagrees with results.json on PIN-DEVICE: testcase 'PIN-DEVICE' holds 0 <failure> and 0 <skipped>, but its status is 'skipped'" \
  "sed -i '/<testcase classname=\"PIN-DEVICE\"/,/<\\/testcase>/{/<skipped /d}' junit.xml"
expect environment_incomplete "$good" "environment.json lacks 'os'" "jqi environment.json 'del(.os)'"
expect bench_missing "$good" "missing file: bench.json" "rm bench.json"
expect bench_ratio_edited "$good" "bench.json: row .* has ratio 0.99" "jqi bench.json '.rows[0].ratio = 0.99'"
expect report_stale "$good" "report.html does not show the summary line" \
  "sed -i 's/xmc: tests:/xmc: tests:1/' report.html"
expect plot_missing "$good" "the report names plots/.*, which is missing" "rm plots/*.svg"
# Members missing or of another type than verify reads: each a problem, never an abort (a const
# nlohmann::json's operator[] on a missing key asserts; value() of a non-object throws).
expect env_backend_missing "$good" "a member of the package's JSON has the wrong type: .*cannot use value\\(\\) with null" \
  "jqi environment.json 'del(.backend)'"
expect requirement_not_object "$good" "a member of the package's JSON has the wrong type" \
  "jqi results.json '.requirements[0] = 7'"
expect tests_missing "$good" "PIN-ALLOC" "jqi results.json '(.requirements[] | select(.id == \"PIN-ALLOC\")) |= del(.tests)'"
expect bench_row_fields_missing "$good" "bench.json: row .* has a ratio but no figure or peak" "jqi bench.json '.rows[0] |= del(.figure, .peak)'"
# (shard gone, a summary count changed: rejected for the count, after the shard checks ran without aborting)
expect shard_missing "$good" "results.json.s summary says" "jqi results.json 'del(.shard) | .summary.passed += 1'"

if [ "$fails" -ne 0 ]; then echo "package.verify: $fails check(s) failed"; exit 1; fi
echo "package.verify: all checks passed"
