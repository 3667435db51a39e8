#!/usr/bin/env bash
# runner.cli: xmc's command line (CLI11, conformance/runner/main.cpp). Every
# subcommand's --help prints its usage (exit 0); an unknown subcommand or flag,
# a missing required option and a bad value are refused, exit 2, with a message
# naming it; `xmc run` hands what it does not know to GoogleTest.
#   test_cli.sh XMC WORK
set -uo pipefail
xmc=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
fails=0
# expect RC REGEX ARGS...: `xmc ARGS` exits RC and prints a line matching REGEX.
expect() {
  local want=$1 re=$2; shift 2
  local rc=0
  "$xmc" "$@" >"$work/out" 2>&1 || rc=$?
  if [ "$rc" -eq "$want" ] && grep -Eq -- "$re" "$work/out"; then
    echo "ok: xmc $* -> exit $rc: $(grep -Em1 -- "$re" "$work/out")"
  else
    echo "FAIL: xmc $*: expected exit $want and a line matching '$re', got exit $rc:"; sed 's/^/    /' "$work/out"
    fails=$((fails + 1))
  fi
}

# Generated usage.
expect 0 '^Usage: xmc \[OPTIONS\] \[SUBCOMMAND\]' --help
for sub in list-backends list-devices list-requirements where qualify verify merge bench mustpass run; do
  expect 0 "^Usage: xmc $sub " "$sub" --help
done
expect 0 '^  --tier TEXT:\{gpu1,gpu2,multirank,pr\}' qualify --help
expect 0 '^  --mustpass TEXT:\{0\.1\.0,0\.2\.0,0\.3\.0\}=0\.3\.0' qualify --help

# Refusals, each naming what is wrong (exit 2).
expect 2 'a subcommand is required'
expect 2 'not expected: frob' frob
expect 2 'xmc qualify: .*not expected: --bogus' qualify --backend host --out "$work/q" --bogus
expect 2 'xmc qualify: --out is required' qualify --backend host
expect 2 'xmc qualify: --backend is required' qualify --out "$work/q"
expect 2 'xmc qualify: --timeout: takes a number >= 1, not .0.' qualify --backend host --out "$work/q" --timeout 0
expect 2 'xmc qualify: .*--timeout' qualify --backend host --out "$work/q" --timeout soon
expect 2 'xmc qualify: --tier: gpu3 not in \{gpu1,gpu2,multirank,pr\}' qualify --backend host --out "$work/q" --tier gpu3
# --sanitize thread without the ThreadSanitizer builds it needs: refused, naming the missing file.
XMC_TSAN_RUNNER=/nonexistent/xmc expect 2 'no ThreadSanitizer build of the runner \(/nonexistent/xmc\)' \
  qualify --sanitize thread --backend host --out "$work/q"
XMC_TSAN_RUNNER=$xmc expect 2 "no ThreadSanitizer build of backend 'host' \\($(dirname "$xmc")/libxmc_backend_host.so\\)" \
  qualify --sanitize thread --backend host --out "$work/q"
cp "$(dirname "$xmc")/../lib/libxmc_backend_host.so" "$work/libxmc_backend_copy.so"  # a backend with no tsan/ twin
XMC_TSAN_RUNNER=$xmc expect 2 "no ThreadSanitizer build of $work/libxmc_backend_copy.so \\($work/tsan/libxmc_backend_copy.so\\): build it with xmc_add_backend" \
  qualify --sanitize thread --backend "$work/libxmc_backend_copy.so" --out "$work/q"
