// What the tests of the fake CUDA driver share (test_fake_cuda*.cpp, one part of the driver each):
// the library loaded the way the xmc CUDA backend loads a driver, dlopen by path
// (XMC_FAKE_CUDA_PATH) and dlsym of the versioned names cuda.h maps the plain names to; and the
// fixture: each test starts from xmc_fake_cuda_reset() with the environment it needs, and ends by
// checking that the ledger of live objects is empty.
#pragma once
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fake_cuda_control.h"

namespace fake_cuda_test {


#define STR2(x) #x
#define STR(x) STR2(x)

// Every entry point the tests call; the member names go through cuda.h's
// version macros like the dlsym names (cuMemAlloc -> cuMemAlloc_v2).
#define ENTRIES(X)                                                                                   \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuGetProcAddress)        \
    X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetUuid) X(cuDeviceTotalMem)      \
    X(cuDeviceGetAttribute) X(cuDeviceGetPCIBusId) X(cuDeviceCanAccessPeer)                           \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxCreate) X(cuCtxDestroy)           \
    X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuCtxPushCurrent) X(cuCtxPopCurrent)    \
    X(cuCtxSynchronize) X(cuCtxEnablePeerAccess) X(cuMemAlloc) X(cuMemFree) X(cuMemGetInfo)           \
    X(cuMemHostRegister) X(cuMemHostUnregister) X(cuMemHostGetDevicePointer) X(cuMemHostGetFlags)     \
    X(cuPointerGetAttribute) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)              \
    X(cuStreamQuery) X(cuStreamWaitEvent) X(cuEventCreate) X(cuEventRecord) X(cuEventQuery)           \
    X(cuEventSynchronize) X(cuEventDestroy) X(cuEventElapsedTime) X(cuLaunchHostFunc)                 \
    X(cuMemcpyAsync) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync)                   \
    X(cuMemcpy2DAsync) X(cuMemcpy3DAsync) X(cuMemcpyPeerAsync) X(cuMemsetD8Async) X(cuMemcpyHtoD)     \
    X(cuMemcpyDtoH) X(cuMemsetD8) X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) X(cuMemAddressFree)       \
    X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemGetAccess)     \
    X(cuStreamWaitValue32) X(cuStreamWriteValue32) X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle)         \
    X(cuIpcCloseMemHandle) X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle)          \
    X(cuMemRetainAllocationHandle)

struct Api {
#define MEMBER(name) decltype(&::name) name = nullptr;
    ENTRIES(MEMBER)
#undef MEMBER
    decltype(&xmc_fake_cuda_set_faults) set_faults = nullptr;
    decltype(&xmc_fake_cuda_last_error) last_error = nullptr;
    decltype(&xmc_fake_cuda_ledger) ledger = nullptr;
    decltype(&xmc_fake_cuda_live_objects) live_objects = nullptr;
    decltype(&xmc_fake_cuda_reclaimed_objects) reclaimed_objects = nullptr;
    decltype(&xmc_fake_cuda_call_count) call_count = nullptr;
    decltype(&xmc_fake_cuda_reset) reset = nullptr;
    decltype(&xmc_fake_cuda_call_records) call_records = nullptr;
    decltype(&xmc_fake_cuda_reset_call_records) reset_call_records = nullptr;
    void* handle = nullptr;
};

