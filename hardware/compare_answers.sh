#!/usr/bin/env bash
# The driver's own answers other than success, recorded through the interposer
# (XMC_CUDA_INTERPOSE_ANSWERS: "test<TAB>entry<TAB>code" once each) on the real driver and over the
# fake, set side by side (issue 28 item 4: the fake's error paths follow the driver's):
#   compare_answers.sh REAL FAKE [WAIVERS]
# Compared: the tests that ran on both sides (each test's "test<TAB>-<TAB>started" line; a test
# skipped on one side, for a second GPU say, answers nothing there). Left out: CUDA_ERROR_NOT_READY (a query's answer says how far the work
# got, which is timing), and the WAIVERS lines ("test-regex<TAB>entry<TAB>code<TAB>why": a
# difference by design, named; the regex is awk's, matched against the test's name). Prints each answer given on one side only; exit 1 when there is one.
set -uo pipefail
real=${1:?usage: compare_answers.sh REAL FAKE [WAIVERS]} fake=${2:?usage: compare_answers.sh REAL FAKE [WAIVERS]}
waivers=${3:-/dev/null}
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
awk -F'\t' '$3 == "started" { print $1 }' "$real" | sort -u >"$t/real-tests"
awk -F'\t' '$3 == "started" { print $1 }' "$fake" | sort -u >"$t/fake-tests"
comm -12 "$t/real-tests" "$t/fake-tests" >"$t/both"
keep() {  # FILE: its lines of tests on both sides, timing and waivers left out
  awk -F'\t' -v both="$t/both" -v waivers="$waivers" '
    BEGIN { while ((getline l < both) > 0) in_both[l] = 1
            while ((getline l < waivers) > 0) if (l !~ /^#/ && l != "") { split(l, w, "\t"); re[++n] = w[1]; ent[n] = w[2]; code[n] = w[3] } }
    function waived(   i) { for (i = 1; i <= n; i++) if ($1 ~ re[i] && $2 == ent[i] && $3 == code[i]) return 1; return 0 }
    ($1 in in_both) && $3 != "started" && $3 != "CUDA_ERROR_NOT_READY" && !waived()' "$1" | sort -u
}
keep "$real" >"$t/r"; keep "$fake" >"$t/f"
only_real=$(comm -23 "$t/r" "$t/f") only_fake=$(comm -13 "$t/r" "$t/f")
echo "compare_answers.sh: $(wc -l <"$t/both") tests on both sides; $(wc -l <"$t/r") answers from the real driver, $(wc -l <"$t/f") from the fake (timing and waived left out)"
[ -z "$only_real" ] || { echo "the real driver answered, the fake did not:"; echo "$only_real" | sed 's/^/  /'; }
[ -z "$only_fake" ] || { echo "the fake answered, the real driver did not:"; echo "$only_fake" | sed 's/^/  /'; }
[ -z "$only_real$only_fake" ] && echo "compare_answers.sh: the same answers" || exit 1
