// Tests of the fake CUDA driver (test_fake_cuda.hpp says how they load it), in four files by part
// of the driver: here loading, devices, contexts, device memory and registration; streams and
// copies in test_fake_cuda_streams.cpp, VMM and sharing in test_fake_cuda_vmm.cpp, the fault
// scripts and the ledger in test_fake_cuda_faults.cpp.
#include "test_fake_cuda.hpp"

// Under LeakSanitizer: no leak check at the exit of a child forked from this test (the parent's
// check stays). The check locks ASan's allocator, which a parent thread (a stream worker) may have
// held at the fork: GCC 12's runtime takes no such lock around fork, and the child of
// AChildForkedAfterInitIsRefusedAndExitsCleanly hung in LeakSanitizer's LockAllocator 1 run in 7
// under load (fake_cuda timed out in ci/sanitizers). LeakSanitizer calls this hook, when the
// program defines it, before it locks anything; without a sanitizer it is never called.
static const pid_t g_test_process = getpid();
extern "C" __attribute__((visibility("default"), used)) int __lsan_is_turned_off() {
    return getpid() != g_test_process;
}

namespace {
using namespace fake_cuda_test;

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

}  // namespace