inline Api& api() {
    static Api a = [] {
        Api x;
        x.handle = dlopen(XMC_FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
        if (x.handle == nullptr) {
            std::fprintf(stderr, "dlopen(%s): %s\n", XMC_FAKE_CUDA_PATH, dlerror());
            std::abort();
        }
#define RESOLVE(name) x.name = reinterpret_cast<decltype(x.name)>(dlsym(x.handle, STR(name)));
        ENTRIES(RESOLVE)
#undef RESOLVE
#define CONTROL(member, sym) x.member = reinterpret_cast<decltype(x.member)>(dlsym(x.handle, #sym));
        CONTROL(set_faults, xmc_fake_cuda_set_faults)
        CONTROL(last_error, xmc_fake_cuda_last_error)
        CONTROL(ledger, xmc_fake_cuda_ledger)
        CONTROL(live_objects, xmc_fake_cuda_live_objects)
        CONTROL(reclaimed_objects, xmc_fake_cuda_reclaimed_objects)
        CONTROL(call_count, xmc_fake_cuda_call_count)
        CONTROL(reset, xmc_fake_cuda_reset)
        CONTROL(call_records, xmc_fake_cuda_call_records)
        CONTROL(reset_call_records, xmc_fake_cuda_reset_call_records)
#undef CONTROL
        return x;
    }();
    return a;
}

inline std::string ledger() {
    std::string s(api().ledger(nullptr, 0) + 1, '\0');
    api().ledger(s.data(), s.size());
    s.resize(s.size() - 1);
    return s;
}

inline std::string last_error() {
    std::string s(api().last_error(nullptr, 0) + 1, '\0');
    api().last_error(s.data(), s.size());
    s.resize(s.size() - 1);
    return s;
}

inline const char* const kEnv[] = {"XMC_FAKE_CUDA_DEVICES", "XMC_FAKE_CUDA_ORDER", "XMC_FAKE_CUDA_MEM_BYTES",
                            "XMC_FAKE_CUDA_ATTRS", "XMC_FAKE_CUDA_FAULTS", "XMC_FAKE_CUDA_TRACE",
                            "XMC_FAKE_CUDA_STREAM_POOL_BYTES"};

inline size_t page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// n fresh pages of host memory.
struct Pages {
    explicit Pages(size_t n, int prot = PROT_READ | PROT_WRITE) : bytes(n * page()) {
        p = static_cast<char*>(mmap(nullptr, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        EXPECT_NE(p, MAP_FAILED);
    }
    ~Pages() { munmap(p, bytes); }
    char* p;
    size_t bytes;
};

class FakeCuda : public ::testing::Test {
protected:
    // Resets the fake under the given environment (NAME=VALUE pairs) and initialises it.
    void start(std::vector<std::pair<const char*, const char*>> env = {}, bool init = true) {
        for (const char* n : kEnv) unsetenv(n);
        for (auto& [n, v] : env) setenv(n, v, 1);
        a.reset();
        for (const char* n : kEnv) unsetenv(n);
        if (init) {
            ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
        }
    }
    void SetUp() override { start(); }
    void TearDown() override {
        if (check_clean_) {
            EXPECT_EQ(a.live_objects(), 0u) << ledger();
            EXPECT_EQ(a.reclaimed_objects(), 0u) << ledger();
        }
        a.set_faults(nullptr);
        a.reset();
    }
    // Retains device d's primary context and makes it current.
    CUcontext retain(int d) {
        CUcontext c = nullptr;
        EXPECT_EQ(a.cuDevicePrimaryCtxRetain(&c, d), CUDA_SUCCESS);
        EXPECT_EQ(a.cuCtxSetCurrent(c), CUDA_SUCCESS);
        return c;
    }
    void release(int d) {
        EXPECT_EQ(a.cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
        EXPECT_EQ(a.cuDevicePrimaryCtxRelease(d), CUDA_SUCCESS);
    }
    Api& a = api();
    bool check_clean_ = true;
};

// A VMM allocation on device dev, and read-write access to it from there.
inline CUmemAllocationProp prop_for(int dev) {
    CUmemAllocationProp p;
    std::memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    return p;
}

inline CUmemAccessDesc rw(int dev) {
    CUmemAccessDesc d;
    std::memset(&d, 0, sizeof d);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = dev;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return d;
}

// Touches addr in a forked child; returns the signal that killed it (0 if none).
inline int touch_in_child(CUdeviceptr addr) {
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);  // a sanitizer's handler would turn the fault into an exit code
        *reinterpret_cast<volatile char*>(addr) = 1;
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

}  // namespace fake_cuda_test
