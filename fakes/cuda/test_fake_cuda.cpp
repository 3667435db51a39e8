// Tests of the fake CUDA driver. The library is loaded the way the xmc CUDA
// backend loads a driver: dlopen by path (XMC_FAKE_CUDA_PATH) and dlsym of the
// versioned names cuda.h maps the plain names to. Each test starts from
// xmc_fake_cuda_reset() with the environment it needs, and ends by checking
// that the ledger of live objects is empty.
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

namespace {

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

Api& api() {
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

std::string ledger() {
    std::string s(api().ledger(nullptr, 0) + 1, '\0');
    api().ledger(s.data(), s.size());
    s.resize(s.size() - 1);
    return s;
}

std::string last_error() {
    std::string s(api().last_error(nullptr, 0) + 1, '\0');
    api().last_error(s.data(), s.size());
    s.resize(s.size() - 1);
    return s;
}

const char* const kEnv[] = {"XMC_FAKE_CUDA_DEVICES", "XMC_FAKE_CUDA_ORDER", "XMC_FAKE_CUDA_MEM_BYTES",
                            "XMC_FAKE_CUDA_ATTRS", "XMC_FAKE_CUDA_FAULTS", "XMC_FAKE_CUDA_TRACE",
                            "XMC_FAKE_CUDA_STREAM_POOL_BYTES"};

size_t page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

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

// ---- loading and exports -------------------------------------------------------------------

TEST_F(FakeCuda, ExportsTheVersionedNamesOfCudaH) {
#define CHECK_EXPORT(name) EXPECT_NE(a.name, nullptr) << "missing export " << STR(name);
    ENTRIES(CHECK_EXPORT)
#undef CHECK_EXPORT
    // and the older versions the real libcuda exports next to them
    for (const char* legacy : {"cuDeviceGetUuid", "cuEventElapsedTime", "cuCtxCreate_v2"})
        EXPECT_NE(dlsym(a.handle, legacy), nullptr) << legacy;
    EXPECT_EQ(std::string(STR(cuMemHostRegister)), "cuMemHostRegister_v2");
    EXPECT_EQ(std::string(STR(cuMemcpy3DAsync)), "cuMemcpy3DAsync_v2");
}

TEST_F(FakeCuda, GetProcAddressGivesTheNewestVersion) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    ASSERT_EQ(a.cuGetProcAddress("cuMemAlloc", &fn, 13000, 0, &st), CUDA_SUCCESS);
    EXPECT_EQ(fn, reinterpret_cast<void*>(a.cuMemAlloc));
    EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SUCCESS);
    ASSERT_EQ(a.cuGetProcAddress("cuDeviceGetUuid", &fn, 13000, 0, &st), CUDA_SUCCESS);
    EXPECT_EQ(fn, dlsym(a.handle, "cuDeviceGetUuid_v2"));
    ASSERT_EQ(a.cuGetProcAddress("cuDeviceGetUuid", &fn, 11000, 0, &st), CUDA_SUCCESS);
    EXPECT_EQ(fn, dlsym(a.handle, "cuDeviceGetUuid"));
    EXPECT_EQ(a.cuGetProcAddress("cuNoSuchThing", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    EXPECT_EQ(fn, nullptr);
    EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

TEST_F(FakeCuda, CallsBeforeInitAreRefused) {
    start({}, false);
    int n = -1, v = 0;
    EXPECT_EQ(a.cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(a.cuDriverGetVersion(&v), CUDA_SUCCESS);
    EXPECT_EQ(v, 13000);
    const char* name = nullptr;
    EXPECT_EQ(a.cuGetErrorName(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, &name), CUDA_SUCCESS);
    EXPECT_STREQ(name, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED");
    EXPECT_EQ(a.cuGetErrorName(static_cast<CUresult>(12345), &name), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeCuda, NoDevicesMeansNoDevice) {
    start({{"XMC_FAKE_CUDA_DEVICES", "0"}}, false);
    EXPECT_EQ(a.cuInit(0), CUDA_ERROR_NO_DEVICE);
}

TEST_F(FakeCuda, AChildForkedAfterInitIsRefusedAndExitsCleanly) {
    retain(0);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);  // a worker thread exists in the parent
    pid_t pid = fork();
    if (pid == 0) {
        int n = 0;
        std::exit(a.cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED ? 0 : 1);  // runs the unload path
    }
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    release(0);
}

// ---- devices ---------------------------------------------------------------------------------

std::string uuid_of(Api& a, int ordinal) {
    CUuuid u{};
    EXPECT_EQ(a.cuDeviceGetUuid(&u, ordinal), CUDA_SUCCESS);
    return std::string(u.bytes, 16);
}

TEST_F(FakeCuda, UuidsAreDistinctAndFollowThePhysicalDeviceWhenPermuted) {
    start({{"XMC_FAKE_CUDA_DEVICES", "3"}});
    int n = 0;
    ASSERT_EQ(a.cuDeviceGetCount(&n), CUDA_SUCCESS);
    ASSERT_EQ(n, 3);
    std::vector<std::string> plain;
    std::vector<int> bus;
    for (int i = 0; i < 3; ++i) {
        plain.push_back(uuid_of(a, i));
        int b = 0;
        ASSERT_EQ(a.cuDeviceGetAttribute(&b, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, i), CUDA_SUCCESS);
        bus.push_back(b);
    }
    EXPECT_EQ(std::set<std::string>(plain.begin(), plain.end()).size(), 3u);

    start({{"XMC_FAKE_CUDA_DEVICES", "3"}, {"XMC_FAKE_CUDA_ORDER", "2,0,1"}});
    const int phys[3] = {2, 0, 1};
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(uuid_of(a, i), plain[static_cast<size_t>(phys[i])]) << "ordinal " << i;
        char name[128] = {};
        ASSERT_EQ(a.cuDeviceGetName(name, sizeof name, i), CUDA_SUCCESS);
        EXPECT_NE(std::string(name).find("physical " + std::to_string(phys[i])), std::string::npos) << name;
        int b = 0;
        ASSERT_EQ(a.cuDeviceGetAttribute(&b, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, i), CUDA_SUCCESS);
        EXPECT_EQ(b, bus[static_cast<size_t>(phys[i])]);
    }
    CUdevice d = 0;
    EXPECT_EQ(a.cuDeviceGet(&d, 3), CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(FakeCuda, AttributesAndOverrides) {
    int v = 0;
    ASSERT_EQ(a.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0), CUDA_SUCCESS);
    EXPECT_EQ(v, 1);
    ASSERT_EQ(a.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1), CUDA_SUCCESS);
    EXPECT_EQ(v, 1);
    start({{"XMC_FAKE_CUDA_ATTRS", "p1:host_register_supported=0"}});
    ASSERT_EQ(a.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 0), CUDA_SUCCESS);
    EXPECT_EQ(v, 1);
    ASSERT_EQ(a.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 1), CUDA_SUCCESS);
    EXPECT_EQ(v, 0);
    Pages buf(1);
    retain(1);
    EXPECT_EQ(a.cuMemHostRegister(buf.p, buf.bytes, 0), CUDA_ERROR_NOT_SUPPORTED);
    release(1);
}

// ---- contexts ----------------------------------------------------------------------------------

TEST_F(FakeCuda, ContextStackAndPrimaryRetainCounting) {
    CUcontext c0 = nullptr, c1 = nullptr, got = nullptr;
    ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&c0, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&c1, 1), CUDA_SUCCESS);
    EXPECT_NE(c0, c1);
    EXPECT_EQ(a.cuCtxPopCurrent(&got), CUDA_ERROR_INVALID_CONTEXT);
    ASSERT_EQ(a.cuCtxPushCurrent(c0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuCtxPushCurrent(c1), CUDA_SUCCESS);
    CUdevice d = -1;
    ASSERT_EQ(a.cuCtxGetDevice(&d), CUDA_SUCCESS);
    EXPECT_EQ(d, 1);
    ASSERT_EQ(a.cuCtxPopCurrent(&got), CUDA_SUCCESS);
    EXPECT_EQ(got, c1);
    ASSERT_EQ(a.cuCtxGetCurrent(&got), CUDA_SUCCESS);
    EXPECT_EQ(got, c0);
    ASSERT_EQ(a.cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
    ASSERT_EQ(a.cuCtxGetCurrent(&got), CUDA_SUCCESS);
    EXPECT_EQ(got, nullptr);
    EXPECT_EQ(a.live_objects(), 2u);  // one retain each
    EXPECT_EQ(a.cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(a.cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);
    // the primary context's handle is stable across retain cycles
    ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&got, 0), CUDA_SUCCESS);
    EXPECT_EQ(got, c0);
    EXPECT_EQ(a.cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

TEST_F(FakeCuda, AReleasedPrimaryContextIsPushedAndItsCallsAnswerDestroyed) {
    // recorded: ctx_push_null, ctx_push_released_primary, ctx_released_primary_mem_alloc
    EXPECT_EQ(a.cuCtxPushCurrent(nullptr), CUDA_ERROR_INVALID_VALUE);
    CUcontext c0 = nullptr, got = nullptr;
    ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&c0, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuCtxPushCurrent(c0), CUDA_SUCCESS);
    CUdeviceptr p = 0;
    EXPECT_EQ(a.cuMemAlloc(&p, 1 << 20), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    CUstream s = nullptr;
    EXPECT_EQ(a.cuStreamCreate(&s, 0), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    // retained again, the same handle (still current) works again
    ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&got, 0), CUDA_SUCCESS);
    EXPECT_EQ(got, c0);
    ASSERT_EQ(a.cuMemAlloc(&p, 1 << 20), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(p), CUDA_SUCCESS);
    ASSERT_EQ(a.cuCtxPopCurrent(&got), CUDA_SUCCESS);
    EXPECT_EQ(got, c0);
    EXPECT_EQ(a.cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

TEST_F(FakeCuda, PeerAccessOfNullOrOfItselfIsRefusedAsRecorded) {
    CUcontext c0 = retain(0);
    CUcontext c1 = nullptr;
    ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&c1, 1), CUDA_SUCCESS);
    EXPECT_EQ(a.cuCtxEnablePeerAccess(nullptr, 0), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(a.cuCtxEnablePeerAccess(c0, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    EXPECT_EQ(a.cuCtxEnablePeerAccess(c1, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    EXPECT_EQ(a.cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);
    release(0);
}

TEST_F(FakeCuda, ContextDestructionReclaimsAndCountsLeftovers) {
    check_clean_ = false;
    retain(0);
    CUdeviceptr p = 0;
    ASSERT_EQ(a.cuMemAlloc(&p, 4096), CUDA_SUCCESS);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.live_objects(), 3u) << ledger();
    release(0);  // the last retain: the context is reset, like the real driver does
    EXPECT_EQ(a.live_objects(), 0u) << ledger();
    EXPECT_EQ(a.reclaimed_objects(), 2u);
    EXPECT_NE(ledger().find("freed implicitly"), std::string::npos);
    EXPECT_EQ(a.cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
}

// ---- device memory -------------------------------------------------------------------------------

TEST_F(FakeCuda, DeviceMemoryIsHostMemoryCountedPerDevice) {
    start({{"XMC_FAKE_CUDA_MEM_BYTES", "64M"}});
    retain(0);
    size_t fr = 0, total = 0;
    ASSERT_EQ(a.cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    EXPECT_EQ(total, 64u << 20);
    EXPECT_EQ(fr, total);
    CUdeviceptr p = 0;
    ASSERT_EQ(a.cuMemAlloc(&p, 8u << 20), CUDA_SUCCESS);
    std::memset(reinterpret_cast<void*>(p), 7, 8u << 20);  // a real host address
    ASSERT_EQ(a.cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    EXPECT_EQ(fr, (64u - 8u) << 20);
    CUdeviceptr q = 0;
    EXPECT_EQ(a.cuMemAlloc(&q, 60u << 20), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(a.cuMemAlloc(&q, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemFree(p + 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemFree(p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemFree(0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    EXPECT_EQ(fr, total);
    release(0);
}

// A context keeps stream-pool bytes for good at each new high of its live streams (as the H200
// driver does); off by default, so a stream costs no device memory.
TEST_F(FakeCuda, StreamPoolBytesAreKeptAtEachNewHighOfLiveStreams) {
    for (const char* pool : {"", "2M"}) {
        start({{"XMC_FAKE_CUDA_MEM_BYTES", "64M"}, {"XMC_FAKE_CUDA_STREAM_POOL_BYTES", pool}});
        const size_t kept = *pool ? 2u << 20 : 0;
        retain(0);
        size_t fr = 0, total = 0;
        auto used = [&] {
            EXPECT_EQ(a.cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
            return total - fr;
        };
        CUstream s1 = nullptr, s2 = nullptr, s3 = nullptr;
        ASSERT_EQ(a.cuStreamCreate(&s1, 0), CUDA_SUCCESS);
        EXPECT_EQ(used(), kept) << "pool '" << pool << "': the first stream";
        ASSERT_EQ(a.cuStreamCreate(&s2, 0), CUDA_SUCCESS);
        EXPECT_EQ(used(), 2 * kept) << "pool '" << pool << "': a second live stream is a new high";
        ASSERT_EQ(a.cuStreamDestroy(s2), CUDA_SUCCESS);
        ASSERT_EQ(a.cuStreamCreate(&s3, 0), CUDA_SUCCESS);
        EXPECT_EQ(used(), 2 * kept) << "pool '" << pool << "': two live streams again is no new high";
        ASSERT_EQ(a.cuStreamDestroy(s1), CUDA_SUCCESS);
        ASSERT_EQ(a.cuStreamDestroy(s3), CUDA_SUCCESS);
        EXPECT_EQ(used(), 2 * kept) << "pool '" << pool << "': the pool stays after its streams go";
        release(0);
    }
    testing::internal::CaptureStderr();
    start({{"XMC_FAKE_CUDA_STREAM_POOL_BYTES", "lots"}}, false);
    const std::string said = testing::internal::GetCapturedStderr();
    EXPECT_EQ(a.cuInit(0), CUDA_ERROR_INVALID_VALUE) << "a malformed pool size is refused at cuInit";
    EXPECT_NE(said.find("XMC_FAKE_CUDA_STREAM_POOL_BYTES='lots'"), std::string::npos) << said;
}

// ---- registration ----------------------------------------------------------------------------------

TEST_F(FakeCuda, RegistrationCodesFollowTheRealDriver) {
    CUcontext ctx = retain(0);
    Pages buf(16);
    char* b = buf.p;
    size_t ps = page();
    ASSERT_EQ(a.cuMemHostRegister(b, 8 * ps, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostRegister(b, 8 * ps, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    EXPECT_EQ(a.cuMemHostRegister(b + 4 * ps, 8 * ps, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    EXPECT_EQ(a.cuMemHostRegister(b + ps, ps, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    EXPECT_EQ(a.cuMemHostRegister(b, 0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemHostRegister(nullptr, ps, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemHostRegister(b + 8 * ps, ps, 0x80), CUDA_ERROR_INVALID_VALUE);

    unsigned flags = 0;
    ASSERT_EQ(a.cuMemHostGetFlags(&flags, b + 100), CUDA_SUCCESS);
    EXPECT_EQ(flags, static_cast<unsigned>(CU_MEMHOSTREGISTER_DEVICEMAP));
    EXPECT_EQ(a.cuMemHostGetFlags(&flags, b + 9 * ps), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr dp = 0;
    ASSERT_EQ(a.cuMemHostGetDevicePointer(&dp, b + 100, 0), CUDA_SUCCESS);
    EXPECT_EQ(dp, reinterpret_cast<CUdeviceptr>(b + 100));  // identity
    EXPECT_EQ(a.cuMemHostGetDevicePointer(&dp, b, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemHostGetDevicePointer(&dp, b + 9 * ps, 0), CUDA_ERROR_INVALID_VALUE);
    unsigned type = 0;
    ASSERT_EQ(a.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(b)),
              CUDA_SUCCESS);
    EXPECT_EQ(type, static_cast<unsigned>(CU_MEMORYTYPE_HOST));
    EXPECT_EQ(a.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                      reinterpret_cast<CUdeviceptr>(b + 9 * ps)),
              CUDA_ERROR_INVALID_VALUE);

    // unregister: interior -> invalid value, nothing changes; never registered -> not registered
    EXPECT_EQ(a.cuMemHostUnregister(b + ps), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemHostUnregister(b + 9 * ps), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    EXPECT_EQ(a.cuMemHostUnregister(nullptr), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.live_objects(), 2u) << ledger();  // context + registration
    // works with no current context too
    ASSERT_EQ(a.cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostUnregister(b), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostUnregister(b), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    ASSERT_EQ(a.cuCtxSetCurrent(ctx), CUDA_SUCCESS);

    // exact byte ranges: two unaligned ranges in one page are both fine
    ASSERT_EQ(a.cuMemHostRegister(b + 8, 100, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemHostRegister(b + 512, 100, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemHostGetFlags(&flags, b + 512), CUDA_SUCCESS);
    EXPECT_EQ(flags, static_cast<unsigned>(CU_MEMHOSTREGISTER_DEVICEMAP));  // recorded: flags 0 reads 2
    EXPECT_EQ(a.cuMemHostUnregister(b), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    EXPECT_EQ(a.cuMemHostUnregister(b + 8), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostUnregister(b + 512), CUDA_SUCCESS);

    // memory the driver cannot pin, and device memory
    Pages ro(2, PROT_READ);
    EXPECT_EQ(a.cuMemHostRegister(ro.p, ro.bytes, 0), CUDA_ERROR_INVALID_VALUE);
    void* gone = mmap(nullptr, 4 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(gone, 4 * ps);
    EXPECT_EQ(a.cuMemHostRegister(gone, 4 * ps, 0), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr d = 0;
    ASSERT_EQ(a.cuMemAlloc(&d, 1 << 16), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostRegister(reinterpret_cast<void*>(d), 1 << 16, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemFree(d), CUDA_SUCCESS);
    a.cuCtxSetCurrent(nullptr);
    EXPECT_EQ(a.cuMemHostRegister(b, ps, 0), CUDA_ERROR_INVALID_CONTEXT);  // needs a context
    release(0);
}

TEST_F(FakeCuda, RegistrationBelongsToTheRegisteringDevicesContext) {
    CUcontext c0 = retain(0);
    CUcontext c1 = nullptr;
    ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&c1, 1), CUDA_SUCCESS);
    Pages buf(4);
    ASSERT_EQ(a.cuCtxSetCurrent(c1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemHostRegister(buf.p, buf.bytes, 0), CUDA_SUCCESS);
    int ordinal = -1;
    ASSERT_EQ(a.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                      reinterpret_cast<CUdeviceptr>(buf.p + 10)),
              CUDA_SUCCESS);
    EXPECT_EQ(ordinal, 1);
    CUcontext owner = nullptr;
    ASSERT_EQ(a.cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, reinterpret_cast<CUdeviceptr>(buf.p)),
              CUDA_SUCCESS);
    EXPECT_EQ(owner, c1);
    ASSERT_EQ(a.cuCtxSetCurrent(c0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostRegister(buf.p, buf.bytes, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    EXPECT_NE(ledger().find("device 1"), std::string::npos) << ledger();
    EXPECT_EQ(a.cuMemHostUnregister(buf.p), CUDA_SUCCESS);  // from device 0's context: allowed
    EXPECT_EQ(a.cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);
    release(0);
}

TEST_F(FakeCuda, ConcurrentRegistrationOfDisjointRangesStaysConsistent) {
    CUcontext c = retain(0);
    Pages buf(256);
    std::vector<std::thread> ts;
    std::atomic<int> failures{0};
    for (int t = 0; t < 4; ++t)
        ts.emplace_back([&, t] {
            a.cuCtxSetCurrent(c);
            for (int i = 0; i < 64; ++i) {
                char* p = buf.p + (static_cast<size_t>(t) * 64 + static_cast<size_t>(i)) * page();
                if (a.cuMemHostRegister(p, page(), 0) != CUDA_SUCCESS) ++failures;
                if (i % 2 == 0 && a.cuMemHostUnregister(p) != CUDA_SUCCESS) ++failures;
            }
        });
    for (auto& t : ts) t.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(a.live_objects(), 1u + 4 * 32) << ledger();
    for (size_t i = 1; i < 256; i += 2) EXPECT_EQ(a.cuMemHostUnregister(buf.p + i * page()), CUDA_SUCCESS);
    release(0);
}

// ---- streams, events, host functions -------------------------------------------------------------

struct CallbackProbe {
    Api* a = nullptr;
    CUstream other = nullptr;
    CUevent ev = nullptr;
    CUresult alloc = CUDA_SUCCESS, record = CUDA_SUCCESS, query = CUDA_SUCCESS, current = CUDA_SUCCESS,
             name = CUDA_ERROR_UNKNOWN;
    std::thread::id thread;
};

void CUDA_CB callback_calls_driver(void* u) {
    auto* p = static_cast<CallbackProbe*>(u);
    CUdeviceptr d = 0;
    CUcontext c = nullptr;
    const char* s = nullptr;
    p->alloc = p->a->cuMemAlloc(&d, 4096);
    p->record = p->a->cuEventRecord(p->ev, p->other);
    p->query = p->a->cuStreamQuery(p->other);
    p->current = p->a->cuCtxGetCurrent(&c);
    p->name = p->a->cuGetErrorName(CUDA_ERROR_NOT_PERMITTED, &s);
    p->thread = std::this_thread::get_id();
}

TEST_F(FakeCuda, DriverCallsFromAHostCallbackAreRefused) {
    retain(0);
    CUstream s = nullptr, other = nullptr;
    CUevent ev = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamCreate(&other, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&ev, 0), CUDA_SUCCESS);
    CallbackProbe p;
    p.a = &a;
    p.other = other;
    p.ev = ev;
    ASSERT_EQ(a.cuLaunchHostFunc(s, callback_calls_driver, &p), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_EQ(p.alloc, CUDA_ERROR_NOT_PERMITTED);
    EXPECT_EQ(p.record, CUDA_ERROR_NOT_PERMITTED);
    EXPECT_EQ(p.query, CUDA_ERROR_NOT_PERMITTED);
    EXPECT_EQ(p.current, CUDA_ERROR_NOT_PERMITTED);
    EXPECT_EQ(p.name, CUDA_SUCCESS);  // pure lookups are allowed
    EXPECT_NE(p.thread, std::this_thread::get_id());
    EXPECT_GE(a.call_count("cuMemAlloc_v2"), 1u);
    EXPECT_EQ(a.cuEventDestroy(ev), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(other), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    release(0);
}

// Every call is recorded with its thread: a test of the thread that calls the driver
// (VMM-CALLBACK) reads this record, and learns a callback thread from a callback of its own.
TEST_F(FakeCuda, EveryCallIsRecordedWithItsThreadAndWhetherInsideAHostFunction) {
    retain(0);
    CUstream s = nullptr, other = nullptr;
    CUevent ev = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamCreate(&other, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&ev, 0), CUDA_SUCCESS);
    CallbackProbe p;
    p.a = &a;
    p.other = other;
    p.ev = ev;
    a.reset_call_records();
    ASSERT_EQ(a.cuLaunchHostFunc(s, callback_calls_driver, &p), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    std::vector<xmc_fake_cuda_call_record> recs(64);
    const size_t n = a.call_records(recs.data(), recs.size());
    ASSERT_GE(n, 6u);
    ASSERT_LE(n, recs.size());
    recs.resize(n);
    const int64_t me = static_cast<int64_t>(gettid());
    EXPECT_STREQ(recs[0].entry, "cuLaunchHostFunc");
    EXPECT_EQ(recs[0].tid, me);
    EXPECT_EQ(recs[0].in_host_callback, 0);
    EXPECT_EQ(recs[0].on_callback_thread, 0);
    // The five calls of the host function (refused or not): inside it, on the callback thread.
    std::vector<std::string> inside;
    int64_t cb = 0;
    for (const auto& r : recs)
        if (r.in_host_callback) {
            inside.push_back(r.entry);
            EXPECT_EQ(r.on_callback_thread, 1);
            EXPECT_NE(r.tid, me);
            cb = r.tid;
        }
    EXPECT_EQ(inside, (std::vector<std::string>{"cuMemAlloc", "cuEventRecord", "cuStreamQuery", "cuCtxGetCurrent",
                                                "cuGetErrorName"}));
    EXPECT_NE(cb, 0);
    // Only the records since the reset are kept, and the count says how many calls there were.
    a.reset_call_records();
    EXPECT_EQ(a.call_records(nullptr, 0), 0u);
    EXPECT_EQ(a.cuStreamQuery(s), CUDA_SUCCESS);
    EXPECT_EQ(a.call_records(nullptr, 0), 1u);
    EXPECT_EQ(a.cuEventDestroy(ev), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(other), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    release(0);
}

struct Gate {
    std::promise<void> open;
    std::shared_future<void> opened = open.get_future().share();
};

struct LogStep {
    std::vector<int>* log;
    int id;
};

void CUDA_CB wait_gate(void* u) { static_cast<Gate*>(u)->opened.wait(); }
void CUDA_CB log_id(void* u) {
    auto* g = static_cast<LogStep*>(u);
    g->log->push_back(g->id);
}

TEST_F(FakeCuda, StreamsRunInOrderAndEventsOrderAcrossStreams) {
    retain(0);
    CUstream s1 = nullptr, s2 = nullptr;
    CUevent e = nullptr, never = nullptr, t0 = nullptr, t1 = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&never, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&t0, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&t1, 0), CUDA_SUCCESS);
    std::vector<int> log;  // written only by the stream workers, in an order the events fix
    Gate gate;
    LogStep a1{&log, 1}, a2{&log, 2}, b1{&log, 3};
    CUdeviceptr buf = 0;
    ASSERT_EQ(a.cuMemAlloc(&buf, 256), CUDA_SUCCESS);
    // dst is registered: into pageable memory the copy would return only when
    // done, so the call itself would wait for the gate (as on the real driver).
    std::vector<unsigned char> src(256, 0x11);
    Pages dst_pages(1);
    ASSERT_EQ(a.cuMemHostRegister(dst_pages.p, dst_pages.bytes, 0), CUDA_SUCCESS);
    auto* dst = reinterpret_cast<unsigned char*>(dst_pages.p);

    ASSERT_EQ(a.cuEventRecord(t0, s1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuLaunchHostFunc(s1, wait_gate, &gate), CUDA_SUCCESS);
    ASSERT_EQ(a.cuLaunchHostFunc(s1, log_id, &a1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemcpyHtoDAsync(buf, src.data(), src.size(), s1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuLaunchHostFunc(s1, log_id, &a2), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventRecord(e, s1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventRecord(t1, s1), CUDA_SUCCESS);
    // A wait on a never-recorded event is no wait; the one on e is.
    ASSERT_EQ(a.cuStreamWaitEvent(s2, never, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamWaitEvent(s2, e, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuLaunchHostFunc(s2, log_id, &b1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemcpyDtoHAsync(dst, buf, src.size(), s2), CUDA_SUCCESS);

    // t0 is before the gate: once it completed, the gate holds t1 for 20 ms
    // at least, however late a loaded machine ran s1's worker.
    ASSERT_EQ(a.cuEventSynchronize(t0), CUDA_SUCCESS);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(a.cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
    EXPECT_EQ(a.cuStreamQuery(s2), CUDA_ERROR_NOT_READY);
    EXPECT_EQ(a.cuEventQuery(e), CUDA_ERROR_NOT_READY);
    EXPECT_EQ(a.cuEventQuery(never), CUDA_SUCCESS);
    float ms = 0;
    EXPECT_EQ(a.cuEventElapsedTime(&ms, t0, t1), CUDA_ERROR_NOT_READY);
    gate.open.set_value();
    ASSERT_EQ(a.cuStreamSynchronize(s2), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventSynchronize(t1), CUDA_SUCCESS);
    EXPECT_EQ(log, (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(std::vector<unsigned char>(dst, dst + src.size()), src);
    EXPECT_EQ(a.cuMemHostUnregister(dst_pages.p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuEventQuery(e), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventElapsedTime(&ms, t0, t1), CUDA_SUCCESS);
    EXPECT_GE(ms, 15.0f);
    EXPECT_EQ(a.cuEventElapsedTime(&ms, t0, never), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(a.cuEventElapsedTime(&ms, e, t1), CUDA_ERROR_INVALID_HANDLE);  // DISABLE_TIMING

    for (CUevent x : {e, never, t0, t1}) EXPECT_EQ(a.cuEventDestroy(x), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s1), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s2), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s2), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(a.cuMemFree(buf), CUDA_SUCCESS);
    release(0);
}

// As on the real driver (H200, driver 580): host functions of all streams
// run on one thread, one at a time; a blocked one holds the others' host
// functions, but not their copies and records.
TEST_F(FakeCuda, HostFunctionsOfAllStreamsRunOneAtATimeOnOneThread) {
    retain(0);
    CUstream s1 = nullptr, s2 = nullptr;
    CUevent e = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s1, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamCreate(&s2, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    std::vector<int> log;
    struct Held {
        std::promise<void> started;
        Gate gate;
    } held;
    LogStep b1{&log, 1};
    auto hold = [](void* u) {
        auto* h = static_cast<Held*>(u);
        h->started.set_value();
        h->gate.opened.wait();
    };
    Gate& gate = held.gate;
    ASSERT_EQ(a.cuLaunchHostFunc(s1, hold, &held), CUDA_SUCCESS);
    held.started.get_future().wait();  // the callback thread is in it now
    ASSERT_EQ(a.cuEventRecord(e, s2), CUDA_SUCCESS);
    ASSERT_EQ(a.cuLaunchHostFunc(s2, log_id, &b1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventSynchronize(e), CUDA_SUCCESS);  // s2's record is not held
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(a.cuStreamQuery(s2), CUDA_ERROR_NOT_READY) << "s2's host function ran beside a blocked one";
    EXPECT_TRUE(log.empty());
    gate.open.set_value();
    ASSERT_EQ(a.cuStreamSynchronize(s2), CUDA_SUCCESS);
    EXPECT_EQ(log, std::vector<int>{1});
    EXPECT_EQ(a.cuEventDestroy(e), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s1), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s2), CUDA_SUCCESS);
    release(0);
}

// cuStreamWaitValue32 on registered host memory holds the stream until a
// plain host store satisfies it; cuStreamWriteValue32 stores in stream order;
// unregistered host memory and misaligned words are refused.
TEST_F(FakeCuda, StreamWaitValueHoldsTheStreamUntilTheHostWordIsSet) {
    retain(0);
    Pages host(1);
    ASSERT_EQ(a.cuMemHostRegister(host.p, host.bytes, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_SUCCESS);
    CUdeviceptr word = 0;
    ASSERT_EQ(a.cuMemHostGetDevicePointer(&word, host.p, 0), CUDA_SUCCESS);
    auto* w = reinterpret_cast<volatile uint32_t*>(host.p);
    *w = 0;
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    Pages plain(1);
    EXPECT_EQ(a.cuStreamWaitValue32(s, reinterpret_cast<CUdeviceptr>(plain.p), 1, CU_STREAM_WAIT_VALUE_GEQ),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuStreamWaitValue32(s, word + 2, 1, CU_STREAM_WAIT_VALUE_GEQ), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuStreamWaitValue32(s, word, 1, 7), CUDA_ERROR_INVALID_VALUE);
    ASSERT_EQ(a.cuStreamWaitValue32(s, word, 2, CU_STREAM_WAIT_VALUE_GEQ), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamWriteValue32(s, word + 4, 9, CU_STREAM_WRITE_VALUE_DEFAULT), CUDA_SUCCESS);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(a.cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    *w = 1;  // not yet: 1 < 2
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(a.cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    EXPECT_EQ(w[1], 0u) << "the write ran before the wait it follows";
    *w = 2;
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_EQ(w[1], 9u);
    ASSERT_EQ(a.cuStreamWaitValue32(s, word, 2, CU_STREAM_WAIT_VALUE_EQ), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_EQ(a.set_faults("fail:cuStreamWaitValue32:CUDA_ERROR_NOT_SUPPORTED@1"), 0) << last_error();
    EXPECT_EQ(a.cuStreamWaitValue32(s, word, 0, CU_STREAM_WAIT_VALUE_GEQ), CUDA_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(a.set_faults(""), 0);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostUnregister(host.p), CUDA_SUCCESS);
    release(0);
}

// As on the real driver (H200, driver 580): a copy from device memory into
// pageable host memory returns only once it is done, so on a stream held by a
// blocking host function the call itself waits for the function; into
// registered memory it returns at once.
TEST_F(FakeCuda, ACopyIntoPageableMemoryReturnsOnlyWhenDone) {
    retain(0);
    CUdeviceptr dev = 0;
    ASSERT_EQ(a.cuMemAlloc(&dev, 4096), CUDA_SUCCESS);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemsetD8Async(dev, 0x5a, 4096, s), CUDA_SUCCESS);
    Pages reg(1), plain(1);
    ASSERT_EQ(a.cuMemHostRegister(reg.p, reg.bytes, 0), CUDA_SUCCESS);
    Gate gate;
    ASSERT_EQ(a.cuLaunchHostFunc(s, wait_gate, &gate), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemcpyDtoHAsync(reg.p, dev, 4096, s), CUDA_SUCCESS);  // registered: returns at once
    std::atomic<bool> returned{false};
    std::thread t([&] {
        EXPECT_EQ(a.cuMemcpyDtoHAsync(plain.p, dev, 4096, s), CUDA_SUCCESS);
        returned = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(returned.load()) << "a copy into pageable memory returned before the held stream ran it";
    gate.open.set_value();
    t.join();
    EXPECT_EQ(reinterpret_cast<unsigned char*>(plain.p)[4095], 0x5a) << "returned, but the bytes are not there";
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostUnregister(reg.p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(dev), CUDA_SUCCESS);
    release(0);
}

TEST_F(FakeCuda, AWaitToldBeforeTheRecordDoesNotWait) {
    // VMM-EVENT-WAIT: the wait captures what was recorded at the time of the call.
    retain(0);
    CUstream s1 = nullptr, s2 = nullptr;
    CUevent e = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s1, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamCreate(&s2, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&e, 0), CUDA_SUCCESS);
    Gate gate;
    ASSERT_EQ(a.cuStreamWaitEvent(s2, e, 0), CUDA_SUCCESS);  // before any record
    ASSERT_EQ(a.cuLaunchHostFunc(s1, wait_gate, &gate), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventRecord(e, s1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s2), CUDA_SUCCESS);  // returns although s1 is blocked
    EXPECT_EQ(a.cuEventQuery(e), CUDA_ERROR_NOT_READY);
    gate.open.set_value();
    ASSERT_EQ(a.cuEventSynchronize(e), CUDA_SUCCESS);
    EXPECT_EQ(a.cuEventDestroy(e), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s1), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s2), CUDA_SUCCESS);
    release(0);
}

// ---- copies ---------------------------------------------------------------------------------------------

TEST_F(FakeCuda, Copy2DHonoursPitchesAndOffsetsExactly) {
    retain(0);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    const size_t spitch = 40, dpitch = 64, W = 13, H = 5, sx = 3, sy = 2, dx = 7, dy = 1;
    std::vector<unsigned char> host(spitch * 10);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i * 7 + 1);
    CUdeviceptr dev = 0;
    ASSERT_EQ(a.cuMemAlloc(&dev, dpitch * 8), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemsetD8Async(dev, 0xee, dpitch * 8, s), CUDA_SUCCESS);
    CUDA_MEMCPY2D c;
    std::memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host.data();
    c.srcPitch = spitch;
    c.srcXInBytes = sx;
    c.srcY = sy;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dev;
    c.dstPitch = dpitch;
    c.dstXInBytes = dx;
    c.dstY = dy;
    c.WidthInBytes = W;
    c.Height = H;
    ASSERT_EQ(a.cuMemcpy2DAsync(&c, s), CUDA_SUCCESS);
    std::vector<unsigned char> back(dpitch * 8);
    ASSERT_EQ(a.cuMemcpyDtoHAsync(back.data(), dev, back.size(), s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    for (size_t y = 0; y < 8; ++y)
        for (size_t x = 0; x < dpitch; ++x) {
            bool inside = y >= dy && y < dy + H && x >= dx && x < dx + W;
            unsigned char want = inside ? host[(y - dy + sy) * spitch + (x - dx + sx)] : 0xee;
            ASSERT_EQ(back[y * dpitch + x], want) << "x " << x << " y " << y;
        }
    c.srcPitch = W - 1;  // recorded: a pitch below the width is invalid
    EXPECT_EQ(a.cuMemcpy2DAsync(&c, s), CUDA_ERROR_INVALID_VALUE);
    c.srcPitch = spitch;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    EXPECT_EQ(a.cuMemcpy2DAsync(&c, s), CUDA_ERROR_INVALID_VALUE);  // recorded: a NULL array
    c.dstArray = reinterpret_cast<CUarray>(0x1000);
    EXPECT_EQ(a.cuMemcpy2DAsync(&c, s), CUDA_ERROR_NOT_SUPPORTED);  // arrays are not modelled
    EXPECT_EQ(a.cuMemFree(dev), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    release(0);
}

TEST_F(FakeCuda, Copy3DHonoursPitchesHeightsAndOffsetsExactly) {
    retain(0);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    // device source volume: pitch 32, height 6, depth 4; host destination: pitch 24, height 5, depth 5
    const size_t sp = 32, sh = 6, sd = 4, dp = 24, dh = 5, dd = 5;
    const size_t W = 9, H = 3, D = 2, sx = 4, sy = 2, sz = 1, dx = 10, dy = 1, dz = 2;
    CUdeviceptr dev = 0;
    ASSERT_EQ(a.cuMemAlloc(&dev, sp * sh * sd), CUDA_SUCCESS);
    std::vector<unsigned char> init(sp * sh * sd);
    for (size_t i = 0; i < init.size(); ++i) init[i] = static_cast<unsigned char>(i * 13 + 5);
    ASSERT_EQ(a.cuMemcpyHtoDAsync(dev, init.data(), init.size(), s), CUDA_SUCCESS);
    std::vector<unsigned char> host(dp * dh * dd, 0xcd);
    CUDA_MEMCPY3D c;
    std::memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = dev;
    c.srcPitch = sp;
    c.srcHeight = sh;
    c.srcXInBytes = sx;
    c.srcY = sy;
    c.srcZ = sz;
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = host.data();
    c.dstPitch = dp;
    c.dstHeight = dh;
    c.dstXInBytes = dx;
    c.dstY = dy;
    c.dstZ = dz;
    c.WidthInBytes = W;
    c.Height = H;
    c.Depth = D;
    ASSERT_EQ(a.cuMemcpy3DAsync(&c, s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    for (size_t z = 0; z < dd; ++z)
        for (size_t y = 0; y < dh; ++y)
            for (size_t x = 0; x < dp; ++x) {
                bool inside = z >= dz && z < dz + D && y >= dy && y < dy + H && x >= dx && x < dx + W;
                unsigned char want = 0xcd;
                if (inside)
                    want = init[((z - dz + sz) * sh + (y - dy + sy)) * sp + (x - dx + sx)];
                ASSERT_EQ(host[(z * dh + y) * dp + x], want) << x << "," << y << "," << z;
            }
    c.srcHeight = H - 1;  // slices overlapping rows: invalid
    EXPECT_EQ(a.cuMemcpy3DAsync(&c, s), CUDA_ERROR_INVALID_VALUE);
    c.srcHeight = sh;
    c.srcDevice = dev + sp * sh * sd - 8;  // runs past the allocation
    EXPECT_EQ(a.cuMemcpy3DAsync(&c, s), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemFree(dev), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    release(0);
}

TEST_F(FakeCuda, CopiesCheckTheDeviceSide) {
    retain(0);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    Pages host(2);
    std::vector<char> src(4096, 1);
    // recorded: a pageable host pointer as the device side is invalid
    EXPECT_EQ(a.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(host.p), src.data(), src.size(), s),
              CUDA_ERROR_INVALID_VALUE);
    // registered memory is device-accessible
    ASSERT_EQ(a.cuMemHostRegister(host.p, host.bytes, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(host.p), src.data(), src.size(), s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_EQ(host.p[4095], 1);
    EXPECT_EQ(a.cuMemHostUnregister(host.p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    release(0);
}

int touch_in_child(CUdeviceptr addr);

TEST_F(FakeCuda, CopiesKnowTheExtentOfDeviceMemoryAlsoOnceItIsFreed) {
    // recorded: one byte past an allocation is refused, by unified address too
    // (copy_1d_past_end); freed device memory stays device memory, so a copy
    // from it is refused instead of reading an unmapped page as host memory
    retain(0);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CUdeviceptr p = 0, q = 0, gone = 0;
    ASSERT_EQ(a.cuMemAlloc(&p, 6144), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemAlloc(&q, 6144), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemcpyAsync(q, p, 6145, s), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemcpyAsync(q + 6144, p, 16, s), CUDA_ERROR_INVALID_VALUE);  // past the end, in its last page
    EXPECT_EQ(a.cuMemcpyAsync(q, p, 6144, s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemAlloc(&gone, 1 << 16), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemFree(gone), CUDA_SUCCESS);
    std::vector<char> host(4096, 3);
    EXPECT_EQ(a.cuMemcpyAsync(q, gone, 4096, s), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemcpyAsync(gone, p, 4096, s), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(host.data()), gone + 4096, 4096, s),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemcpyDtoHAsync(host.data(), gone, host.size(), s), CUDA_ERROR_INVALID_VALUE);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_EQ(touch_in_child(gone), SIGSEGV);  // and the host cannot touch it
    // the next allocation that fits reuses the freed range (freed ranges do not pile up)
    CUdeviceptr again = 0;
    ASSERT_EQ(a.cuMemAlloc(&again, 1 << 16), CUDA_SUCCESS);
    EXPECT_EQ(again, gone);
    EXPECT_EQ(a.cuMemcpyAsync(again, reinterpret_cast<CUdeviceptr>(host.data()), 4096, s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_EQ(reinterpret_cast<char*>(again)[4095], 3);
    for (CUdeviceptr x : {p, q, again}) EXPECT_EQ(a.cuMemFree(x), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    release(0);
}

// ---- VMM -------------------------------------------------------------------------------------------------

CUmemAllocationProp prop_for(int dev) {
    CUmemAllocationProp p;
    std::memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    return p;
}

CUmemAccessDesc rw(int dev) {
    CUmemAccessDesc d;
    std::memset(&d, 0, sizeof d);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = dev;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return d;
}

// Touches addr in a forked child; returns the signal that killed it (0 if none).
int touch_in_child(CUdeviceptr addr) {
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

TEST_F(FakeCuda, VmmReserveMapUnmapAndTheUnmappedRangeFaults) {
    retain(0);
    CUmemAllocationProp prop = prop_for(0);
    size_t g = 0, rec = 0;
    ASSERT_EQ(a.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), CUDA_SUCCESS);
    EXPECT_EQ(g, 2u << 20);
    EXPECT_EQ(rec, 2u << 20);

    CUdeviceptr va = 0;
    EXPECT_EQ(a.cuMemAddressReserve(&va, g + 4096, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    ASSERT_EQ(a.cuMemAddressReserve(&va, 2 * g, 0, 0, 0), CUDA_SUCCESS);
    EXPECT_EQ(va % g, 0u);
    EXPECT_EQ(touch_in_child(va), SIGSEGV);  // reserved, unmapped
    EXPECT_EQ(a.cuMemUnmap(va, 4096), CUDA_SUCCESS);  // recorded: nothing mapped, any size

    size_t free0 = 0, total = 0;
    ASSERT_EQ(a.cuMemGetInfo(&free0, &total), CUDA_SUCCESS);
    CUmemGenericAllocationHandle h = 0, h2 = 0;
    EXPECT_EQ(a.cuMemCreate(&h, g + g / 2, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CUmemAllocationProp bad = prop_for(9);
    EXPECT_EQ(a.cuMemCreate(&h, g, &bad, 0), CUDA_ERROR_INVALID_DEVICE);
    size_t bad_g = 0;  // recorded: the granularity is given for any device id
    EXPECT_EQ(a.cuMemGetAllocationGranularity(&bad_g, &bad, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    EXPECT_EQ(bad_g, g);
    ASSERT_EQ(a.cuMemCreate(&h, 2 * g, &prop, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemCreate(&h2, g, &prop, 0), CUDA_SUCCESS);
    size_t free1 = 0;
    ASSERT_EQ(a.cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
    EXPECT_EQ(free0 - free1, 3 * g);

    EXPECT_EQ(a.cuMemMap(va, g, 4096, h, 0), CUDA_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(a.cuMemMap(va + 4096, g, 0, h, 0), CUDA_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(a.cuMemMap(va, g, 2 * g, h, 0), CUDA_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(a.cuMemMap(va, g, 0, h, 0), CUDA_ERROR_NOT_SUPPORTED);         // recorded: part of a handle
    EXPECT_EQ(a.cuMemMap(va + 4096, g, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);  // a whole one, unaligned address
    ASSERT_EQ(a.cuMemMap(va, 2 * g, 0, h, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemMap(va, g, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);  // already mapped
    EXPECT_EQ(touch_in_child(va), SIGSEGV);  // mapped, no access yet
    CUmemAccessDesc d = rw(0);
    CUmemAccessDesc nowhere = rw(9);  // recorded: CUDA_ERROR_INVALID_VALUE, not INVALID_DEVICE
    EXPECT_EQ(a.cuMemSetAccess(va, 2 * g, &nowhere, 1), CUDA_ERROR_INVALID_VALUE);
    ASSERT_EQ(a.cuMemSetAccess(va, 2 * g, &d, 1), CUDA_SUCCESS);
    unsigned long long fl = 0;
    ASSERT_EQ(a.cuMemGetAccess(&fl, &d.location, va + g), CUDA_SUCCESS);
    EXPECT_EQ(fl, static_cast<unsigned long long>(CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
    EXPECT_EQ(touch_in_child(va), 0);
    ASSERT_EQ(a.cuMemsetD8(va, 0x42, 2 * g), CUDA_SUCCESS);
    std::vector<unsigned char> back(16);
    ASSERT_EQ(a.cuMemcpyDtoH(back.data(), va + 2 * g - 16, 16), CUDA_SUCCESS);
    EXPECT_EQ(back, std::vector<unsigned char>(16, 0x42));

    EXPECT_EQ(a.cuMemUnmap(va, g), CUDA_ERROR_INVALID_VALUE);  // part of a mapping
    EXPECT_EQ(a.cuMemUnmap(va + 4096, 4096), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemAddressFree(va, 2 * g), CUDA_ERROR_INVALID_VALUE);  // still mapped
    ASSERT_EQ(a.cuMemUnmap(va, 2 * g), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemUnmap(va, 2 * g), CUDA_SUCCESS);  // recorded: unmapped again is fine
    EXPECT_EQ(touch_in_child(va), SIGSEGV);
    EXPECT_EQ(a.cuMemcpyDtoH(back.data(), va, 16), CUDA_ERROR_INVALID_VALUE);

    // release while mapped: usable until unmapped, memory returns at the unmap
    ASSERT_EQ(a.cuMemMap(va, g, 0, h2, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemSetAccess(va, g, &d, 1), CUDA_SUCCESS);
    size_t before = 0;
    ASSERT_EQ(a.cuMemGetInfo(&before, &total), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemRelease(h2), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemRelease(h2), CUDA_ERROR_INVALID_VALUE);
    size_t after = 0;
    ASSERT_EQ(a.cuMemGetInfo(&after, &total), CUDA_SUCCESS);
    EXPECT_EQ(after, before);
    EXPECT_EQ(a.cuMemsetD8(va, 1, g), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemUnmap(va, g), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemGetInfo(&after, &total), CUDA_SUCCESS);
    EXPECT_EQ(after - before, g);

    ASSERT_EQ(a.cuMemRelease(h), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemGetInfo(&after, &total), CUDA_SUCCESS);
    EXPECT_EQ(after, free0);
    ASSERT_EQ(a.cuMemAddressFree(va, 2 * g), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemAddressFree(va, 2 * g), CUDA_ERROR_INVALID_VALUE);
    release(0);
}

void CUDA_CB wait_then_nothing(void* u) { static_cast<std::shared_future<void>*>(u)->wait(); }

TEST_F(FakeCuda, ACopyIntoAMappingUnmappedBeforeItRunsIsAStickyIllegalAddress) {
    // VMM-CLOSE: a backend that unmaps while a copy is queued is caught, not crashed.
    check_clean_ = false;  // the context is reset with the stream still in it
    retain(0);
    CUmemAllocationProp prop = prop_for(0);
    const size_t g = 2u << 20;
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h = 0;
    ASSERT_EQ(a.cuMemAddressReserve(&va, g, 0, 0, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemCreate(&h, g, &prop, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemMap(va, g, 0, h, 0), CUDA_SUCCESS);
    CUmemAccessDesc d = rw(0);
    ASSERT_EQ(a.cuMemSetAccess(va, g, &d, 1), CUDA_SUCCESS);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    std::promise<void> open;
    std::shared_future<void> opened = open.get_future().share();
    std::vector<char> src(g, 3);
    ASSERT_EQ(a.cuLaunchHostFunc(s, wait_then_nothing, &opened), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemcpyHtoDAsync(va, src.data(), g, s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemUnmap(va, g), CUDA_SUCCESS);
    open.set_value();
    EXPECT_EQ(a.cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
    CUdeviceptr p = 0;
    EXPECT_EQ(a.cuMemAlloc(&p, 16), CUDA_ERROR_ILLEGAL_ADDRESS);  // sticky
    EXPECT_EQ(a.cuMemRelease(h), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemAddressFree(va, g), CUDA_SUCCESS);
    release(0);  // destroying the context clears the sticky error
    retain(0);
    EXPECT_EQ(a.cuMemAlloc(&p, 16), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(p), CUDA_SUCCESS);
    release(0);
    EXPECT_EQ(a.live_objects(), 0u) << ledger();
}

// ---- faults ------------------------------------------------------------------------------------------------

// ---- sharing with another process (fake_cuda_ipc.cpp; the second process: the probe's cases) ----

TEST_F(FakeCuda, IpcHandlesInOneProcessAnswerAsRecordedAndTheExporterKeepsItsData) {
    retain(0);
    CUdeviceptr d = 0;
    ASSERT_EQ(a.cuMemAlloc(&d, 3 * page()), CUDA_SUCCESS);
    std::vector<unsigned char> in(3 * page()), out(3 * page(), 0);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i % 253);
    ASSERT_EQ(a.cuMemcpyHtoD(d, in.data(), in.size()), CUDA_SUCCESS);
    CUipcMemHandle h, inner;
    ASSERT_EQ(a.cuIpcGetMemHandle(&h, d), CUDA_SUCCESS);
    ASSERT_EQ(a.cuIpcGetMemHandle(&inner, d + 4096), CUDA_SUCCESS);  // the allocation's handle
    EXPECT_EQ(std::memcmp(&h, &inner, sizeof h), 0);
    // Exported, the memory keeps its contents and its address.
    ASSERT_EQ(a.cuMemcpyDtoH(out.data(), d, out.size()), CUDA_SUCCESS);
    EXPECT_EQ(in, out);
    int legacy = 0;
    ASSERT_EQ(a.cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, d + 8), CUDA_SUCCESS);
    EXPECT_NE(legacy, 0);
    CUdeviceptr start = 0;
    ASSERT_EQ(a.cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 4096), CUDA_SUCCESS);
    EXPECT_EQ(start, d);
    CUdeviceptr opened = 0;
    EXPECT_EQ(a.cuIpcOpenMemHandle(&opened, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_CONTEXT);
    CUipcMemHandle junk;
    std::memset(&junk, 0xa5, sizeof junk);
    EXPECT_EQ(a.cuIpcOpenMemHandle(&opened, junk, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuIpcCloseMemHandle(d), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuIpcGetMemHandle(nullptr, d), CUDA_ERROR_INVALID_VALUE);
    Pages host(1);
    EXPECT_EQ(a.cuIpcGetMemHandle(&h, reinterpret_cast<CUdeviceptr>(host.p)), CUDA_ERROR_INVALID_VALUE);
    ASSERT_EQ(a.cuMemFree(d), CUDA_SUCCESS);
    EXPECT_EQ(a.cuIpcGetMemHandle(&h, d), CUDA_ERROR_INVALID_VALUE);
    release(0);
}

TEST_F(FakeCuda, ShareableHandlesExportImportAndRetainHoldTheHandleOnceMore) {
    retain(0);
    const size_t g = 2u << 20;
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle plain = 0, shared = 0;
    ASSERT_EQ(a.cuMemCreate(&plain, g, &prop, 0), CUDA_SUCCESS);
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    ASSERT_EQ(a.cuMemCreate(&shared, g, &prop, 0), CUDA_SUCCESS);
    int fd = -1;
    EXPECT_EQ(a.cuMemExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
              CUDA_ERROR_INVALID_VALUE);  // recorded: created without the type
    ASSERT_EQ(a.cuMemExportToShareableHandle(&fd, shared, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_SUCCESS);
    // Map the original, write through it; import the fd, map it elsewhere, read the same bytes.
    CUdeviceptr va = 0, vb = 0;
    ASSERT_EQ(a.cuMemAddressReserve(&va, g, 0, 0, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemAddressReserve(&vb, g, 0, 0, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemMap(va, g, 0, shared, 0), CUDA_SUCCESS);
    CUmemAccessDesc acc{};
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ASSERT_EQ(a.cuMemSetAccess(va, g, &acc, 1), CUDA_SUCCESS);
    const char msg[] = "shared";
    ASSERT_EQ(a.cuMemcpyHtoD(va + 100, msg, sizeof msg), CUDA_SUCCESS);
    unsigned long long types = 0;
    ASSERT_EQ(a.cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, va + 100), CUDA_SUCCESS);
    EXPECT_EQ(types, unsigned(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CUmemGenericAllocationHandle imported = 0, retained = 0;
    ASSERT_EQ(a.cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(intptr_t(fd)),
                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), CUDA_SUCCESS);
    close(fd);  // the imported handle holds its own
    ASSERT_EQ(a.cuMemMap(vb, g, 0, imported, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemSetAccess(vb, g, &acc, 1), CUDA_SUCCESS);
    char got[sizeof msg] = {};
    ASSERT_EQ(a.cuMemcpyDtoH(got, vb + 100, sizeof got), CUDA_SUCCESS);
    EXPECT_STREQ(got, msg);
    // Retain: the same handle, held once more (one release does not free it).
    ASSERT_EQ(a.cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va + 4096)), CUDA_SUCCESS);
    EXPECT_EQ(retained, shared);
    Pages host(1);
    EXPECT_EQ(a.cuMemRetainAllocationHandle(&retained, host.p), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemRelease(retained), CUDA_SUCCESS);
    char name[64];
    std::snprintf(name, sizeof name, "physical handle 0x%llx,", static_cast<unsigned long long>(shared));
    EXPECT_NE(ledger().find(name), std::string::npos) << "released once, retained once: still live\n" << ledger();
    // The import refuses what is not such memory (recorded: CUDA_ERROR_UNKNOWN).
    CUmemGenericAllocationHandle bad = 0;
    EXPECT_EQ(a.cuMemImportFromShareableHandle(&bad, reinterpret_cast<void*>(intptr_t(fd)),
                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), CUDA_ERROR_UNKNOWN);
    for (CUdeviceptr v : {va, vb}) {
        EXPECT_EQ(a.cuMemUnmap(v, g), CUDA_SUCCESS);
        EXPECT_EQ(a.cuMemAddressFree(v, g), CUDA_SUCCESS);
    }
    for (CUmemGenericAllocationHandle h : {plain, shared, imported}) EXPECT_EQ(a.cuMemRelease(h), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemExportToShareableHandle(&fd, shared, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
              CUDA_ERROR_INVALID_VALUE);  // released (the real driver crashes)
    release(0);
}

TEST_F(FakeCuda, FailTheKthCallOrEveryCallFromK) {
    retain(0);
    CUdeviceptr p[4] = {};
    ASSERT_EQ(a.set_faults("fail:cuMemAlloc:CUDA_ERROR_OUT_OF_MEMORY@2"), 0);
    EXPECT_EQ(a.cuMemAlloc(&p[0], 64), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemAlloc(&p[1], 64), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(a.cuMemAlloc(&p[1], 64), CUDA_SUCCESS);
    ASSERT_EQ(a.set_faults("fail:cuMemFree_v2:999@2+ # comment\n"), 0);
    EXPECT_EQ(a.cuMemFree(p[0]), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(p[1]), CUDA_ERROR_UNKNOWN);
    EXPECT_EQ(a.cuMemFree(p[1]), CUDA_ERROR_UNKNOWN);
    ASSERT_EQ(a.set_faults(""), 0);
    EXPECT_EQ(a.cuMemFree(p[1]), CUDA_SUCCESS);

    // '*' counts every call; delays add up
    uint64_t before = a.call_count(nullptr);
    ASSERT_EQ(a.set_faults("fail:*:CUDA_ERROR_NOT_READY@3; delay:cuCtxGetDevice:30ms"), 0);
    CUdevice dv = 0;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(a.cuCtxGetDevice(&dv), CUDA_SUCCESS);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(25));
    int n = 0;
    EXPECT_EQ(a.cuDeviceGetCount(&n), CUDA_SUCCESS);
    EXPECT_EQ(a.cuDeviceGetCount(&n), CUDA_ERROR_NOT_READY);
    EXPECT_EQ(a.cuDeviceGetCount(&n), CUDA_SUCCESS);
    EXPECT_EQ(a.call_count(nullptr) - before, 4u);
    EXPECT_EQ(a.call_count("cuDeviceGetCount"), a.call_count("cuDeviceGetCount_v2"));
    a.set_faults(nullptr);
    release(0);
}

TEST_F(FakeCuda, NonIdentityRegistrationMapsElsewhereAndCopiesStillReachIt) {
    retain(0);
    ASSERT_EQ(a.set_faults("nonidentity:cuMemHostRegister_v2:0x100000@2"), 0);
    Pages x(1), y(1);
    ASSERT_EQ(a.cuMemHostRegister(x.p, x.bytes, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemHostRegister(y.p, y.bytes, 0), CUDA_SUCCESS);
    CUdeviceptr dx = 0, dy = 0, attr = 0;
    ASSERT_EQ(a.cuMemHostGetDevicePointer(&dx, x.p, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemHostGetDevicePointer(&dy, y.p + 8, 0), CUDA_SUCCESS);
    EXPECT_EQ(dx, reinterpret_cast<CUdeviceptr>(x.p));
    EXPECT_EQ(dy, reinterpret_cast<CUdeviceptr>(y.p + 8) + 0x100000);
    ASSERT_EQ(a.cuPointerGetAttribute(&attr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                      reinterpret_cast<CUdeviceptr>(y.p)),
              CUDA_SUCCESS);
    EXPECT_EQ(attr, reinterpret_cast<CUdeviceptr>(y.p) + 0x100000);
    std::memset(y.p, 0x77, y.bytes);
    char out[8] = {};
    ASSERT_EQ(a.cuMemcpyDtoH(out, dy, sizeof out), CUDA_SUCCESS);
    EXPECT_EQ(out[7], 0x77);
    EXPECT_NE(ledger().find("device address"), std::string::npos);
    EXPECT_EQ(a.cuMemHostUnregister(x.p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostUnregister(y.p), CUDA_SUCCESS);
    release(0);
}

TEST_F(FakeCuda, MalformedScriptsAreRefusedWithAMessageAndChangeNothing) {
    ASSERT_EQ(a.set_faults("fail:cuInit:CUDA_ERROR_UNKNOWN@5"), 0);
    const char* bad[] = {
        "fail",
        "fail:cuMemAlloc",
        "fail:cuMemAlloc:",
        "fail:cuNoSuchEntry:1",
        "fail:cuMemAlloc:CUDA_ERROR_NO_SUCH_CODE",
        "fail:cuMemAlloc:CUDA_SUCCESS",
        "fail:cuMemAlloc:1@",
        "fail:cuMemAlloc:1@0",
        "fail:cuMemAlloc:1@x+",
        "fail:cuMemAlloc:1@99999999999999999999999",
        "explode:cuMemAlloc:1",
        "delay:cuMemAlloc:-5",
        "delay:cuMemAlloc:999999999999",
        "nonidentity:cuMemAlloc:4096",
        "nonidentity:*:4096",
        "nonidentity:cuMemHostRegister:0",
        "fail:cu Mem:1",
        ":::",
        "\x01\x02\x03",
    };
    for (const char* s : bad) {
        EXPECT_EQ(a.set_faults(s), -1) << s;
        EXPECT_FALSE(last_error().empty()) << s;
    }
    EXPECT_EQ(a.set_faults("fail:cuMemAlloc:1; fail:bogus:2"), -1);
    EXPECT_NE(last_error().find("rule 2 'fail:bogus:2'"), std::string::npos) << last_error();
    std::string huge(70000, ';');
    EXPECT_EQ(a.set_faults(huge.c_str()), -1);
    std::string many;
    for (int i = 0; i < 300; ++i) many += "delay:cuInit:1us;";
    EXPECT_EQ(a.set_faults(many.c_str()), -1);
    // the earlier script is still installed: the 5th cuInit fails
    for (int i = 0; i < 4; ++i) EXPECT_EQ(a.cuInit(0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuInit(0), CUDA_ERROR_UNKNOWN);
    a.set_faults(nullptr);
}

// The one parser's refusals (fakes/common/), each with a message that names the problem.
TEST_F(FakeCuda, ScriptRefusalsNameTheirReason) {
    const std::pair<const char*, const char*> cases[] = {
        {"fail:cuNoSuchEntry:1", "unknown entry point 'cuNoSuchEntry' (the fake CUDA driver does not implement it)"},
        {"fail:cuMemAlloc:CUDA_ERROR_NO_SUCH_CODE", "unknown CUresult 'CUDA_ERROR_NO_SUCH_CODE'"},
        {"fail:cuMemAlloc:1024", "unknown CUresult '1024' (a name or a number 1..1023)"},
        {"fail:cuMemAlloc:CUDA_SUCCESS", "'CUDA_SUCCESS' is success, not a failure"},
        {"fail:cuMemAlloc:2@0", "bad call number '0'"},
        {"fail:cuMemAlloc:2@3++", "bad call number '3++'"},
        {"fail:cuMemAlloc:2@", "bad call number ''"},
        // a bare number was microseconds to this fake and milliseconds to the other
        {"delay:cuStreamSynchronize:2000@2", "no unit: write 'delay:cuStreamSynchronize:2000us@2'"},
        {"delay:cuStreamSynchronize:2min", "bad duration '2min'"},
        {"delay:cuStreamSynchronize:601s", "at most 600s"},
        {"size_limit:cuMemFree:1G:CUDA_ERROR_INVALID_VALUE", "size_limit does not apply to 'cuMemFree' (it applies to: cuMemAlloc, cuMemHostRegister,"},
        {"size_limit:cuMemAlloc:1T:CUDA_ERROR_INVALID_VALUE", "bad byte count '1T'"},
        {"size_limit:cuMemAlloc:1G", "expected size_limit:ENTRY:BYTES:CODE[@WHEN]"},
        {"exhaust:cuMemFree:1:CUDA_ERROR_OUT_OF_MEMORY", "exhaust does not apply to 'cuMemFree'"},
        {"exhaust:*:1:CUDA_ERROR_OUT_OF_MEMORY", "exhaust needs a named entry point, not '*'"},
        {"exhaust:cuMemCreate:x:CUDA_ERROR_OUT_OF_MEMORY", "bad object count 'x'"},
        {"exec_delay:cuMemAlloc:1ms", "exec_delay does not apply to 'cuMemAlloc' (it applies to: cuMemcpyAsync,"},
        {"nonidentity:cuMemHostRegister", "expected nonidentity:ENTRY:OFFSET[@WHEN]"},
        {"cuMemFree:2+:CUDA_ERROR_UNKNOWN", "the old form ENTRY:WHEN:ACTION is gone (rules are ACTION:ENTRY:ARG[@WHEN]): write 'fail:cuMemFree:CUDA_ERROR_UNKNOWN@2+'"},
    };
    for (auto [script, why] : cases) {
        EXPECT_EQ(a.set_faults(script), -1) << script;
        EXPECT_NE(last_error().find(std::string("rule 1 '") + script + "': "), std::string::npos) << last_error();
        EXPECT_NE(last_error().find(why), std::string::npos) << last_error();
    }
    // The spellings the fake took before still mean the same.
    for (const char* old : {"fail:cuMemHostRegister:CUDA_ERROR_OUT_OF_MEMORY@2", "fail:cuMemUnmap_v2:801@3+",
                            "nonidentity:cuMemHostRegister:0x10000@1", "fail:*:CUDA_ERROR_UNKNOWN@57"})
        EXPECT_EQ(a.set_faults(old), 0) << old << ": " << last_error();
}

// size_limit: a call whose size argument exceeds the limit answers the code and
// does nothing; smaller calls (and calls of other entries) run.
TEST_F(FakeCuda, SizeLimitRefusesOnlyCallsAboveTheLimit) {
    retain(0);
    ASSERT_EQ(a.set_faults("size_limit:cuMemHostRegister_v2:64K:CUDA_ERROR_INVALID_VALUE\n"
                           "size_limit:cuMemAlloc:4K:CUDA_ERROR_OUT_OF_MEMORY@2+\n"
                           "size_limit:cuMemCreate:2M:CUDA_ERROR_OUT_OF_MEMORY\n"
                           "size_limit:cuMemAddressReserve:4M:CUDA_ERROR_OUT_OF_MEMORY\n"
                           "size_limit:cuMemMap:2M:CUDA_ERROR_INVALID_VALUE\n"
                           "size_limit:cuMemcpyHtoDAsync:16:CUDA_ERROR_INVALID_VALUE"),
              0)
        << last_error();
    const size_t g = 2u << 20;
    Pages small(65536 / page()), big(65536 / page() + 1);
    EXPECT_EQ(a.cuMemHostRegister(big.p, big.bytes, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.live_objects(), 1u) << ledger();  // the context: nothing registered
    ASSERT_EQ(a.cuMemHostRegister(small.p, small.bytes, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostRegister(big.p + small.bytes, page(), 0), CUDA_SUCCESS) << "small enough";
    EXPECT_EQ(a.cuMemHostUnregister(big.p + small.bytes), CUDA_SUCCESS);

    CUdeviceptr p = 0, q = 0;
    ASSERT_EQ(a.cuMemAlloc(&p, 8192), CUDA_SUCCESS) << "the first call is not counted by @2+";
    EXPECT_EQ(a.cuMemAlloc(&q, 4097), CUDA_ERROR_OUT_OF_MEMORY);
    ASSERT_EQ(a.cuMemAlloc(&q, 4096), CUDA_SUCCESS);

    CUmemAllocationProp prop = prop_for(0);
    CUmemGenericAllocationHandle h = 0;
    size_t free0 = 0, free1 = 0, total = 0;
    ASSERT_EQ(a.cuMemGetInfo(&free0, &total), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemCreate(&h, 2 * g, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    ASSERT_EQ(a.cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
    EXPECT_EQ(free1, free0) << "a refused create takes no memory";
    ASSERT_EQ(a.cuMemCreate(&h, g, &prop, 0), CUDA_SUCCESS);
    CUdeviceptr va = 0;
    EXPECT_EQ(a.cuMemAddressReserve(&va, 3 * g, 0, 0, 0), CUDA_ERROR_OUT_OF_MEMORY);
    ASSERT_EQ(a.cuMemAddressReserve(&va, 2 * g, 0, 0, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemMap(va, 2 * g, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // refused before any check
    ASSERT_EQ(a.cuMemMap(va, g, 0, h, 0), CUDA_SUCCESS);

    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    std::vector<unsigned char> src(32, 5);
    EXPECT_EQ(a.cuMemcpyHtoDAsync(p, src.data(), 17, s), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemcpyHtoDAsync(p, src.data(), 16, s), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    // the ledger holds exactly what succeeded: context, 2 allocations, 1 registration,
    // 1 handle, 1 reservation, 1 mapping, 1 stream
    EXPECT_EQ(a.live_objects(), 8u) << ledger();
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemUnmap(va, g), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemAddressFree(va, 2 * g), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemRelease(h), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(q), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostUnregister(small.p), CUDA_SUCCESS);
    release(0);
}

// exhaust: once N objects made by the entry are alive, its calls answer the code
// until one is destroyed; objects made before the script count too.
TEST_F(FakeCuda, ExhaustRefusesWhileNObjectsLiveAndRecoversAfterADestroy) {
    retain(0);
    CUmemAllocationProp prop = prop_for(0);
    const size_t g = 2u << 20;
    CUmemGenericAllocationHandle h[3] = {};
    ASSERT_EQ(a.cuMemCreate(&h[0], g, &prop, 0), CUDA_SUCCESS);  // before the script
    ASSERT_EQ(a.set_faults("exhaust:cuMemCreate:2:CUDA_ERROR_OUT_OF_MEMORY\n"
                           "exhaust:cuMemHostRegister:1:CUDA_ERROR_OUT_OF_MEMORY\n"
                           "exhaust:cuStreamCreate:1:CUDA_ERROR_OUT_OF_MEMORY\n"
                           "exhaust:cuEventCreate:1:CUDA_ERROR_OUT_OF_MEMORY\n"
                           "exhaust:cuMemAlloc:0:CUDA_ERROR_OUT_OF_MEMORY@2"),
              0)
        << last_error();
    ASSERT_EQ(a.cuMemCreate(&h[1], g, &prop, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemCreate(&h[2], g, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(a.cuMemCreate(&h[2], g, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY) << "until one is destroyed";
    EXPECT_EQ(a.live_objects(), 3u) << ledger();  // context and two handles
    ASSERT_EQ(a.cuMemRelease(h[0]), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemCreate(&h[2], g, &prop, 0), CUDA_SUCCESS) << "room again";
    EXPECT_EQ(a.cuMemCreate(&h[0], g, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);

    Pages x(1), y(1);
    ASSERT_EQ(a.cuMemHostRegister(x.p, x.bytes, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostRegister(y.p, y.bytes, 0), CUDA_ERROR_OUT_OF_MEMORY);
    ASSERT_EQ(a.cuMemHostUnregister(x.p), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemHostRegister(y.p, y.bytes, 0), CUDA_SUCCESS);

    CUstream s1 = nullptr, s2 = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s1, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamCreate(&s2, 0), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(s2, nullptr);
    ASSERT_EQ(a.cuStreamDestroy(s1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamCreate(&s2, 0), CUDA_SUCCESS);

    CUevent e1 = nullptr, e2 = nullptr;
    ASSERT_EQ(a.cuEventCreate(&e1, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuEventCreate(&e2, 0), CUDA_ERROR_OUT_OF_MEMORY);
    ASSERT_EQ(a.cuEventDestroy(e1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&e2, 0), CUDA_SUCCESS);

    // exhaust with N = 0 and a WHEN: only the second call is refused
    CUdeviceptr p = 0, q = 0;
    ASSERT_EQ(a.cuMemAlloc(&p, 64), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemAlloc(&q, 64), CUDA_ERROR_OUT_OF_MEMORY);
    ASSERT_EQ(a.cuMemAlloc(&q, 64), CUDA_SUCCESS);

    // context, two handles, a registration, a stream, an event, two allocations
    EXPECT_EQ(a.live_objects(), 8u) << ledger();
    EXPECT_EQ(a.cuMemFree(p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(q), CUDA_SUCCESS);
    EXPECT_EQ(a.cuEventDestroy(e2), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s2), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostUnregister(y.p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemRelease(h[1]), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemRelease(h[2]), CUDA_SUCCESS);
    release(0);
}

// exec_delay: the queued copy waits on the stream; the call returns at once.
TEST_F(FakeCuda, ExecDelayHoldsTheQueuedCopyNotTheCaller) {
    retain(0);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CUdeviceptr buf = 0;
    ASSERT_EQ(a.cuMemAlloc(&buf, 64), CUDA_SUCCESS);
    std::vector<unsigned char> one(64, 1), two(64, 2), back(64, 0);
    ASSERT_EQ(a.set_faults("exec_delay:cuMemcpyHtoDAsync:400ms@2"), 0) << last_error();
    ASSERT_EQ(a.cuMemcpyHtoDAsync(buf, one.data(), 64, s), CUDA_SUCCESS);  // call 1: no delay
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(a.cuMemcpyHtoDAsync(buf, two.data(), 64, s), CUDA_SUCCESS);
    auto returned = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(a.cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(400));
    EXPECT_LT(returned, std::chrono::milliseconds(300)) << "the caller is not held";
    ASSERT_EQ(a.cuMemcpyDtoH(back.data(), buf, 64), CUDA_SUCCESS);
    EXPECT_EQ(back, two) << "the held copy still runs";
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(buf), CUDA_SUCCESS);
    release(0);
}

TEST_F(FakeCuda, MalformedEnvironmentMakesCuInitFailWithAMessage) {
    testing::internal::CaptureStderr();
    start({{"XMC_FAKE_CUDA_FAULTS", "fail:cuBogus:1"}}, false);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(a.cuInit(0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_NE(last_error().find("cuBogus"), std::string::npos) << last_error();
    EXPECT_NE(err.find("cuBogus"), std::string::npos) << err;
    for (auto env : std::vector<std::pair<const char*, const char*>>{{"XMC_FAKE_CUDA_DEVICES", "two"},
                                                                     {"XMC_FAKE_CUDA_ORDER", "0,0"},
                                                                     {"XMC_FAKE_CUDA_MEM_BYTES", "lots"},
                                                                     {"XMC_FAKE_CUDA_ATTRS", "p9:99=0"}}) {
        testing::internal::CaptureStderr();
        start({env}, false);
        testing::internal::GetCapturedStderr();
        EXPECT_EQ(a.cuInit(0), CUDA_ERROR_INVALID_VALUE) << env.first;
        EXPECT_NE(last_error().find(env.first), std::string::npos) << last_error();
    }
    // a good script from the environment applies from the first call
    start({{"XMC_FAKE_CUDA_FAULTS", "fail:cuInit:CUDA_ERROR_NO_DEVICE@1"}}, false);
    EXPECT_EQ(a.cuInit(0), CUDA_ERROR_NO_DEVICE);
    EXPECT_EQ(a.cuInit(0), CUDA_SUCCESS);
}

// ---- ledger ----------------------------------------------------------------------------------------------

TEST_F(FakeCuda, LedgerListsEveryLiveObjectAndIsEmptyAfterCleanup) {
    EXPECT_EQ(a.live_objects(), 0u);
    retain(0);
    CUstream s = nullptr;
    CUevent e = nullptr;
    CUdeviceptr p = 0, va = 0;
    CUmemGenericAllocationHandle h = 0;
    CUmemAllocationProp prop = prop_for(0);
    Pages buf(1);
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&e, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemAlloc(&p, 100), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemHostRegister(buf.p, buf.bytes, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemAddressReserve(&va, 2u << 20, 0, 0, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemCreate(&h, 2u << 20, &prop, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemMap(va, 2u << 20, 0, h, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.live_objects(), 8u) << ledger();
    std::string l = ledger();
    for (const char* what : {"context", "stream", "event", "device allocation", "registration",
                             "address reservation", "physical handle", "mapping"})
        EXPECT_NE(l.find(what), std::string::npos) << what << "\n" << l;
    char small[16];
    EXPECT_EQ(a.ledger(small, sizeof small), l.size());
    EXPECT_EQ(std::strlen(small), sizeof small - 1);

    EXPECT_EQ(a.cuMemUnmap(va, 2u << 20), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemRelease(h), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemAddressFree(va, 2u << 20), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostUnregister(buf.p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuEventDestroy(e), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    release(0);
    EXPECT_EQ(a.live_objects(), 0u) << ledger();
    EXPECT_EQ(ledger(), "live objects: 0\n");
}

}  // namespace
