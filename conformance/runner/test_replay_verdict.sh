#!/usr/bin/env bash
# runner.replay_verdict: a failing stateful sequence is replayed on the
# runner's own host reference (SPEC 6), found beside the executable. Two runs
# of one broken backend whose range query looks at the start address only
# (PIN-QUERY's stateful property fails on it):
#   - the xmc of the build tree, with libxmc_backend_host.so in ../lib: the
#     host passes the sequence, so the verdict is a contract violation;
#   - the same xmc copied alone into a folder (a runner carried to another
#     machine without its libraries): there is no reference to replay on, so
#     the report says "no verdict: reference not found", never that the suite
#     is at fault (what it said before: a missing host was taken for a failing one).
#   test_replay_verdict.sh XMC BROKEN_BACKEND WORK
set -euo pipefail
xmc=$1 broken=$2 work=$3
rm -rf "$work" && mkdir -p "$work/alone"
cp "$xmc" "$work/alone/xmc"
filter=--gtest_filter='*PIN_QUERY_StatefulSequencesAgreeWithModel*'
fails=0
check() {  # check WHAT XMC WANT UNWANTED
  local what=$1 bin=$2 want=$3 unwanted=$4 rc=0
  XMC_BACKEND_PATH= "$bin" qualify --backend "$broken" --filter PIN-QUERY --out "$work/$what" >"$work/$what.log" 2>&1 || rc=$?
  if [ "$rc" -ne 1 ]; then
    echo "FAIL ($what): qualify exited $rc, not 1 (PIN-QUERY failed)"; fails=$((fails + 1)); return
  fi
  local msg
  msg=$(jq -r '.requirements[] | select(.id == "PIN-QUERY") | .tests[] | select(.name | test("Stateful")) | .message' \
        "$work/$what/results.json")
  if ! grep -q "$want" <<<"$msg"; then
    echo "FAIL ($what): the stateful failure does not say '$want':"; grep -i 'replay' <<<"$msg" || echo "$msg" | tail -5
    fails=$((fails + 1))
  elif grep -q "$unwanted" <<<"$msg"; then
    echo "FAIL ($what): the stateful failure says '$unwanted'"; fails=$((fails + 1))
  elif ! grep -q "replay on the host reference: .*$want" "$work/$what.log"; then
    echo "FAIL ($what): qualify's reproducer does not print the verdict"; fails=$((fails + 1))
  else
    echo "ok ($what): $(grep -o "$want[^\"]*" <<<"$msg" | head -1)"
  fi
}
check with-reference "$xmc" "verdict: contract violation by backend" "no verdict"
check alone "$work/alone/xmc" "no verdict: reference not found" "defect of the suite"
[ "$fails" -eq 0 ] || { echo "runner.replay_verdict: $fails check(s) failed"; exit 1; }
echo "runner.replay_verdict: the verdict is the reference's where it is installed, and 'no verdict' where it is not"
