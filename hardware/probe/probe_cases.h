// The probe's driver access and its fixed list of cases (probe_cases.cpp);
// the runner (cuda_probe.cpp) runs each case in a child process.
#ifndef XMC_PROBE_CASES_H
#define XMC_PROBE_CASES_H

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace xmc::probe {

#define XMC_PROBE_STR2(x) #x
#define XMC_PROBE_SYM(x) XMC_PROBE_STR2(x)

// Every entry point the probe calls. X(name) where `name` is the cuda.h name;
// the member and the dlsym name both go through cuda.h's version macros.
// XMC_PROBE_ENTRIES must all be found (the fake exports every one);
// XMC_PROBE_OPTIONAL may be missing (the fake does not export them yet): a
// case that needs one says NEED(name) and records `missing_entry` without it.
#define XMC_PROBE_ENTRIES(X)                                                          \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuDeviceGetCount) X(cuDeviceGet) \
    X(cuDeviceGetName) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)          \
    X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxPopCurrent) X(cuMemAlloc) X(cuMemFree)  \
    X(cuMemGetInfo) X(cuMemHostRegister) X(cuMemHostUnregister)                          \
    X(cuMemHostGetDevicePointer) X(cuMemHostGetFlags) X(cuPointerGetAttribute)           \
    X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery)         \
    X(cuStreamWaitEvent) X(cuEventCreate) X(cuEventRecord) X(cuEventQuery)               \
    X(cuEventSynchronize) X(cuEventDestroy) X(cuEventElapsedTime) X(cuLaunchHostFunc)    \
    X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpy2DAsync) X(cuMemsetD8Async)      \
    X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) X(cuMemAddressFree)          \
    X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemGetAccess)   \
    X(cuMemcpyDtoDAsync) X(cuCtxPushCurrent)                                             \
    X(cuDeviceGetUuid) X(cuDeviceTotalMem) X(cuMemcpyAsync) X(cuMemcpy3DAsync)           \
    X(cuMemcpyPeerAsync) X(cuMemcpy3DPeerAsync) X(cuDeviceCanAccessPeer)                 \
    X(cuCtxEnablePeerAccess) X(cuCtxDisablePeerAccess) X(cuStreamWaitValue32)            \
    X(cuMemcpyHtoD) X(cuMemcpyDtoH)
#define XMC_PROBE_OPTIONAL(X)                                                           \
    X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuStreamIsCapturing)                 \
    X(cuStreamGetCaptureInfo) X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphExecDestroy) \
    X(cuGraphDestroy) X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle) X(cuIpcCloseMemHandle)  \
    X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle)                  \
    X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemAllocHost)

struct Driver {
#define XMC_PROBE_MEMBER(name) decltype(&::name) name = nullptr;
    XMC_PROBE_ENTRIES(XMC_PROBE_MEMBER)
    XMC_PROBE_OPTIONAL(XMC_PROBE_MEMBER)
#undef XMC_PROBE_MEMBER
    // Present only in the fake driver: its ledger of live objects.
    size_t (*fake_live_objects)() = nullptr;
    size_t (*fake_ledger)(char*, size_t) = nullptr;
    size_t (*fake_reclaimed_objects)() = nullptr;
};

// Loads the library and resolves every entry point (the optional ones where
// present); false with a message.
bool load_driver(const std::string& path, Driver& d, std::string& error);

struct Outcome {
    std::string result;
    int64_t code = 0;
    std::string note;
};

// The case's context: the driver, the devices and their primary contexts.
struct P {
    Driver d;
    int device_count = 0;
    CUdevice dev[2] = {0, 0};
    CUcontext ctx[2] = {nullptr, nullptr};
    size_t gran = 0;  // VMM minimum granularity of device 0 (0 if unknown)
};

// The CUresult's name as the driver gives it (CUresult_<n> if it cannot).
std::string result_name(const Driver& d, CUresult r);
// An outcome that is a word (value word or verdict) and a code.
Outcome word(const char* w, int64_t code, std::string note = {});

// Thrown (and caught by the runner) when a call before the one under test
// fails: the case is then recorded as SETUP_FAILED with that code.
struct SetupFailed {
    CUresult r;
    std::string call;
};

// Thrown by NEED (probe_support.h) when the driver lacks an optional entry
// point the case calls: the case is then recorded as missing_entry.
struct MissingEntry {
    const char* name;
};

// Runs a set-up call; throws SetupFailed if it does not succeed.
#define TRY(call)                                                     \
    do {                                                              \
        CUresult r_ = (call);                                         \
        if (r_ != CUDA_SUCCESS) throw ::xmc::probe::SetupFailed{r_, #call}; \
    } while (0)

// What a case needs before it runs.
enum class Setup {
    none,  // no cuInit at all
    init,  // cuInit only
    ctx,   // cuInit, device 0's primary context retained and current
    ctx2,  // as ctx, and device 1's primary context retained (needs 2 devices)
};

struct Case {
    const char* name;
    Setup setup;
    Outcome (*fn)(P&);
    const char* what;
    // A result the fake may give instead of the recorded one, by design: the
    // fake refuses every call from a host callback (the real driver lets a
    // few through), and it refuses cleanly what crashes the real driver.
    const char* fake_may_answer;
    // Runs with no other case in flight (cuda_probe.cpp --jobs): its answer
    // depends on timing or on the device's free memory, it faults the GPU,
    // or it forks a peer process.
    bool alone = false;
};

// The fixed list of cases, in recording order: the cases of the first two
// recordings (probe_recorded_<area>.cpp, listed in probe_cases.cpp),
// then each area's (probe_cases_<area>.cpp), in the order cases() appends
// them. Each case is written once, beside its code.
const std::vector<Case>& cases();
std::vector<Case> core_cases();     // devices, contexts, peers, error names, wait value
std::vector<Case> memory_cases();   // registration, device memory, per-call limits
std::vector<Case> stream_cases();   // streams, events, host functions
std::vector<Case> copy_cases();     // 1-D / 2-D / 3-D copies
std::vector<Case> vmm_cases();      // reservations, handles, mappings, access
std::vector<Case> capture_cases();  // stream capture and graphs
std::vector<Case> ipc_cases();      // IPC handles and shareable handles
std::vector<Case> fidelity_cases(); // legacy-stream capture queries, one-slice 3-D copies, host allocations

// A result a case of the fake may give instead of the recorded one.
inline constexpr const char* kNotPermitted = "CUDA_ERROR_NOT_PERMITTED";
inline constexpr const char* kRefusedNotCrashed = "CUDA_ERROR_INVALID_VALUE";
inline constexpr const char* kBadHandleNotCrashed = "CUDA_ERROR_INVALID_HANDLE";

}  // namespace xmc::probe

#endif
