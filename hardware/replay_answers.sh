#!/usr/bin/env bash
# Replays a recording of the real driver's own answers (XMC_CUDA_INTERPOSE_ANSWERS through the
# interposer on a GPU, hardware/results/*/answers.tsv) against the fake: the tests in which the
# real driver answered something other than success and NOT_READY run again through the
# interposer over the fake CUDA driver, with as many devices as the recording's machine had
# (DEVICES, default 1), and hardware/compare_answers.sh sets the two records side by side.
#   replay_answers.sh RECORDING XMC INTERPOSER FAKE [WAIVERS]
set -uo pipefail
rec=${1:?usage: replay_answers.sh RECORDING XMC INTERPOSER FAKE [WAIVERS]} xmc=${2:?} ip=${3:?} fake=${4:?}
waivers=${5:-/dev/null}
tests=$(awk -F'\t' '$3 != "started" && $3 != "CUDA_ERROR_NOT_READY" { print $1 }' "$rec" | sort -u | paste -sd: -)
[ -n "$tests" ] || { echo "replay_answers.sh: $rec holds no answer to replay"; exit 1; }
out=$(mktemp) && trap 'rm -f "$out"' EXIT
XMC_FAKE_CUDA_DEVICES=${DEVICES:-1} XMC_CUDA_DRIVER=$ip XMC_CUDA_INTERPOSE_REAL=$fake XMC_CUDA_INTERPOSE_ANSWERS=$out \
  "$xmc" run --backend cuda --gtest_filter="$tests" --gtest_brief=1 || { echo "replay_answers.sh: the replayed tests failed over the fake"; exit 1; }
"$(dirname "$0")/compare_answers.sh" "$rec" "$out" "$waivers"
