// Tests of libxmc_cuda_interpose.so over the fake driver as its "real" one (no GPU here):
// forwarding, scripted failures answered without calling the driver, the ledger after open and
// close, and the bad inputs (an entry it does not forward, a malformed script, no real driver),
// each seen as the backend sees them: dlopen by path and dlsym of cuda.h's versioned names.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fake_cuda_control.h"

namespace {

#define STR2(x) #x
#define STR(x) STR2(x)

#define ENTRIES(X)                                                                                        \
    X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) \
    X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuMemAlloc) X(cuMemFree) X(cuMemHostRegister)                \
    X(cuMemHostUnregister) X(cuMemHostGetDevicePointer) X(cuStreamCreate) X(cuStreamDestroy)              \
    X(cuStreamSynchronize) X(cuStreamQuery) X(cuEventCreate) X(cuEventDestroy) X(cuLaunchHostFunc)        \
    X(cuMemcpyHtoDAsync) X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) X(cuMemAddressFree)      \
    X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuGetErrorName)

struct Api {
#define MEMBER(name) decltype(&::name) name = nullptr;
    ENTRIES(MEMBER)
#undef MEMBER
    decltype(&xmc_fake_cuda_set_faults) set_faults = nullptr;
    decltype(&xmc_fake_cuda_last_error) last_error = nullptr;
    decltype(&xmc_fake_cuda_ledger) ledger = nullptr;
    decltype(&xmc_fake_cuda_live_objects) live_objects = nullptr;
    decltype(&xmc_fake_cuda_second_releases) second_releases = nullptr;
    decltype(&xmc_fake_cuda_call_count) call_count = nullptr;
    decltype(&xmc_fake_cuda_call_records) call_records = nullptr;
    decltype(&xmc_fake_cuda_reset_call_records) reset_call_records = nullptr;
    void* handle = nullptr;
};

Api load(const char* path, int flags) {
    Api x;
    x.handle = dlopen(path, flags);
    if (x.handle == nullptr) return x;
#define RESOLVE(name) x.name = reinterpret_cast<decltype(x.name)>(dlsym(x.handle, STR(name)));
    ENTRIES(RESOLVE)
#undef RESOLVE
#define CONTROL(member, sym) x.member = reinterpret_cast<decltype(x.member)>(dlsym(x.handle, #sym));
    CONTROL(set_faults, xmc_fake_cuda_set_faults)
    CONTROL(last_error, xmc_fake_cuda_last_error)
    CONTROL(ledger, xmc_fake_cuda_ledger)
    CONTROL(live_objects, xmc_fake_cuda_live_objects)
    CONTROL(second_releases, xmc_fake_cuda_second_releases)
    CONTROL(call_count, xmc_fake_cuda_call_count)
    CONTROL(call_records, xmc_fake_cuda_call_records)
    CONTROL(reset_call_records, xmc_fake_cuda_reset_call_records)
#undef CONTROL
    return x;
}

// The interposer (as the backend loads it) and, beneath it, the fake it forwards to (already
// loaded by the interposer: RTLD_NOLOAD finds that copy).
Api& ip() {
    static Api a = [] {
        setenv("XMC_CUDA_INTERPOSE_REAL", XMC_FAKE_CUDA_PATH, 1);
        Api x = load(XMC_CUDA_INTERPOSE_PATH, RTLD_NOW | RTLD_LOCAL);
        if (x.handle == nullptr) {
            std::fprintf(stderr, "dlopen(%s): %s\n", XMC_CUDA_INTERPOSE_PATH, dlerror());
            std::abort();
        }
        return x;
    }();
    return a;
}
Api& fake() {
    static Api a = [] {
        ip();
        Api x = load(XMC_FAKE_CUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
        if (x.handle == nullptr) std::abort();
        return x;
    }();
    return a;
}

std::string text(size_t (*f)(char*, size_t)) {
    std::vector<char> b(f(nullptr, 0) + 1);
    f(b.data(), b.size());
    return b.data();
}

// The fixture: the driver initialised, device 0's primary context current; at the end, the
// rules cleared and nothing left in the ledger but the context.
class Interpose : public ::testing::Test {
protected:
    void SetUp() override {
        Api& a = ip();
        ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
        ASSERT_EQ(a.cuDeviceGet(&dev_, 0), CUDA_SUCCESS);
        ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&ctx_, dev_), CUDA_SUCCESS);
        ASSERT_EQ(a.cuCtxPushCurrent(ctx_), CUDA_SUCCESS);
        base_ = a.live_objects();
    }
    void TearDown() override {
        Api& a = ip();
        EXPECT_EQ(a.set_faults(""), 0);
        EXPECT_EQ(a.live_objects(), base_) << text(a.ledger);
        CUcontext popped = nullptr;
        EXPECT_EQ(a.cuCtxPopCurrent(&popped), CUDA_SUCCESS);
        EXPECT_EQ(a.cuDevicePrimaryCtxRelease(dev_), CUDA_SUCCESS);
    }
    CUdevice dev_ = 0;
    CUcontext ctx_ = nullptr;
    size_t base_ = 0;
};

