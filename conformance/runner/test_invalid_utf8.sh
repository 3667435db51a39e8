#!/usr/bin/env bash
# runner.invalid_utf8_message: a backend's error detail that is not UTF-8
# reaches the package. The child `xmc run` writes each test's outcome as one
# JSON line (ResultsListener, main.cpp) with invalid bytes replaced by U+FFFD;
# were the bytes copied as they are, the parent could not parse the line, and
# the test would lose its message (and its status: reported crashed, or not run).
#   test_invalid_utf8.sh XMC BROKEN_BACKEND WORK
# BROKEN_BACKEND: libxmc_backend_broken_invalid_utf8_message.so, whose pin_free
# of an interior address is refused with a wrong status and a message holding
# the bytes 0xff 0xfe, which PIN-FREE's tests quote (the backend's last_error).
set -euo pipefail
xmc=$1 broken=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
rc=0
"$xmc" qualify --backend "$broken" --filter PIN-FREE --out "$work/pkg" >"$work/qualify.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { cat "$work/qualify.log"; echo "FAIL: qualify exited $rc, not 1 (PIN-FREE failed)"; exit 1; }
fails=0
# The interior-address test, and the hostile-address one (which also frees
# interior addresses; it runs under a sanitizer, where the first skips because
# mlock is a no-op there).
for t in PIN_FREE_RefusesInteriorAddress PIN_FREE_HostileAddressesRefusedWithNothingChanged; do
  sel=".requirements[] | select(.id == \"PIN-FREE\") | .tests[] | select(.name | test(\"\\\\.$t/\"))"
  status=$(jq -r "$sel | .status" "$work/pkg/results.json")
  if [ "$status" = skipped ] && jq -e "$sel | .message | test(\"mlock\")" "$work/pkg/results.json" >/dev/null; then
    echo "ok: $t skipped (mlock is a no-op under this build's sanitizer)"
  elif [ "$status" != failed ]; then
    echo "FAIL: $t is '$status', not 'failed'"; fails=$((fails + 1))
  elif ! jq -e "$sel | .message | contains(\"\\ufffd\")" "$work/pkg/results.json" >/dev/null; then
    echo "FAIL: $t failed, but its message does not hold U+FFFD:"; jq -r "$sel | .message" "$work/pkg/results.json"
    fails=$((fails + 1))
  else
    echo "ok: $t failed, its message quoting the backend's detail: $(jq -r "$sel | .message" "$work/pkg/results.json" | grep -m1 -o 'is inside a block.*')"
  fi
done
[ "$fails" -eq 0 ] || { echo "runner.invalid_utf8_message: $fails check(s) failed"; exit 1; }
echo "runner.invalid_utf8_message: the invalid bytes reached results.json as U+FFFD, the tests failed, not crashed"
