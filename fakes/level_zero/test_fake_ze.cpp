// Tests of the fake Level Zero driver, run through the REAL loader: the test links
// libze_loader, and ctest sets ZE_ENABLE_ALT_DRIVERS to the fake (once without and
// once with the loader's validation layer). The fake's control API is reached by
// dlopen()ing that same path with RTLD_NOLOAD, which also proves that the loader
// loaded it.
//
// Tests that need another device configuration re-run this binary in a child process
// (`--xmc-child=...`) with different XMC_FAKE_ZE_* variables, because the loader reads
// the driver's devices once per process.
//
// Three files, by part of the driver: here the loader, devices, registration and the child modes;
// copies, events and virtual memory in test_fake_ze_memory.cpp; the ledger and the fault scripts
// in test_fake_ze_faults.cpp; what they share in test_fake_ze.hpp.
#include "test_fake_ze.hpp"

namespace {
using namespace fake_ze_test;

// ---------------------------------------------------------------------------------
// Loader facts.
TEST_F(FakeZe, LoaderLoadsTheFakeAndCallsItsInitTwice) {
    EXPECT_EQ(g_init_calls, 2u) << "the loader calls the driver's init once to check it, once for zeInit";
    uint32_t n = 0;
    EXPECT_EQ(zeDriverGet(&n, nullptr), ZE_RESULT_SUCCESS);
    EXPECT_EQ(n, 1u);
    ze_api_version_t v{};
    EXPECT_EQ(zeDriverGetApiVersion(g_driver, &v), ZE_RESULT_SUCCESS);
    EXPECT_EQ(ZE_MAJOR_VERSION(v), 1u);
    ze_driver_properties_t dp{};
    dp.stype = ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES;
    EXPECT_EQ(zeDriverGetProperties(g_driver, &dp), ZE_RESULT_SUCCESS);
    EXPECT_NE(dp.driverVersion, 0u);
    void* layer = dlopen("libze_validation_layer.so.1", RTLD_NOW | RTLD_NOLOAD);
    EXPECT_EQ(layer != nullptr, validation_requested()) << "validation layer loaded iff requested";
    if (layer != nullptr) dlclose(layer);
}

// The loader answers a call whose table entry the driver left null with
// ZE_RESULT_ERROR_UNSUPPORTED_FEATURE when it passes a single driver's table through
// (the default here), but with ZE_RESULT_ERROR_UNINITIALIZED when it intercepts
// (ZE_ENABLE_LOADER_INTERCEPT=1, or several drivers).
TEST_F(FakeZe, UnmodelledCallsAreUnsupportedFeature) {
    const char* intercept = std::getenv("ZE_ENABLE_LOADER_INTERCEPT");
    const ze_result_t unsupported = intercept != nullptr && std::string(intercept) == "1"
                                        ? ZE_RESULT_ERROR_UNINITIALIZED
                                        : ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
    ze_context_handle_t c = context_all();
    ze_device_mem_alloc_desc_t dd{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
    ze_host_mem_alloc_desc_t hd{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
    void* p = nullptr;
    EXPECT_EQ(zeMemAllocShared(c, &dd, &hd, 4096, 0, g_devices[0], &p), unsupported);
    uint32_t n = 0;
    EXPECT_EQ(zeDeviceGetSubDevices(g_devices[0], &n, nullptr), unsupported);
    ze_command_list_handle_t l = immediate_list(c, g_devices[0]);
    uint8_t buf[64], pattern = 7;
    EXPECT_EQ(zeCommandListAppendMemoryFill(l, buf, &pattern, 1, sizeof buf, nullptr, 0, nullptr),
              unsupported);
    EXPECT_EQ(ctl.call_count("zeMemAllocShared"), 0u);
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

// ---------------------------------------------------------------------------------
// Devices.
TEST_F(FakeZe, DevicesHaveDistinctUuidsNamesAndOneCopyGroup) {
    ze_device_properties_t a = props_of(g_devices[0]), b = props_of(g_devices[1]);
    EXPECT_NE(std::memcmp(a.uuid.id, b.uuid.id, ZE_MAX_DEVICE_UUID_SIZE), 0);
    EXPECT_EQ(a.type, ZE_DEVICE_TYPE_GPU);
    EXPECT_STREQ(a.name, "xmc fake Level Zero device 0");
    EXPECT_STREQ(b.name, "xmc fake Level Zero device 1");
    EXPECT_EQ(a.uuid.id[15], 0);
    EXPECT_EQ(b.uuid.id[15], 1);
    for (auto d : g_devices) {
        uint32_t n = 0;
        ASSERT_EQ(zeDeviceGetCommandQueueGroupProperties(d, &n, nullptr), ZE_RESULT_SUCCESS);
        ASSERT_EQ(n, 1u);
        ze_command_queue_group_properties_t g{};
        g.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
        ASSERT_EQ(zeDeviceGetCommandQueueGroupProperties(d, &n, &g), ZE_RESULT_SUCCESS);
        EXPECT_TRUE(g.flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY);
        EXPECT_TRUE(g.flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE);
        ze_device_memory_properties_t m{};
        m.stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
        n = 1;
        ASSERT_EQ(zeDeviceGetMemoryProperties(d, &n, &m), ZE_RESULT_SUCCESS);
        EXPECT_EQ(m.totalSize, uint64_t(8) << 30);
    }
}

TEST_F(FakeZe, OrderPermutationMovesDevicesWithTheirUuids) {
    EXPECT_EQ(run_child("XMC_FAKE_ZE_DEVICES=3", "order"), "0,1,2\n");
    EXPECT_EQ(run_child("XMC_FAKE_ZE_DEVICES=3 XMC_FAKE_ZE_ORDER=2,0,1", "order"), "2,0,1\n");
    EXPECT_EQ(run_child("XMC_FAKE_ZE_ORDER=1,0", "order"), "1,0\n");
}

// A driver that loads and lists no device (the absent-platform child "no device").
TEST_F(FakeZe, ZeroDevicesInitialiseAndListNone) {
    EXPECT_EQ(run_child("XMC_FAKE_ZE_DEVICES=0", "order"), "\n");
    EXPECT_NE(run_child("XMC_FAKE_ZE_DEVICES=17", "init").find("XMC_FAKE_ZE_DEVICES must be 0..16"), std::string::npos);
}

// Every call is recorded with its thread (VMM-CALLBACK is checked from the record); a
// configuration the fake took leaves no configuration error.
TEST_F(FakeZe, EveryCallIsRecordedWithItsThread) {
    ASSERT_TRUE(g_ctl_ok);
    EXPECT_STREQ(ctl.config_error(), "");
    ctl.reset_call_records();
    uint32_t n = 0;
    ASSERT_EQ(zeDeviceGet(g_driver, &n, nullptr), ZE_RESULT_SUCCESS);
    int64_t other = 0;
    std::thread([&] {
        uint32_t m = 0;
        zeDeviceGet(g_driver, &m, nullptr);
        other = static_cast<int64_t>(gettid());
    }).join();
    std::vector<xmc_fake_ze_call_record> recs(64);
    const size_t seen = ctl.call_records(recs.data(), recs.size());
    ASSERT_GE(seen, 2u);  // a loader layer may make calls of its own
    ASSERT_LE(seen, recs.size());
    std::vector<int64_t> callers;
    for (size_t i = 0; i < seen; ++i)
        if (std::string(recs[i].entry) == "zeDeviceGet") callers.push_back(recs[i].tid);
    EXPECT_EQ(callers, (std::vector<int64_t>{static_cast<int64_t>(gettid()), other}));
    EXPECT_NE(other, static_cast<int64_t>(gettid()));
}

TEST_F(FakeZe, MalformedEnvironmentFailsInitWithAMessage) {
    std::string out = run_child("XMC_FAKE_ZE_ORDER=0,0", "init");
    // With a single driver the loader returns that driver's init result.
    EXPECT_NE(out.find("XMC_FAKE_ZE_ORDER"), std::string::npos) << out;
    EXPECT_NE(out.find("zeInit=0x78000004"), std::string::npos) << out;
    out = run_child("XMC_FAKE_ZE_FAULTS='fail:zeMemFree:ZE_RESULT_ERROR_BOGUS@1'", "init");
    EXPECT_NE(out.find("XMC_FAKE_ZE_FAULTS"), std::string::npos) << out;
    EXPECT_NE(out.find("zeInit=0x78000004"), std::string::npos) << out;
    // The old form is refused at init too, naming the new one.
    out = run_child("XMC_FAKE_ZE_FAULTS='zeMemFree:2:ZE_RESULT_ERROR_DEVICE_LOST'", "init");
    EXPECT_NE(out.find("write 'fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@2'"), std::string::npos) << out;
    EXPECT_NE(out.find("zeInit=0x78000004"), std::string::npos) << out;
    out = run_child("XMC_FAKE_ZE_FAULTS='fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@2'", "init");
    EXPECT_EQ(out, "zeInit=0x0\n");
}

TEST_F(FakeZe, ExternalMemmapExtensionIsListed) {
    uint32_t n = 0;
    ASSERT_EQ(zeDriverGetExtensionProperties(g_driver, &n, nullptr), ZE_RESULT_SUCCESS);
    std::vector<ze_driver_extension_properties_t> ext(n);
    ASSERT_EQ(zeDriverGetExtensionProperties(g_driver, &n, ext.data()), ZE_RESULT_SUCCESS);
    bool found = false;
    for (const auto& e : ext)
        found = found || (std::string(e.name) == "ZE_extension_external_memmap_sysmem" &&
                          e.version == ZE_MAKE_VERSION(1, 0));
    EXPECT_TRUE(found);
}

// ---------------------------------------------------------------------------------
// Registration.
TEST_F(FakeZe, RegistrationInAOneDeviceContextIsIdentityAndUsableOnThatDevice) {
    for (ze_device_handle_t d : g_devices) {
        ze_context_handle_t c = context_for({d});
        Pages host(4 * kPage), back(4 * kPage);
        fill_pattern(host.p, host.n, 1);
        void* mapped = nullptr;
        ASSERT_EQ(register_host(c, host.p, host.n, &mapped), ZE_RESULT_SUCCESS);
        EXPECT_EQ(mapped, host.p) << "identity mapping";
        ze_memory_allocation_properties_t mp{};
        mp.stype = ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES;
        EXPECT_EQ(zeMemGetAllocProperties(c, host.p + 100, &mp, nullptr), ZE_RESULT_SUCCESS);
        EXPECT_EQ(mp.type, ZE_MEMORY_TYPE_HOST);
        void* base = nullptr;
        size_t size = 0;
        EXPECT_EQ(zeMemGetAddressRange(c, host.p + 100, &base, &size), ZE_RESULT_SUCCESS);
        EXPECT_EQ(base, host.p);
        EXPECT_EQ(size, host.n);

        ze_command_list_handle_t l = immediate_list(c, d);
        void* dev = device_alloc(c, d, host.n);
        EXPECT_EQ(copy_and_wait(c, l, dev, host.p, host.n), ZE_RESULT_SUCCESS);      // from registered
        EXPECT_EQ(copy_and_wait(c, l, host.p, back.p, kPage), ZE_RESULT_SUCCESS);    // into registered
        EXPECT_EQ(copy_and_wait(c, l, back.p, dev, host.n), ZE_RESULT_SUCCESS);
        EXPECT_EQ(std::memcmp(back.p + kPage, host.p + kPage, host.n - kPage), 0);
        EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
        EXPECT_EQ(zeMemFree(c, dev), ZE_RESULT_SUCCESS);
        EXPECT_EQ(zeMemFree(c, mapped), ZE_RESULT_SUCCESS);
        EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
        host.p[0] = 1;  // the host pages are still the caller's
    }
}

TEST_F(FakeZe, RegistrationInATwoDeviceContextIsMappedOnlyForTheFirstDevice) {
    ze_context_handle_t c = context_all();
    Pages host(2 * kPage, 0x5a), other(2 * kPage);
    void* mapped = nullptr;
    ASSERT_EQ(register_host(c, host.p, host.n, &mapped), ZE_RESULT_SUCCESS);
    ze_command_list_handle_t l0 = immediate_list(c, g_devices[0]);
    ze_command_list_handle_t l1 = immediate_list(c, g_devices[1]);
    void* d0 = device_alloc(c, g_devices[0], host.n);
    void* d1 = device_alloc(c, g_devices[1], host.n);
    EXPECT_EQ(copy_and_wait(c, l0, d0, host.p, host.n), ZE_RESULT_SUCCESS);
    EXPECT_EQ(copy_and_wait(c, l1, d1, host.p, host.n), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    EXPECT_EQ(copy_and_wait(c, l1, host.p + kPage, d1, 16), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    // Plain host allocations and pageable memory work on every device of the context.
    void* plain = nullptr;
    ze_host_mem_alloc_desc_t hd{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
    ASSERT_EQ(zeMemAllocHost(c, &hd, host.n, 64, &plain), ZE_RESULT_SUCCESS);
    EXPECT_EQ(copy_and_wait(c, l1, d1, plain, host.n), ZE_RESULT_SUCCESS);
    EXPECT_EQ(copy_and_wait(c, l1, d1, other.p, other.n), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, plain), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, mapped), ZE_RESULT_SUCCESS);

    // A context listing device 1 first still maps for the device that zeDeviceGet lists
    // first; a one-device context maps for its device.
    ze_context_handle_t c10 = context_for({g_devices[1], g_devices[0]});
    ASSERT_EQ(register_host(c10, host.p, host.n, &mapped), ZE_RESULT_SUCCESS);
    EXPECT_EQ(copy_and_wait(c, l1, d1, host.p, host.n), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    EXPECT_EQ(copy_and_wait(c, l0, d0, host.p, host.n), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c10, mapped), ZE_RESULT_SUCCESS);
    ze_context_handle_t c1 = context_for({g_devices[1]});
    ASSERT_EQ(register_host(c1, host.p, host.n, &mapped), ZE_RESULT_SUCCESS);
    EXPECT_EQ(copy_and_wait(c, l1, d1, host.p, host.n), ZE_RESULT_SUCCESS);
    EXPECT_EQ(copy_and_wait(c, l0, d0, host.p, host.n), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    EXPECT_EQ(zeMemFree(c, mapped), ZE_RESULT_ERROR_INVALID_ARGUMENT) << "freed in another context";
    EXPECT_EQ(zeMemFree(c1, mapped), ZE_RESULT_SUCCESS);

    EXPECT_EQ(zeCommandListDestroy(l0), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeCommandListDestroy(l1), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, d0), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, d1), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c1), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c10), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, OverlappingMisalignedAndUnmappedRegistrationsAreRefused) {
    ze_context_handle_t c = context_for({g_devices[0]});
    Pages host(8 * kPage);
    void* a = nullptr;
    void* b = nullptr;
    ASSERT_EQ(register_host(c, host.p + 2 * kPage, 2 * kPage, &a), ZE_RESULT_SUCCESS);
    EXPECT_EQ(register_host(c, host.p + 2 * kPage, 2 * kPage, &b), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    EXPECT_EQ(register_host(c, host.p + 3 * kPage, 2 * kPage, &b), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    EXPECT_EQ(register_host(c, host.p + kPage, 2 * kPage, &b), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    EXPECT_EQ(register_host(c, host.p, 8 * kPage, &b), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    EXPECT_EQ(register_host(c, host.p + 100, kPage, &b), ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT);
    EXPECT_EQ(register_host(c, host.p, kPage + 100, &b), ZE_RESULT_ERROR_UNSUPPORTED_SIZE);
    ASSERT_EQ(register_host(c, host.p, 2 * kPage, &b), ZE_RESULT_SUCCESS) << "adjacent is fine";
    EXPECT_EQ(zeMemFree(c, host.p + 2 * kPage + kPage), ZE_RESULT_ERROR_INVALID_ARGUMENT) << "interior pointer";
    EXPECT_EQ(zeMemFree(c, a), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, a), ZE_RESULT_ERROR_INVALID_ARGUMENT) << "second free";
    EXPECT_EQ(zeMemFree(c, b), ZE_RESULT_SUCCESS);
    // Memory that is not mapped in the process cannot be registered.
    void* hole = mmap(nullptr, 2 * kPage, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(hole, MAP_FAILED);
    munmap(hole, 2 * kPage);
    EXPECT_EQ(register_host(c, hole, 2 * kPage, &b), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, InjectedMemFreeFailureKeepsTheRegistration) {
    ze_context_handle_t c = context_for({g_devices[0]});
    Pages host(2 * kPage, 1), dst(2 * kPage);
    void* mapped = nullptr;
    ASSERT_EQ(register_host(c, host.p, host.n, &mapped), ZE_RESULT_SUCCESS);
    ASSERT_EQ(ctl.set_faults("fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@1"), 0) << ctl.fault_error();
    EXPECT_EQ(zeMemFree(c, mapped), ZE_RESULT_ERROR_DEVICE_LOST);
    EXPECT_EQ(ctl.live_objects(), 2u) << ledger_text();  // context + registration
    EXPECT_NE(ledger_text().find("registration"), std::string::npos);
    ze_command_list_handle_t l = immediate_list(c, g_devices[0]);
    EXPECT_EQ(copy_and_wait(c, l, dst.p, host.p, host.n), ZE_RESULT_SUCCESS) << "still mapped";
    EXPECT_EQ(zeMemFree(c, mapped), ZE_RESULT_SUCCESS) << "the retry succeeds";
    EXPECT_EQ(ctl.call_count("zeMemFree"), 2u);
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, FaultScriptNonIdentityEveryCallNumericCodeAndDelay) {
    ze_context_handle_t c = context_for({g_devices[0]});
    Pages host(2 * kPage);
    ASSERT_EQ(ctl.set_faults("nonidentity:zeMemAllocHost@1 ; fail:zeContextCreate:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY@2+\n"
                             "fail:zeEventPoolCreate:0x70000002 # every call\ndelay:zeContextDestroy:50ms@1"),
              0)
        << ctl.fault_error();
    void* mapped = nullptr;
    ASSERT_EQ(register_host(c, host.p, host.n, &mapped), ZE_RESULT_SUCCESS);
    EXPECT_NE(mapped, host.p) << "non-identity mapping";
    EXPECT_EQ(zeMemFree(c, mapped), ZE_RESULT_SUCCESS);
    ASSERT_EQ(register_host(c, host.p, host.n, &mapped), ZE_RESULT_SUCCESS);
    EXPECT_EQ(mapped, host.p) << "only the first call";
    EXPECT_EQ(zeMemFree(c, mapped), ZE_RESULT_SUCCESS);

    ze_context_desc_t cd{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    ze_context_handle_t c2 = nullptr, c3 = nullptr;
    EXPECT_EQ(zeContextCreate(g_driver, &cd, &c2), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextCreate(g_driver, &cd, &c3), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    EXPECT_EQ(zeContextCreate(g_driver, &cd, &c3), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    ze_event_pool_desc_t pd{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr, 0, 1};
    ze_event_pool_handle_t pool = nullptr;
    EXPECT_EQ(zeEventPoolCreate(c, &pd, 0, nullptr, &pool), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(zeContextDestroy(c2), ZE_RESULT_SUCCESS);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
    EXPECT_EQ(ctl.call_count("zeContextCreate"), 3u);

    // exec_delay holds the appended command back on the device, not the caller.
    ASSERT_EQ(ctl.set_faults("exec_delay:zeCommandListAppendMemoryCopy:60ms@2"), 0) << ctl.fault_error();
    ze_command_list_handle_t l = immediate_list(c, g_devices[0]);
    std::vector<uint8_t> a(64, 3), b(64, 0);
    {
        Events e(c, 1);
        EXPECT_EQ(copy_and_wait(c, l, b.data(), a.data(), a.size()), ZE_RESULT_SUCCESS);  // call 1: no delay
        t0 = std::chrono::steady_clock::now();
        ASSERT_EQ(zeCommandListAppendMemoryCopy(l, b.data(), a.data(), a.size(), e[0], 0, nullptr), ZE_RESULT_SUCCESS);
        ASSERT_EQ(zeEventHostSynchronize(e[0], UINT64_MAX), ZE_RESULT_SUCCESS);
        EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(60));
    }
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, MalformedFaultScriptsAreRejectedWithAReason) {
    ASSERT_EQ(ctl.set_faults("fail:zeContextCreate:ZE_RESULT_ERROR_DEVICE_LOST@1"), 0);
    const char* bad[] = {
        "zeMemFree",
        "fail:zeMemFree",
        "fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@0",
        "fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@-1",
        "fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@x",
        "fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@99999999999999999999999",
        "fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@*",
        "fail:zeNoSuchCall:ZE_RESULT_ERROR_DEVICE_LOST",
        "fail:zeMemAllocShared:ZE_RESULT_ERROR_DEVICE_LOST",
        "fail:zeMemFree:ZE_RESULT_ERROR_NOPE",
        "fail:zeMemFree:0x1ffffffff",
        "fail:zeMemFree:ZE_RESULT_SUCCESS",
        "nonidentity:zeMemFree",
        "nonidentity:zeMemAllocHost:4096",
        "exec_delay:zeMemFree:5ms",
        "delay:zeMemFree:",
        "delay:zeMemFree:20",
        "delay:zeMemFree:601s",
        "size_limit:zeMemFree:1G:ZE_RESULT_ERROR_UNSUPPORTED_SIZE",
        "exhaust:zeMemFree:1:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY",
        "zeMemFree:1:ZE_RESULT_ERROR_DEVICE_LOST",
        ":::",
        "fail:zeMemFree:ZE_RESULT_ERROR_UNKNOWN; garbage",
        "\x01\x02\xff:1:2",
    };
    for (const char* s : bad) {
        EXPECT_EQ(ctl.set_faults(s), -1) << s;
        EXPECT_NE(std::string(ctl.fault_error()).find("rule "), std::string::npos) << s;
    }
    std::string why = ctl.fault_error();
    EXPECT_NE(why.find("rule 1"), std::string::npos) << why;
    // The previous script is still in force.
    ze_context_desc_t cd{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    ze_context_handle_t c = nullptr;
    EXPECT_EQ(zeContextCreate(g_driver, &cd, &c), ZE_RESULT_ERROR_DEVICE_LOST);
    EXPECT_EQ(ctl.set_faults(nullptr), 0);
    EXPECT_STREQ(ctl.fault_error(), "");
    EXPECT_EQ(ctl.set_faults(" ; \n ;"), 0);
    EXPECT_EQ(zeContextCreate(g_driver, &cd, &c), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, ConcurrentRegistrationsOfDisjointRangesStayConsistent) {
    ze_context_handle_t c = context_for({g_devices[0]});
    constexpr int kThreads = 4, kRounds = 200;
    Pages host(kThreads * 2 * kPage);
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < kRounds; ++i) {
                void* m = nullptr;
                if (register_host(c, host.p + t * 2 * kPage, 2 * kPage, &m) != ZE_RESULT_SUCCESS ||
                    zeMemFree(c, m) != ZE_RESULT_SUCCESS)
                    ++failures;
            }
        });
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

// ---------------------------------------------------------------------------------
// Child modes (see run_child).
int child_main(const std::string& mode) {
    std::setvbuf(stdout, nullptr, _IONBF, 0);  // output survives any abnormal exit
    ze_result_t r = zeInit(ZE_INIT_FLAG_GPU_ONLY);
    if (mode == "init") {
        std::printf("zeInit=0x%x\n", static_cast<unsigned>(r));
        return 0;
    }
    if (r != ZE_RESULT_SUCCESS) {
        std::printf("zeInit failed 0x%x\n", static_cast<unsigned>(r));
        return 1;
    }
    uint32_t n = 1;
    ze_driver_handle_t drv = nullptr;
    zeDriverGet(&n, &drv);
    uint32_t nd = 0;
    zeDeviceGet(drv, &nd, nullptr);
    std::vector<ze_device_handle_t> devs(nd);
    zeDeviceGet(drv, &nd, devs.data());
    std::string out;
    for (auto d : devs) {
        ze_device_properties_t p{};
        p.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
        zeDeviceGetProperties(d, &p);
        // The UUID's last byte and the name's number both name the native device.
        std::string name = p.name;
        if (name.back() - '0' != p.uuid.id[15]) return 2;
        out += (out.empty() ? "" : ",") + std::to_string(p.uuid.id[15]);
    }
    std::printf("%s\n", out.c_str());
    return 0;
}

}  // namespace


int main(int argc, char** argv) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    g_self.assign(self, n > 0 ? static_cast<size_t>(n) : 0);
    for (int i = 1; i < argc; ++i)
        if (std::strncmp(argv[i], "--xmc-child=", 12) == 0) return child_main(argv[i] + 12);
    ::testing::InitGoogleTest(&argc, argv);
    init_process();
    return RUN_ALL_TESTS();
}