TEST(InterposeLoad, ControlApiIsTheInterposersNotTheFakesBeneath) {
    // The harness dlsyms the control API from the handle of the library the backend loaded:
    // there it must find the interposer's, though the fake's are in the process too.
    ASSERT_NE(ip().set_faults, nullptr);
    ASSERT_NE(fake().set_faults, nullptr);
    EXPECT_NE(reinterpret_cast<void*>(ip().set_faults), reinterpret_cast<void*>(fake().set_faults));
    EXPECT_NE(reinterpret_cast<void*>(ip().cuMemAlloc), reinterpret_cast<void*>(fake().cuMemAlloc));
    EXPECT_NE(dlsym(ip().handle, "xmc_cuda_interpose_real_driver"), nullptr);
    // An entry point the backend never resolves is not exported (so not forwarded blindly).
    EXPECT_EQ(dlsym(ip().handle, "cuCtxCreate_v2"), nullptr);
}

TEST_F(Interpose, ForwardsEveryCallAndCountsIt) {
    Api &a = ip(), &f = fake();
    const uint64_t mine = a.call_count("cuMemAlloc"), beneath = f.call_count("cuMemAlloc");
    CUdeviceptr p = 0;
    ASSERT_EQ(a.cuMemAlloc(&p, 4096), CUDA_SUCCESS);
    EXPECT_EQ(a.call_count("cuMemAlloc_v2"), mine + 1);
    EXPECT_EQ(f.call_count("cuMemAlloc"), beneath + 1) << "the call did not reach the driver";
    int n = 0;
    EXPECT_EQ(a.cuDeviceGetCount(&n), CUDA_SUCCESS);
    EXPECT_EQ(n, 2);  // the fake's default
    const char* name = nullptr;
    EXPECT_EQ(a.cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &name), CUDA_SUCCESS);
    EXPECT_STREQ(name, "CUDA_ERROR_OUT_OF_MEMORY");
    EXPECT_EQ(a.cuMemFree(p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(p), CUDA_ERROR_INVALID_VALUE) << "the driver's own answer comes back";
}

TEST_F(Interpose, ScriptedFailureIsAnsweredWithoutCallingTheDriver) {
    Api &a = ip(), &f = fake();
    ASSERT_EQ(a.set_faults("fail:cuMemAlloc:CUDA_ERROR_OUT_OF_MEMORY@2"), 0);
    const uint64_t beneath = f.call_count("cuMemAlloc");
    CUdeviceptr p1 = 0, p2 = 0, p3 = 0;
    ASSERT_EQ(a.cuMemAlloc(&p1, 4096), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemAlloc(&p2, 4096), CUDA_ERROR_OUT_OF_MEMORY);
    ASSERT_EQ(a.cuMemAlloc(&p3, 4096), CUDA_SUCCESS);
    EXPECT_EQ(f.call_count("cuMemAlloc"), beneath + 2) << "the failed call reached the driver";
    EXPECT_EQ(a.live_objects(), base_ + 2) << "a failed call entered the ledger:\n" << text(a.ledger);
    EXPECT_EQ(a.cuMemFree(p1), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(p3), CUDA_SUCCESS);
}

TEST_F(Interpose, SizeLimitExhaustAndDelay) {
    Api& a = ip();
    ASSERT_EQ(a.set_faults("size_limit:cuMemAlloc:64K:CUDA_ERROR_INVALID_VALUE; exhaust:cuStreamCreate:1:2; "
                           "delay:cuStreamQuery:30ms@1"),
              0);
    CUdeviceptr p = 0;
    EXPECT_EQ(a.cuMemAlloc(&p, 128 << 10), CUDA_ERROR_INVALID_VALUE);
    ASSERT_EQ(a.cuMemAlloc(&p, 64 << 10), CUDA_SUCCESS);
    CUstream s1 = nullptr, s2 = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s1, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamCreate(&s2, 0), CUDA_ERROR_OUT_OF_MEMORY) << "one stream alive: exhausted";
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(a.cuStreamQuery(s1), CUDA_SUCCESS);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(30));
    EXPECT_EQ(a.cuStreamDestroy(s1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamCreate(&s2, 0), CUDA_SUCCESS) << "one destroyed: no longer exhausted";
    EXPECT_EQ(a.cuStreamDestroy(s2), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(p), CUDA_SUCCESS);
}

