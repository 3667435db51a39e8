// xmc_gpu_bench's parts shared by its main (gpu_bench.cpp) and its measuring helpers
// (gpu_bench_measure.cpp): the raw driver it times the peaks with, the timing and pairing of
// runs, a row of the table, the targets it checks.
#pragma once

#include "loader.hpp"

#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace xmc_gpu_bench {

// ---- the raw driver, for the peaks ---------------------------------------
struct Driver {
    void *lib = nullptr;
#define XMC_CU(name, ...) CUresult (*name)(__VA_ARGS__) = nullptr;
    XMC_CU(cuInit, unsigned)
    XMC_CU(cuDeviceGetCount, int *)
    XMC_CU(cuDeviceGet, CUdevice *, int)
    XMC_CU(cuDeviceGetName, char *, int, CUdevice)
    XMC_CU(cuDeviceGetAttribute, int *, CUdevice_attribute, CUdevice)
    XMC_CU(cuDriverGetVersion, int *)
    XMC_CU(cuDevicePrimaryCtxRetain, CUcontext *, CUdevice)
    XMC_CU(cuCtxSetCurrent, CUcontext)
    XMC_CU(cuMemAlloc_v2, CUdeviceptr *, size_t)
    XMC_CU(cuMemFree_v2, CUdeviceptr)
    XMC_CU(cuMemHostAlloc, void **, size_t, unsigned)
    XMC_CU(cuMemFreeHost, void *)
    XMC_CU(cuMemHostRegister_v2, void *, size_t, unsigned)
    XMC_CU(cuMemHostUnregister, void *)
    XMC_CU(cuStreamCreate, CUstream *, unsigned)
    XMC_CU(cuStreamSynchronize, CUstream)
    XMC_CU(cuMemcpyHtoDAsync_v2, CUdeviceptr, const void *, size_t, CUstream)
    XMC_CU(cuMemcpyDtoHAsync_v2, void *, CUdeviceptr, size_t, CUstream)
    XMC_CU(cuMemcpyDtoDAsync_v2, CUdeviceptr, CUdeviceptr, size_t, CUstream)
    XMC_CU(cuMemcpy2DAsync_v2, const CUDA_MEMCPY2D *, CUstream)
    XMC_CU(cuMemcpyPeerAsync, CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream)
    XMC_CU(cuCtxEnablePeerAccess, CUcontext, unsigned)
    XMC_CU(cuLaunchHostFunc, CUstream, CUhostFn, void *)
    XMC_CU(cuMemGetAllocationGranularity, size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags)
    XMC_CU(cuMemAddressReserve, CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long)
    XMC_CU(cuMemAddressFree, CUdeviceptr, size_t)
    XMC_CU(cuMemCreate, CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long)
    XMC_CU(cuMemRelease, CUmemGenericAllocationHandle)
    XMC_CU(cuMemMap, CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long)
    XMC_CU(cuMemUnmap, CUdeviceptr, size_t)
    XMC_CU(cuMemSetAccess, CUdeviceptr, size_t, const CUmemAccessDesc *, size_t)
    XMC_CU(cuEventCreate, CUevent *, unsigned)
    XMC_CU(cuEventRecord, CUevent, CUstream)
    XMC_CU(cuEventSynchronize, CUevent)
    XMC_CU(cuEventDestroy_v2, CUevent)
#undef XMC_CU
    CUresult (*event_elapsed)(float *, CUevent, CUevent) = nullptr;
    bool load(const char *path) {
        lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!lib) return false;
        bool ok = true;
#define XMC_SYM(name) ok &= (*reinterpret_cast<void **>(&name) = dlsym(lib, #name)) != nullptr;
        XMC_SYM(cuInit) XMC_SYM(cuDeviceGetCount) XMC_SYM(cuDeviceGet) XMC_SYM(cuDeviceGetName) XMC_SYM(cuDeviceGetAttribute)
        XMC_SYM(cuDriverGetVersion) XMC_SYM(cuDevicePrimaryCtxRetain) XMC_SYM(cuCtxSetCurrent)
        XMC_SYM(cuMemAlloc_v2) XMC_SYM(cuMemFree_v2)
        XMC_SYM(cuMemHostRegister_v2) XMC_SYM(cuMemHostUnregister) XMC_SYM(cuStreamCreate)
        XMC_SYM(cuStreamSynchronize) XMC_SYM(cuMemcpyHtoDAsync_v2) XMC_SYM(cuMemcpyDtoHAsync_v2)
        XMC_SYM(cuMemcpyDtoDAsync_v2) XMC_SYM(cuMemcpy2DAsync_v2) XMC_SYM(cuMemcpyPeerAsync)
        XMC_SYM(cuCtxEnablePeerAccess) XMC_SYM(cuLaunchHostFunc) XMC_SYM(cuMemGetAllocationGranularity)
        XMC_SYM(cuMemAddressReserve) XMC_SYM(cuMemAddressFree) XMC_SYM(cuMemCreate) XMC_SYM(cuMemRelease)
        XMC_SYM(cuMemMap) XMC_SYM(cuMemUnmap) XMC_SYM(cuMemSetAccess)
        XMC_SYM(cuEventCreate) XMC_SYM(cuEventRecord) XMC_SYM(cuEventSynchronize) XMC_SYM(cuEventDestroy_v2)
#undef XMC_SYM
        // cuda.h renames cuEventElapsedTime to its _v2 from CUDA 12.8; older drivers have only the first.
        *reinterpret_cast<void **>(&event_elapsed) = dlsym(lib, "cuEventElapsedTime_v2");
        if (!event_elapsed) *reinterpret_cast<void **>(&event_elapsed) = dlsym(lib, "cuEventElapsedTime");
        ok &= event_elapsed != nullptr;
        // Optional: a driver without cuMemHostAlloc gets registered memory for the pinned peak.
        *reinterpret_cast<void **>(&cuMemHostAlloc) = dlsym(lib, "cuMemHostAlloc");
        *reinterpret_cast<void **>(&cuMemFreeHost) = dlsym(lib, "cuMemFreeHost");
        return ok;
    }
};

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            std::fprintf(stderr, "xmc_gpu_bench: %s failed: %d (line %d)\n", #call, r_, __LINE__); \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

std::string human(size_t n);
double now_s();
double median_time(int reps, const std::function<void()> &fn);

// The medians of `reps` runs of raw and of x, taken in turns (which goes first alternating,
// after one warm-up of each), for a figure beside a raw peak that is no physical bound but the
// same work done by the driver directly: measured in separate blocks, one block ran while the
// GPU or the host was in another state than the other (the H200 gave a 4 KiB registration
// 0.08 ms against its raw calls' 0.09 ms, and a granule's cycle 0.69 of its raw calls in one
// run, 0.84 in the next).
// Each pair's ratio (raw time over the backend's: 1.0 at the raw figure, higher
// better, for bandwidths and times alike) is kept: the row's ratio is their
// median and their quartiles its spread (SPEC 9; xmc bench judges a row whose
// spread straddles its target as noisy, and a broken measurement on the
// median, not on one pair).
struct PairedMedians {
    double raw, x;
    std::vector<double> ratios;  // per pair: raw time / backend time
};
double median_of(std::vector<double> v);
PairedMedians pairs_of(const std::vector<double> &tr, const std::vector<double> &tx);
PairedMedians paired_measured(int reps, const std::function<double()> &raw, const std::function<double()> &x);
PairedMedians paired_time(int reps, const std::function<void()> &raw, const std::function<void()> &x);
// x beside two raw references, the three taken in turns (the order rotating): the pairs of x
// with each, e.g. a 2-D copy against the raw 2-D copy and against a 1-D copy of the same bytes.
std::pair<PairedMedians, PairedMedians> paired_time2(int reps, const std::function<void()> &raw_a,
                                                     const std::function<void()> &raw_b, const std::function<void()> &x);

struct Row {
    std::string path, unit;
    double figure = 0, peak = 0;
    bool higher_is_better = true;
    std::string requirement;  // the requirement whose target this row checks, if any
    double target = 0;        // the ratio it must reach
    std::vector<double> pairs;  // per-pair ratios, where raw and backend were taken in pairs
    double ratio() const {
        if (!pairs.empty()) return median_of(pairs);
        if (figure <= 0 || peak <= 0) return 0;
        return higher_is_better ? figure / peak : peak / figure;
    }
    // The q-quantile of the per-pair ratios (linear between order statistics).
    double quantile(double q) const {
        std::vector<double> v = pairs;
        std::sort(v.begin(), v.end());
        const double at = q * static_cast<double>(v.size() - 1);
        const size_t lo = static_cast<size_t>(at);
        return lo + 1 < v.size() ? v[lo] + (at - static_cast<double>(lo)) * (v[lo + 1] - v[lo]) : v[lo];
    }
};

// A fresh instance with XMC_CUDA_SLOT_PHASES set runs 30 release + remap +
// reload cycles of an n-byte slot from `src`; at its close the backend writes
// one line per request (reference/cuda/vmm.cpp: kind, slots, bytes, then the
// microseconds after submit when its stream point was seen, a worker picked
// it up, its driver calls were done, its copies enqueued, its copies seen
// done; -1 for a step it has not). The medians, with the remap call's own
// wall time to the return of its wait, measured here.
void print_slot_phases(const xmc_backend *api, size_t n, void *src);

// The targets (SPEC 10) this benchmark checks, each with the transfer sizes
// it names: a row carries its target only at those sizes (a run at 2 MiB, as
// on the fake driver, checks none of the 16 MiB..1 GiB ones) and a miss at
// any of them counts (xmc bench fails it; here --check-targets does).
struct Target {
    const char *key, *requirement;
    double ratio;
    size_t min_bytes, max_bytes;
};
inline constexpr size_t kMiB = size_t{1} << 20;
inline const Target kTargets[] = {
    {"pinned", "PIN-DEVICE", 0.97, 16 * kMiB, 1024 * kMiB},      // H2D/D2H from pin_alloc memory vs cuMemHostAlloc
    {"registered", "REG-SPEED", 0.97, 16 * kMiB, 1024 * kMiB},   // H2D/D2H from registered memory
    {"reload", "VMM-SPEED", 0.95, 16 * kMiB, 1024 * kMiB},       // reload of a remapped slot vs the raw fresh-mapping copy
    {"cycle", "VMM-SPEED", 0.95, 16 * kMiB, 1024 * kMiB},        // release+remap+reload vs the raw calls
    {"granule", "VMM-SPEED", 0.8, 0, SIZE_MAX},                  // one 2 MiB granule's cycle: the same at every transfer size
    {"graph", "VMM-SPEED", 0.95, 16 * kMiB, 1024 * kMiB},        // a graph reading a reloaded slot vs one never released
};

} // namespace xmc_gpu_bench
