#!/usr/bin/env bash
# docs.qualify_workflow: the vendor's workflow of docs/qualify.md, exactly as
# the document shows it. Every ```sh block preceded by <!-- workflow --> is
# extracted and run in order, with the document's variables set here; then
# the outcomes the document describes are checked.
# With a fifth argument `tsan` (a build with the ThreadSanitizer twins: docs.qualify_tsan), the
# blocks marked <!-- workflow tsan --> run too, in their place.
# Usage: test_qualify_doc.sh <docs/qualify.md> <xmc build dir> <example source dir> <work dir> [tsan]
set -euo pipefail
doc=$1
export XMC_BUILD=$2 SRC=$3 WORK=$4
tsan=${5:-}
export XMC_PREFIX=$WORK/prefix
rm -rf "$WORK" && mkdir -p "$WORK"

# The marked blocks, in order.
awk -v tsan="$tsan" '/^<!-- workflow -->$/ || (tsan == "tsan" && /^<!-- workflow tsan -->$/) { marked = 1; next }
     marked && /^```sh/ { inside = 1; next }
     inside && /^```/   { inside = 0; marked = 0; next }
     inside             { print }' "$doc" >"$WORK/workflow.sh"
blocks=$(grep -c '^<!-- workflow -->$' "$doc")
[ "$blocks" -ge 6 ] || { echo "docs.qualify_workflow: expected at least 6 workflow blocks in $doc, found $blocks"; exit 1; }
echo "--- the $blocks workflow blocks of $doc:"
cat "$WORK/workflow.sh"
echo "---"
if ! bash -euo pipefail -x "$WORK/workflow.sh" >"$WORK/workflow.log" 2>&1; then
  cat "$WORK/workflow.log"
  echo "docs.qualify_workflow: a command of $doc failed"
  exit 1
fi
cat "$WORK/workflow.log"

# What the document says those commands give.
fails=0
check() {
  if grep -Eq "$2" "$3"; then echo "ok: $1"; else echo "FAIL: $1 ('$2' not in $3)"; fails=$((fails + 1)); fi
}
check "list-backends shows the example's declared capability" '^example +1.0 +caps=pin ' "$WORK/workflow.log"
lines=$(wc -l <"$SRC/example_backend.cpp")
check "the document gives the example's length ($lines lines)" "pinning-only backend of $lines lines" "$doc"
check "the example qualifies: every must-pass requirement passed" 'failed:0' "$WORK/results/summary.txt"
check "the package holds the report" 'id="summary"' "$WORK/results/report.html"
check "the must-pass list is model + always + pin" '^# lists: model always pin$' "$WORK/results/mustpass.txt"
check "a waiver of a passing requirement fails the run" 'PIN-THREADS +failed +unexpected pass' "$WORK/workflow.log"
check "the waiver file is in that package" '^PIN-THREADS	example	\*	known race' "$WORK/results-waived/waivers.tsv"
check "xmc verify accepts the package" "$WORK/results: complete and consistent" "$WORK/workflow.log"
if [ "$tsan" = tsan ]; then
  check "the example qualifies under ThreadSanitizer (section 9)" 'failed:0' "$WORK/results-tsan/summary.txt"
  check "its children were the TSan runner over the example's TSan build" \
    'under ThreadSanitizer: .*/lib/xmc/tsan/xmc run --backend .*/build/tsan/libxmc_backend_example.so' "$WORK/workflow.log"
fi
[ "$fails" -eq 0 ] || { echo "docs.qualify_workflow: $fails check(s) failed"; exit 1; }
echo "docs.qualify_workflow: the document's commands work as it says"