expect 2 'xmc qualify: --mustpass: 9\.9\.9 not in \{0\.1\.0,0\.2\.0,0\.3\.0\}' qualify --backend host --out "$work/q" --mustpass 9.9.9
expect 2 'xmc qualify: --bench-sizes requires --bench' qualify --backend host --out "$work/q" --bench-sizes 1M
expect 2 "xmc qualify: --bench-sizes: bad size '3Q'" qualify --backend host --out "$work/q" --bench --bench-sizes 3Q
expect 2 "xmc qualify: --expect-fail: 'PIN-NOPE' is not a requirement" qualify --backend host --out "$work/q" --expect-fail PIN-FREE,PIN-NOPE
expect 2 'xmc qualify: --waivers: .*no-such-file' qualify --backend host --out "$work/q" --waivers "$work/no-such-file"
# At fleet scale: --jobs, --shard, --repeat, --rerun-failed, merge; bench's baselines.
expect 2 'xmc qualify: --jobs: takes a number >= 1, not .0.' qualify --backend host --out "$work/q" --jobs 0
expect 2 "xmc qualify: --shard: takes I/N, share I of N with 1 <= I <= N \(e.g. 1/2\), not '3/2'" qualify --backend host --out "$work/q" --shard 3/2
expect 2 "xmc qualify: --shard: takes I/N, share I of N with 1 <= I <= N \(e.g. 1/2\), not '0/2'" qualify --backend host --out "$work/q" --shard 0/2
expect 2 "xmc qualify: --shard: takes I/N, .*not '2'" qualify --backend host --out "$work/q" --shard 2
expect 2 'xmc qualify: --repeat: takes a number >= 1, not .0.' qualify --backend host --out "$work/q" --repeat 0
expect 2 "xmc qualify: --procs: takes 0 \(off\) or a number >= 2, not '1'" qualify --backend host --out "$work/q" --procs 1
expect 2 'xmc run: --xmc-rank requires --xmc-ranks' run --backend host --xmc-rank 0
mkdir -p "$work/not-a-package"
expect 2 'xmc qualify: --rerun-failed: .*/not-a-package is not a qualification package: it holds no readable results.json' \
  qualify --backend host --out "$work/q" --rerun-failed "$work/not-a-package"
expect 2 'xmc qualify: --rerun-failed: Directory does not exist: .*/no-such-dir' qualify --backend host --out "$work/q" --rerun-failed "$work/no-such-dir"
expect 2 'xmc qualify: --filter excludes --rerun-failed' qualify --backend host --out "$work/q" --rerun-failed "$work/not-a-package" --filter 'PIN-*'
expect 2 'xmc qualify: --shard excludes --rerun-failed' qualify --backend host --out "$work/q" --rerun-failed "$work/not-a-package" --shard 1/2
expect 2 "xmc qualify: the filter 'PIN-ALLOC', shard 2/2, selects no requirement" qualify --backend host --out "$work/q" --filter PIN-ALLOC --shard 2/2
expect 2 'xmc merge: DIR is required' merge --out "$work/m"
expect 2 'xmc merge: --out is required' merge "$work/not-a-package"
expect 2 'xmc merge: .*/not-a-package is not a qualification package' merge "$work/not-a-package" --out "$work/m"
expect 2 'xmc bench: --tolerance requires --write-baseline' bench --backend host --tolerance 0.2
expect 2 'xmc bench: --baseline: File does not exist: .*no-such-file' bench --backend host --baseline "$work/no-such-file"
expect 2 'xmc bench: --from: File does not exist' bench --from "$work/no-such-file"
expect 2 'xmc bench: --min-ratio: takes a number >= 0, not .-1.' bench --backend host --min-ratio -1
expect 2 'xmc bench: --kind: gpu not in \{cuda,host\}' bench --backend host --kind gpu
expect 2 'xmc bench: --timeout: takes a number >= 1, not .0.' bench --backend host --timeout 0
expect 2 'xmc bench: --backend is required' bench
expect 2 'xmc mustpass: --version: 9\.9\.9 not in \{0\.1\.0,0\.2\.0,0\.3\.0\}' mustpass --version 9.9.9
expect 2 'xmc mustpass: --generate requires --out' mustpass --generate
expect 2 'xmc mustpass: --out requires --generate' mustpass --out "$work/mp"
expect 2 'xmc mustpass: --dir requires --check' mustpass --dir "$work"
expect 2 'xmc mustpass: --check excludes --generate' mustpass --generate --check --out "$work/mp"
expect 2 'the lists of 0\.1\.0 are frozen' mustpass --generate --version 0.1.0 --out "$work/mp"
expect 2 'the lists of 0\.2\.0 are frozen' mustpass --generate --version 0.2.0 --out "$work/mp"
expect 2 'xmc where: ID is required' where
expect 2 'xmc verify: DIR is required' verify
expect 2 'xmc list-requirements: .*not expected: .*--backend' list-requirements --backend host
expect 2 "xmc run: '--bogus' is neither an option of xmc run nor a GoogleTest flag" run --backend host --bogus
expect 2 'is not a folder' verify "$work/no-such-dir"
expect 2 'PIN-NO-SUCH-ID' where PIN-NO-SUCH-ID

