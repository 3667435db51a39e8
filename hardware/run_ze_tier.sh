#!/usr/bin/env bash
# The Level Zero backend on a real driver (label xpu): qualification through
# the system's loader with no fake. Where the loader finds no driver or no
# device (every machine here: there is no Intel GPU), it exits 77 (ctest:
# skipped) and says why.
#   run_ze_tier.sh <xmc> <out dir>
set -uo pipefail
xmc=$1 out=$2
unset ZE_ENABLE_ALT_DRIVERS
# Slots (VMM-*) read the device's free memory through Sysman, which a real
# driver answers only when this is set before zeInit.
export ZES_ENABLE_SYSMAN=1
n=$("$xmc" list-devices --backend level_zero 2>/dev/null | sed -n 's/.*reports \([0-9]*\) device.*/\1/p')
if [ "${n:-0}" -eq 0 ]; then
  echo "xpu level_zero: skipped: the Level Zero loader finds no driver or no device on this machine"
  exit 77
fi
"$xmc" qualify --backend level_zero --out "$out"
