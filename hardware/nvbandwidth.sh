#!/usr/bin/env bash
# NVIDIA's nvbandwidth beside xmc's copy peaks (SPEC 10, 0.3: each of xmc's copy peaks within 2%
# of nvbandwidth's, on the same machine in the same call). nvbandwidth is built from its public
# source (https://github.com/NVIDIA/nvbandwidth, v0.8 tested), given as a folder: never checked
# in here. It needs nvcc and Boost program_options (headers and library), and NVML (nvml.h, the
# toolkit's; libnvidia-ml, the driver's).
#
#   hardware/nvbandwidth.sh stage-boost DIR
#       on a machine with Boost (libboost-program-options-dev): copies the headers
#       <boost/program_options.hpp> reaches and libboost_program_options.a into DIR, to carry to a
#       GPU machine without Boost (about 4 MB); the build takes them with BOOST_DIR=DIR
#   hardware/nvbandwidth.sh build SRC OUT_BIN
#       builds nvbandwidth from the source tree SRC with nvcc (no network, no CMake find modules):
#       Boost from BOOST_DIR (a stage-boost folder) or the system; the GPU architecture from
#       NVB_ARCH (default: nvidia-smi's compute capability, else 90 for H100/H200); NVML_DIR, another
#       NVML (include/nvml.h, lib/libnvidia-ml.so) looked in first
#   hardware/nvbandwidth.sh run NVBANDWIDTH XMC_BIN_DIR OUTDIR [SIZES_MIB...]
#       at each size (default 16 64 256 1024 MiB, the sizes of xmc bench's peaks) on device 0:
#       nvbandwidth -j -b SIZE -t host_to_device_memcpy_ce device_to_host_memcpy_ce
#       device_local_copy  -> OUTDIR/nvbandwidth-<bytes>.json, and
#       xmc_gpu_bench --peaks-only --bytes <bytes> -> OUTDIR/xmc-peaks-<bytes>.json, one after the
#       other; then `xmc bench --peaks-vs-nvbandwidth OUTDIR` writes OUTDIR/peaks-vs-nvbandwidth.md
#       (each peak beside nvbandwidth's, the ratio; exit 1 unless every one is within 2%)
# Exit 2 with the reason when something it needs is missing (Boost first of all).
set -uo pipefail
die() { echo "nvbandwidth.sh: $*" >&2; exit 2; }
cmd=${1:-}; shift || true

# BOOST_DIR, where set, is the only place looked in (a staged copy, not whatever the system has).
boost_dirs() { if [ -n "${BOOST_DIR:-}" ]; then echo "$BOOST_DIR"; else echo /usr/include /usr/local/include; fi; }
boost_libdirs() { if [ -n "${BOOST_DIR:-}" ]; then echo "$BOOST_DIR/lib $BOOST_DIR"; else echo /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; fi; }
find_boost() {  # -> BOOST_INC, BOOST_LIB (a library file)
  BOOST_INC= BOOST_LIB=
  for d in $(boost_dirs); do
    [ -f "$d/boost/program_options.hpp" ] && { BOOST_INC=$d; break; }
    [ -f "$d/include/boost/program_options.hpp" ] && { BOOST_INC=$d/include; break; }
  done
  for d in $(boost_libdirs); do
    for f in "$d/libboost_program_options.a" "$d/libboost_program_options.so"; do
      [ -f "$f" ] && { BOOST_LIB=$f; break 2; }
    done
  done
  if [ -z "$BOOST_INC" ] || [ -z "$BOOST_LIB" ]; then
    die "nvbandwidth needs Boost program_options, which is missing here (header boost/program_options.hpp: ${BOOST_INC:-not found}; library libboost_program_options.{a,so}: ${BOOST_LIB:-not found}; looked in $(boost_dirs) $(boost_libdirs)). Install libboost-program-options-dev, or on a machine that has it run 'hardware/nvbandwidth.sh stage-boost DIR', carry DIR and set BOOST_DIR=DIR."
  fi
}

