// Tests of the fake CUDA driver (test_fake_cuda.cpp says how the four files divide them): the fault
// scripts and the ledger.
#include "test_fake_cuda.hpp"

namespace {
using namespace fake_cuda_test;

// ---- faults ------------------------------------------------------------------------------------------------

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