TEST_F(Interpose, ExecDelayHoldsTheCopyBackOnItsStream) {
    Api& a = ip();
    CUstream s = nullptr;
    CUdeviceptr d = 0;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemAlloc(&d, 4096), CUDA_SUCCESS);
    std::vector<char> src(4096, 7);
    ASSERT_EQ(a.set_faults("exec_delay:cuMemcpyHtoDAsync:150ms@1"), 0);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(a.cuMemcpyHtoDAsync(d, src.data(), src.size(), s), CUDA_SUCCESS);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100)) << "the call itself waited";
    EXPECT_EQ(a.cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    EXPECT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150));
    EXPECT_EQ(a.cuMemFree(d), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST_F(Interpose, LedgerListsWhatIsOpenUntilItIsClosed) {
    Api& a = ip();
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* host = mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(host, MAP_FAILED);
    CUdeviceptr dptr = 0, va = 0;
    CUstream s = nullptr;
    CUevent e = nullptr;
    ASSERT_EQ(a.cuMemHostRegister(host, 4 * page, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemAlloc(&dptr, 8192), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuEventCreate(&e, 0), CUDA_SUCCESS);
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    ASSERT_EQ(a.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CUmemGenericAllocationHandle h = 0;
    ASSERT_EQ(a.cuMemAddressReserve(&va, gran, 0, 0, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemCreate(&h, gran, &prop, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemMap(va, gran, 0, h, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.live_objects(), base_ + 7) << text(a.ledger);
    const std::string ledger = text(a.ledger);
    char key[64];
    std::snprintf(key, sizeof key, "registration 0x%llx, %zu bytes, flags 0x%x, device 0,",
                  static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(host)), 4 * page,
                  unsigned{CU_MEMHOSTREGISTER_DEVICEMAP});
    EXPECT_NE(ledger.find(key), std::string::npos) << "the harness finds a registration's device by this line:\n"
                                                   << ledger;
    // Released while mapped: gone for the program, freed with its mapping.
    ASSERT_EQ(a.cuMemRelease(h), CUDA_SUCCESS);
    EXPECT_EQ(a.live_objects(), base_ + 6) << text(a.ledger);
    EXPECT_NE(text(a.ledger).find(": released,"), std::string::npos);
    const size_t second = a.second_releases();
    EXPECT_EQ(a.cuMemUnmap(va, gran), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemUnmap(va, gran), CUDA_SUCCESS);  // answered success by the driver: only the count shows it
    EXPECT_NE(a.cuMemRelease(h), CUDA_SUCCESS);
    EXPECT_EQ(a.second_releases(), second + 2) << "VMM-DOUBLE: a second unmap and a second release";
    EXPECT_EQ(a.cuMemAddressFree(va, gran), CUDA_SUCCESS);
    EXPECT_EQ(a.cuEventDestroy(e), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(dptr), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemHostUnregister(host), CUDA_SUCCESS);
    munmap(host, 4 * page);
}

TEST_F(Interpose, NonIdentityRegistrationIsReportedMoved) {
    Api& a = ip();
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* host = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_EQ(a.set_faults("nonidentity:cuMemHostRegister:0x10000@1"), 0);
    ASSERT_EQ(a.cuMemHostRegister(host, page, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_SUCCESS);
    CUdeviceptr d = 0;
    ASSERT_EQ(a.cuMemHostGetDevicePointer(&d, host, 0), CUDA_SUCCESS);
    EXPECT_EQ(d, reinterpret_cast<uintptr_t>(host) + 0x10000);
    EXPECT_EQ(a.cuMemHostUnregister(host), CUDA_SUCCESS);
    munmap(host, page);
}

TEST_F(Interpose, HostFunctionCallsAreRecordedAsSuch) {
    Api& a = ip();
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    a.reset_call_records();
    struct Ctx {
        Api* a;
        CUstream s;
        CUresult got;
    } c{&a, s, CUDA_SUCCESS};
    ASSERT_EQ(a.cuLaunchHostFunc(
                  s, [](void* p) { auto* x = static_cast<Ctx*>(p); x->got = x->a->cuStreamQuery(x->s); }, &c),
              CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_EQ(c.got, CUDA_ERROR_NOT_PERMITTED) << "the driver beneath refuses it";
    std::vector<xmc_fake_cuda_call_record> recs(16);
    const size_t n = a.call_records(recs.data(), recs.size());
    bool inside = false;
    for (size_t i = 0; i < n && i < recs.size(); ++i)
        inside |= std::strcmp(recs[i].entry, "cuStreamQuery") == 0 && recs[i].in_host_callback;
    EXPECT_TRUE(inside) << "the query made inside the host function is not recorded as such";
    EXPECT_EQ(a.cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(InterposeBadInput, ScriptNamingAnEntryNotForwardedIsRefused) {
    Api& a = ip();
    // cuCtxCreate: the fake implements it, the interposer does not forward it.
    EXPECT_EQ(a.set_faults("fail:cuMemAlloc:2@1; fail:cuCtxCreate:CUDA_ERROR_UNKNOWN"), -1);
    const std::string err = text(a.last_error);
    EXPECT_NE(err.find("rule 2 'fail:cuCtxCreate:CUDA_ERROR_UNKNOWN': unknown entry point 'cuCtxCreate'"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("interposer"), std::string::npos) << err;
    EXPECT_EQ(a.set_faults("fail:cuMemAlloc"), -1) << "a malformed rule";
    EXPECT_EQ(a.set_faults(""), 0);
}

// A child process that loads the interposer with `env` set, calls cuInit and prints what came
// back; its stderr is the load's message.
std::string child(const std::string& env) {
    const std::string cmd = env + " '/proc/" + std::to_string(getpid()) + "/exe' --load-and-init 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    while (p && fgets(buf, sizeof buf, p)) out += buf;
    if (p) pclose(p);
    return out;
}

TEST(InterposeBadInput, MalformedScriptAtLoadFailsEveryCallWithTheMessage) {
    const std::string out = child(std::string("XMC_CUDA_INTERPOSE_REAL='") + XMC_FAKE_CUDA_PATH +
                                  "' XMC_FAKE_CUDA_FAULTS='fail:cuMemAlloc:NOT_A_CODE@1'");
    EXPECT_NE(out.find("XMC_FAKE_CUDA_FAULTS: rule 1 'fail:cuMemAlloc:NOT_A_CODE@1'"), std::string::npos) << out;
    EXPECT_NE(out.find("cuInit=" + std::to_string(CUDA_ERROR_INVALID_VALUE) + " "), std::string::npos) << "CUDA_ERROR_INVALID_VALUE\n" << out;
}

TEST(InterposeBadInput, UnknownEntryAtLoadFailsEveryCallWithTheMessage) {
    const std::string out = child(std::string("XMC_CUDA_INTERPOSE_REAL='") + XMC_FAKE_CUDA_PATH +
                                  "' XMC_FAKE_CUDA_FAULTS='fail:cuCtxCreate:2'");
    EXPECT_NE(out.find("unknown entry point 'cuCtxCreate'"), std::string::npos) << out;
    EXPECT_NE(out.find("cuInit=" + std::to_string(CUDA_ERROR_INVALID_VALUE) + " "), std::string::npos) << out;
}

TEST(InterposeBadInput, MissingRealDriverFailsEveryCallWithTheMessage) {
    const std::string out = child("XMC_CUDA_INTERPOSE_REAL=/nonexistent/libcuda.so.1");
    EXPECT_NE(out.find("no real driver: dlopen(/nonexistent/libcuda.so.1) failed"), std::string::npos) << out;
    EXPECT_NE(out.find("cuInit=" + std::to_string(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED) + " "), std::string::npos) << "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED\n" << out;
    EXPECT_NE(out.find("last_error=no real driver"), std::string::npos) << out;
}

TEST(InterposeBadInput, TheInterposerOverItselfIsRefused) {
    const std::string out = child(std::string("XMC_CUDA_INTERPOSE_REAL='") + XMC_CUDA_INTERPOSE_PATH + "'");
    EXPECT_NE(out.find("is the interposer itself"), std::string::npos) << out;
    EXPECT_NE(out.find("cuInit=" + std::to_string(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED) + " "), std::string::npos) << out;
}

TEST(InterposeBadInput, ALibraryThatIsNoDriverIsRefused) {
    const std::string out = child("XMC_CUDA_INTERPOSE_REAL=libm.so.6");
    EXPECT_NE(out.find("libm.so.6 is not a CUDA driver: it does not export cuInit"), std::string::npos) << out;
    EXPECT_NE(out.find("cuInit=" + std::to_string(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED) + " "), std::string::npos) << out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 2 && std::strcmp(argv[1], "--load-and-init") == 0) {
        Api a = load(XMC_CUDA_INTERPOSE_PATH, RTLD_NOW | RTLD_LOCAL);
        if (!a.handle || !a.cuInit) return 2;
        std::printf("cuInit=%d last_error=%s\n", static_cast<int>(a.cuInit(0)), text(a.last_error).c_str());
        return 0;
    }
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