case $cmd in
  stage-boost)
    out=${1:?usage: nvbandwidth.sh stage-boost DIR}
    BOOST_DIR= find_boost
    mkdir -p "$out/include" "$out/lib" || die "cannot create $out"
    out=$(cd "$out" && pwd)  # the copy below runs from Boost's folder: a relative DIR missed there
    tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
    echo '#include <boost/program_options.hpp>' >"$tmp/po.cpp"
    ${CXX:-g++} -std=c++17 -I"$BOOST_INC" -M "$tmp/po.cpp" | tr ' \\' '\n\n' | grep "^$BOOST_INC/boost/" | sort -u >"$tmp/headers" ||
      die "the compiler could not list the headers of boost/program_options.hpp"
    (cd "$BOOST_INC" && sed "s|^$BOOST_INC/||" "$tmp/headers" | xargs cp --parents -t "$out/include") || die "copying the headers failed"
    lib=${BOOST_LIB%.so}; lib=${lib%.a}.a
    [ -f "$lib" ] || die "no static libboost_program_options.a beside $BOOST_LIB: a shared one would need its runtime on the GPU machine too"
    cp "$lib" "$out/lib/" || die "copying $lib failed"
    echo "nvbandwidth.sh: staged $(wc -l <"$tmp/headers") headers and $(basename "$lib") in $out ($(du -sh "$out" | cut -f1)); carry it and build with BOOST_DIR=$out"
    ;;
  build)
    src=${1:?usage: nvbandwidth.sh build SRC OUT_BIN} bin=${2:?usage: nvbandwidth.sh build SRC OUT_BIN}
    [ -f "$src/nvbandwidth.cpp" ] && [ -f "$src/testcases_ce.cpp" ] || die "$src is not nvbandwidth's source tree (no nvbandwidth.cpp, testcases_ce.cpp)"
    nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
    [ -x "$nvcc" ] || die "nvcc not found (PATH, /usr/local/cuda/bin; or set NVCC)"
    cuda=$(cd "$(dirname "$nvcc")/.." && pwd)
    find_boost
    nvml_h=
    # NVML_DIR: another NVML (include/nvml.h, lib/libnvidia-ml.so), looked in first.
    for d in ${NVML_DIR:+$NVML_DIR/include} "$cuda/include" "$cuda"/targets/*/include /usr/include /usr/local/include; do
      [ -f "$d/nvml.h" ] && { nvml_h=$d; break; }
    done
    [ -n "$nvml_h" ] || die "nvml.h not found (the CUDA toolkit's $cuda/include, targets/*/include, /usr/include): nvbandwidth reads the driver version through NVML"
    # Link against the driver's libraries where the toolkit has no stubs (ld takes a full path to a .so.1).
    libs=()
    for l in nvidia-ml cuda; do
      f=
      for d in ${NVML_DIR:+$NVML_DIR/lib} "$cuda/lib64/stubs" "$cuda"/targets/*/lib/stubs /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
        for c in "$d/lib$l.so" "$d/lib$l.so.1"; do [ -f "$c" ] && { f=$c; break 2; }; done
      done
      [ -n "$f" ] || die "lib$l.so not found (the toolkit's stubs or the driver's lib$l.so.1)"
      libs+=("$f")
    done
    arch=${NVB_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')}
    arch=${arch:-90}
    mkdir -p "$(dirname "$bin")"
    version=$( { [ -e "$src/.git" ] && git -C "$src" describe --always --tags 2>/dev/null; } || sed -n 's/.*NVBANDWIDTH_VERSION "\(.*\)".*/\1/p' "$src/version.h" 2>/dev/null | head -1)
    echo "nvbandwidth.sh: building $src (${version:-unknown version}) for sm_$arch with $nvcc, Boost $BOOST_INC + $BOOST_LIB"
    (cd "$src" && "$nvcc" -O3 -std=c++17 -arch="sm_$arch" -DGIT_VERSION="\"${version:-unknown}\"" -I. -isystem "$BOOST_INC" -I"$nvml_h" \
        testcase.cpp testcases_ce.cpp testcases_sm.cpp kernels.cu memcpy.cpp nvbandwidth.cpp multinode_memcpy.cpp \
        multinode_testcases.cpp output.cpp json_output.cpp json/jsoncpp.cpp "$BOOST_LIB" "${libs[@]}" -o "$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")") ||
      die "the build of nvbandwidth failed (above)"
    echo "nvbandwidth.sh: built $bin"
    ;;
  run)
    nvb=${1:?usage: nvbandwidth.sh run NVBANDWIDTH XMC_BIN_DIR OUTDIR [SIZES_MIB...]} bindir=${2:?} out=${3:?}
    shift 3
    sizes=${*:-16 64 256 1024}
    [ -x "$nvb" ] || die "$nvb is not an executable nvbandwidth (build it: nvbandwidth.sh build SRC BIN)"
    for b in xmc_gpu_bench xmc; do [ -x "$bindir/$b" ] || die "$bindir/$b is missing (cmake --build --preset gpu-bench)"; done
    mkdir -p "$out"
    export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}  # device 0 for both, as the xmc peaks
    for mib in $sizes; do
      bytes=$((mib << 20))
      "$nvb" -j -b "$mib" -t host_to_device_memcpy_ce device_to_host_memcpy_ce device_local_copy \
        >"$out/nvbandwidth-$bytes.json" 2>"$out/nvbandwidth-$bytes.err" ||
        echo "nvbandwidth.sh: nvbandwidth at $mib MiB exited $? (see $out/nvbandwidth-$bytes.err)"
      "$bindir/xmc_gpu_bench" --peaks-only --bytes "$bytes" --reg-max 4096 --json "$out/xmc-peaks-$bytes.json" | tee "$out/xmc-peaks-$bytes.log" ||
        echo "nvbandwidth.sh: xmc_gpu_bench --peaks-only at $mib MiB exited $?"
    done
    "$bindir/xmc" bench --peaks-vs-nvbandwidth "$out" | tee "$out/peaks-vs-nvbandwidth.md"
    exit "${PIPESTATUS[0]}"
    ;;
  *)
    sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
    exit 2 ;;
esac
