#!/usr/bin/env bash
# qualify --procs N (conformance/runner/procs.hpp): the transfer tests also in a world of processes.
#   test_procs.sh XMC WORK ipc [BROKEN_IPC_BACKEND]   (XMC_CUDA_DRIVER names the fake driver)
#     the CUDA backend over the fake: the process world takes path IPC, and the log and the package
#     say so; with a backend whose bug lies on path IPC alone, the process world catches it and
#     names the rank, where the thread world (--procs 0) cannot
#   test_procs.sh XMC WORK cannot_start
#     a world that cannot start (the store's folder cannot be made, fork fails, gloo cannot
#     connect) makes each transfer requirement unsupported with the reason, never passed
set -uo pipefail
xmc=$1 work=$2 mode=$3
rm -rf "$work" && mkdir -p "$work"
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
# has FILE REGEX WHAT
has() { if grep -Eq -- "$2" "$1"; then ok "$3: $(grep -Em1 -- "$2" "$1")"; else bad "$3: no line matching '$2' in $1"; sed 's/^/    /' "$1" | tail -40; fi; }

# verified DIR WHAT: xmc verify finds no problem in the package but those of its --filter (the
# must-pass requirements it did not select).
verified() {
  "$xmc" verify "$1" > "$1.verify" 2>&1
  if grep 'PROBLEM' "$1.verify" | grep -vq 'has no result in results.json (the run selected requirements with --filter'; then
    bad "$2: xmc verify finds problems in the package"; grep PROBLEM "$1.verify" | grep -v 'has no result in results.json'
  else
    ok "$2: xmc verify finds no problem but the requirements the filter left out"
  fi
}

case $mode in
ipc)
  # AFF-EXEC-EXACT: the transfer bodies' main property, in both worlds.
  t0=$SECONDS
  "$xmc" qualify --backend cuda --filter AFF-EXEC-EXACT --out "$work/ipc" > "$work/ipc.out" 2>&1
  rc=$?
  echo "qualify --procs 2 (default) of AFF-EXEC-EXACT on cuda over the fake: exit $rc in $((SECONDS - t0)) s"
  [ "$rc" -eq 0 ] && ok "exit 0" || { bad "exit $rc"; cat "$work/ipc.out"; }
  has "$work/ipc.out" 'AFF-EXEC-EXACT +passed .*process world of 2 ranks: paths .*ipc [1-9]' "the progress line names the process world's paths"
  log=$work/ipc/logs/AFF-EXEC-EXACT.log
  has "$log" '^xmc qualify: process world \(2 ranks over gloo\): data paths taken: .*ipc [1-9]' "the log shows path IPC taken in the process world"
  has "$log" '^==== xmc qualify --procs 2: process world, rank 1 of 2 ====' "the log holds rank 1's output"
  has "$log" '^xmc run: rank 1 of 2 over gloo .*seed [0-9]+' "rank 1 names the shared seed"
  if grep -Eq '^xmc qualify: thread world \(one process\): data paths taken: .*ipc' "$log"; then
    bad "the thread world took path IPC, which needs two processes: the process world shows nothing new"
  else
    has "$log" '^xmc qualify: thread world \(one process\): data paths taken: ' "the thread world's paths are named"
  fi
  has "$work/ipc/results.json" '"ipc": [1-9]' "results.json records path IPC"
  verified  "$work/ipc" ipc
  if [ $# -ge 4 ]; then
    # The bug on path IPC alone (conformance/broken/transfer/cuda_ipc_source_offset_dropped.cpp): caught
    # in the process world, with the rank named; missed where ranks are threads (--procs 0).
    "$xmc" qualify --backend "$4" --filter AFF-EXEC-EXACT --expect-fail AFF-EXEC-EXACT --out "$work/bug" > "$work/bug.out" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] && ok "the IPC bug is caught" || { bad "the IPC bug: exit $rc"; tail -30 "$work/bug.out"; }
    has "$work/bug.out" 'process world \(2 ranks over gloo\), rank [01]: ' "the failure names the world and the rank"
    "$xmc" qualify --backend "$4" --filter AFF-EXEC-EXACT --procs 0 --out "$work/bug0" > "$work/bug0.out" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] && ok "--procs 0: the thread world alone passes the IPC bug (why --procs exists)" \
      || { bad "--procs 0: exit $rc (the thread world caught an IPC bug?)"; tail -20 "$work/bug0.out"; }
  fi
  ;;
cannot_start)
  # One fast transfer requirement on the host backend, its world broken three ways.
  run() {  # run NAME ENV... : qualify AFF-ACCOUNT with ENV set
    local name=$1; shift
    env "$@" "$xmc" qualify --backend host --filter AFF-ACCOUNT --procs 2 --out "$work/$name" > "$work/$name.out" 2>&1
    echo "$name: exit $?"
  }
  run store XMC_PROCS_TMPDIR=/nonexistent/xmc-procs
  run fork XMC_TEST_PROCS_FAULT=fork
  run connect XMC_TEST_PROCS_FAULT=connect
  for name in store fork connect; do
    has "$work/$name/summary.txt" 'passed:0 failed:0 unsupported:1 ' "$name: unsupported, not passed"
  done
  has "$work/store.out" "AFF-ACCOUNT +unsupported +unsupported: the process world \(2 ranks over gloo\) could not start: cannot make the rendezvous store's folder /nonexistent/xmc-procs/xmc-procs-XXXXXX: No such file or directory" "store: the reason"
  has "$work/fork.out" 'AFF-ACCOUNT +unsupported +unsupported: the process world \(2 ranks over gloo\) could not start: fork of rank 0 failed: Resource temporarily unavailable \(simulated' "fork: the reason"
  has "$work/connect.out" 'AFF-ACCOUNT +unsupported +unsupported: the process world \(2 ranks over gloo\) could not start: rank [01]: gloo could not connect the ranks \(simulated' "connect: the reason"
  has "$work/connect/logs/AFF-ACCOUNT.log" 'cannot join the process world: gloo could not connect' "connect: the rank's own words in the log"
  for name in store fork connect; do verified "$work/$name" "$name"; done
  # The control: the same requirement with the world up passes, naming both worlds' paths.
  run control
  has "$work/control/summary.txt" 'passed:1 failed:0 unsupported:0 ' "control: passed"
  has "$work/control/logs/AFF-ACCOUNT.log" '^xmc qualify: process world \(2 ranks over gloo\): data paths taken: [a-z]+ [1-9]' "control: the process world's paths"
  # --procs not given: the host's thread world takes only staged, so the process world is left out,
  # saying why (the host's whole qualification stays within its time); a broken world is then no reason.
  env XMC_PROCS_TMPDIR=/nonexistent/xmc-procs "$xmc" qualify --backend host --filter AFF-ACCOUNT --out "$work/auto" > "$work/auto.out" 2>&1
  has "$work/auto/summary.txt" 'passed:1 failed:0 unsupported:0 ' "auto, host: passed on the thread world"
  has "$work/auto/logs/AFF-ACCOUNT.log" '^xmc qualify: process world: not run \(--procs not given\): the thread world took no path within one address space' "auto, host: the process world left out, saying why"
  ;;
*) echo "test_procs.sh: unknown mode $mode"; exit 2 ;;
esac
echo "test_procs.sh $mode: $fails failure(s)"
[ "$fails" -eq 0 ]
