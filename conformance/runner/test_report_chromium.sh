#!/usr/bin/env bash
# report.chromium: a package's report.html loads in headless Chromium without
# console errors (a missing plot would be one), its DOM shows the summary line
# and the requirement table, every plot parses as SVG, and a screenshot is saved.
#   test_report_chromium.sh PACKAGE SCREENSHOT.png
# Exit 77 (a skip, with the reason) where chromium is not installed.
set -euo pipefail
pkg=$(realpath "$1") png=$2
chrome=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chrome" ]; then
  echo "skipped: chromium is not installed (apt-get install -y chromium; ci/install-deps installs it)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --enable-logging=stderr --v=0)
# Each run gets its own profile folder.
chromium_run() { timeout 120 "$chrome" "${flags[@]}" --user-data-dir="$(mktemp -d -p "$work")" "$@"; }

summary=$(head -n1 "$pkg/summary.txt")
fails=0
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fails=$((fails + 1)); fi
}

chromium_run --dump-dom "file://$pkg/report.html" >"$work/dom.html" 2>"$work/chromium.log" || {
  echo "FAIL: chromium exited $? on report.html:"; tail -n 20 "$work/chromium.log"; exit 1; }
check "the page shows the summary line '$summary'" grep -qF "<p id=\"summary\"><code>$summary</code></p>" "$work/dom.html"
check "the page shows the must-pass verdict" grep -q 'id="verdict"' "$work/dom.html"
for p in PIN REG VMM COPY AFF; do
  check "the requirement table has the $p group" grep -q "<h3>$p: " "$work/dom.html"
done
# Console messages (script errors, resources that failed to load) are errors here.
if grep -E 'CONSOLE|Failed to load resource|Uncaught|ERR_FILE_NOT_FOUND' "$work/chromium.log" >"$work/console.txt"; then
  echo "FAIL: the page logged errors in the console:"; cat "$work/console.txt"; fails=$((fails + 1))
else
  echo "ok: no console errors"
fi
# Every plot the page shows loads (a missing image is not a console error, so
# each is loaded by itself) and is an SVG document that parses (a malformed
# one renders as a <parsererror>).
plots=$(grep -o 'src="plots/[^"]*\.svg"' "$work/dom.html" | sed 's/^src="//; s/"$//' || true)
[ -n "$plots" ] || { echo "FAIL: the page shows no plot (the package was made with --bench)"; fails=$((fails + 1)); }
for plot in $plots; do
  chromium_run --dump-dom "file://$pkg/$plot" >"$work/plot.xml" 2>/dev/null || true
  check "$plot loads and parses as SVG" sh -c "grep -q '<svg' '$work/plot.xml' && ! grep -q 'parsererror' '$work/plot.xml'"
done
# A screenshot, for people.
rm -f "$png"
chromium_run --screenshot="$png" --window-size=1280,2600 --hide-scrollbars "file://$pkg/report.html" \
  >/dev/null 2>"$work/shot.log" || true
check "the screenshot $png was written" sh -c "[ -s '$png' ] && head -c 8 '$png' | grep -q PNG"

if [ "$fails" -ne 0 ]; then echo "report.chromium: $fails check(s) failed"; exit 1; fi
echo "report.chromium: the report renders; screenshot $png"