# What is accepted: GoogleTest's flags pass through `xmc run`, before or after its own.
expect 0 '^\[  PASSED  \] 1 test' run --backend host --gtest_filter='*PIN_ALLOC_RefusesZeroSize*'
expect 0 '^\[  PASSED  \] 1 test' run --gtest_filter='*PIN_ALLOC_RefusesZeroSize*' --backend=host
expect 0 'PIN_ALLOC_RefusesZeroSize/host' run --backend host --gtest_list_tests --gtest_filter='*PIN_ALLOC*'
expect 0 '"event":"end"' run --backend host --gtest_filter='*PIN_ALLOC_RefusesZeroSize*' --xmc-results /dev/stdout
expect 0 '^host ' list-backends
expect 0 'reports 1 device' list-devices
expect 0 '^0\.1\.0/pin\.txt: PIN-ALLOC' mustpass --version 0.1.0
expect 0 '0 problem\(s\) in the must-pass lists of suite 0\.3\.0' mustpass --check
expect 0 '^xmc mustpass: wrote the 15 must-pass lists of suite 0\.3\.0' mustpass --generate --out "$work/mp"

# --tier runs the rows of that tier only (requirements.tsv): REG-SPEED is gpu1's alone.
expect 0 '^xmc: tests:16 passed' qualify --backend host --tier gpu2 --filter 'REG-*' --out "$work/tier-gpu2"
# --filter: comma-separated globs and -GLOB exclusions (as --gtest_filter's ':' and '-').
expect 0 '^xmc: tests:3 passed:3 ' qualify --backend host --filter 'PIN-FREE,PIN-QUERY,REG-ARGS' --out "$work/filter-list"
expect 0 '^xmc: tests:2 passed:2 ' qualify --backend host --filter 'PIN-FREE,PIN-QUERY,REG-ARGS,-REG-*' --out "$work/filter-excl"
expect 0 '\] PIN-ALLOC ' qualify --backend host --filter 'PIN-A*,-PIN-AFTER-FREE,-PIN-ACCOUNT' --out "$work/filter-one"
expect 0 '^xmc: tests:1 passed:1 ' qualify --backend host --filter 'PIN-A*,-PIN-AFTER-FREE,-PIN-ACCOUNT' --out "$work/filter-one2"
expect 2 "xmc qualify: the filter 'PIN-\*,-PIN-\*' selects no requirement" qualify --backend host --filter 'PIN-*,-PIN-*' --out "$work/filter-none"
expect 2 "xmc qualify: --filter: 'PIN-\*,' has an empty glob" qualify --backend host --filter 'PIN-*,' --out "$work/filter-bad"
expect 2 "xmc qualify: --filter: '-' has an empty glob" qualify --backend host --filter '-' --out "$work/filter-bad"
expect 0 '^\[ 1/1\] REG-SPEED +unsupported +measured by the hardware tier \(gpu1\)' \
  qualify --backend host --tier gpu1 --filter 'REG-SPEED' --out "$work/tier-gpu1"
expect 2 "xmc qualify: the filter 'PIN-\*' in tier multirank selects no requirement" \
  qualify --backend host --tier multirank --filter 'PIN-*' --out "$work/tier-none"

[ "$fails" -eq 0 ] || { echo "runner.cli: $fails check(s) failed"; exit 1; }
echo "runner.cli: every check passed"
