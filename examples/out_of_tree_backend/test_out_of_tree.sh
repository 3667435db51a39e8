#!/usr/bin/env bash
# Installs xmc from the build tree into a temporary prefix, builds the example
# backend out of tree with find_package(xmc), and qualifies it on pinning.
# Usage: test_out_of_tree.sh <xmc build dir> <example source dir> <work dir> [summary]
set -euo pipefail
build=$1 src=$2 work=$3 summary=${4:-passed:11 failed:0 unsupported:3}
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/prefix/bin/xmc" qualify --backend "$work/build/libxmc_backend_example.so" --out "$work/results" --filter 'PIN-*'
grep -q "$summary" "$work/results/summary.txt" ||
  { echo "test_out_of_tree: expected '$summary' in summary.txt:"; cat "$work/results/summary.txt"; exit 1; }
