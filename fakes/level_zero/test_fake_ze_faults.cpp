// Tests of the fake Level Zero driver (test_fake_ze.cpp says how the files divide them): the ledger,
// device memory and the fault scripts.
#include "test_fake_ze.hpp"

namespace {
using namespace fake_ze_test;

// ---------------------------------------------------------------------------------
// Ledger and device memory.
TEST_F(FakeZe, LedgerListsLiveObjectsAndIsEmptyAfterCleanup) {
    ze_device_handle_t d = g_devices[0];
    ze_context_handle_t c = context_for({d});
    Pages host(kPage);
    void* reg = nullptr;
    ASSERT_EQ(register_host(c, host.p, host.n, &reg), ZE_RESULT_SUCCESS);
    void* plain = nullptr;
    ze_host_mem_alloc_desc_t hd{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
    ASSERT_EQ(zeMemAllocHost(c, &hd, 100, 0, &plain), ZE_RESULT_SUCCESS);
    void* dev = device_alloc(c, d, 1 << 20);
    ze_command_list_handle_t l = immediate_list(c, d);
    void* va = nullptr;
    ASSERT_EQ(zeVirtualMemReserve(c, kHint, kVmPage, &va), ZE_RESULT_SUCCESS);
    ze_physical_mem_desc_t pd{ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, nullptr, 0, kVmPage};
    ze_physical_mem_handle_t pm = nullptr;
    ASSERT_EQ(zePhysicalMemCreate(c, d, &pd, &pm), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeVirtualMemMap(c, va, kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE), ZE_RESULT_SUCCESS);
    {
        Events e(c, 2);
        // context, registration, host, device, list, reservation, physical, mapping,
        // pool, 2 events
        EXPECT_EQ(ctl.live_objects(), 11u) << ledger_text();
        std::string text = ledger_text();
        for (const char* word : {"context", "registration", "host allocation", "device allocation",
                                 "immediate command list", "reservation", "physical memory", "mapping", "event pool",
                                 "event "})
            EXPECT_NE(text.find(word), std::string::npos) << word << "\n" << text;
        EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE);
    }
    EXPECT_EQ(static_cast<uint64_t>(ctl.device_free_memory(0)), (uint64_t(8) << 30) - (1 << 20) - kVmPage);
    EXPECT_EQ(zeVirtualMemUnmap(c, va, kVmPage), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zePhysicalMemDestroy(c, pm), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeVirtualMemFree(c, va, kVmPage), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, dev), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, plain), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, reg), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
    EXPECT_EQ(ctl.live_objects(), 0u);
    EXPECT_EQ(ledger_text().rfind("live objects: 0\n", 0), 0u) << ledger_text();
    EXPECT_EQ(ctl.device_free_memory(0), int64_t(8) << 30);
}

TEST_F(FakeZe, ResetReleasesEverything) {
    ze_context_handle_t c = context_all();
    (void)device_alloc(c, g_devices[1], 4096);
    ze_command_list_handle_t l = immediate_list(c, g_devices[1]);
    ze_event_pool_desc_t pd{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr, 0, 1};
    ze_event_pool_handle_t pool = nullptr;
    ASSERT_EQ(zeEventPoolCreate(c, &pd, 0, nullptr, &pool), ZE_RESULT_SUCCESS);
    ze_event_desc_t ed{ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, 0, 0, 0};
    ze_event_handle_t ev = nullptr;
    ASSERT_EQ(zeEventCreate(pool, &ed, &ev), ZE_RESULT_SUCCESS);
    std::vector<uint8_t> a(64), b(64);
    // Work blocked on an event that nobody signals.
    ASSERT_EQ(zeCommandListAppendMemoryCopy(l, b.data(), a.data(), a.size(), nullptr, 1, &ev), ZE_RESULT_SUCCESS);
    EXPECT_EQ(ctl.live_objects(), 5u) << ledger_text();
    ctl.reset();
    EXPECT_EQ(ctl.live_objects(), 0u);
    EXPECT_EQ(ctl.device_free_memory(1), int64_t(8) << 30);
    // Released handles are stale.
    EXPECT_EQ(zeEventDestroy(ev), ZE_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(zeEventPoolDestroy(pool), ZE_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_ERROR_INVALID_ARGUMENT);
}

TEST_F(FakeZe, DeviceMemoryIsCountedAndCanRunOut) {
    ze_device_handle_t d = g_devices[0];
    ze_context_handle_t c = context_for({d});
    ze_device_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
    void* big = nullptr;
    void* more = nullptr;
    // The fake does not touch the bytes, so a large allocation costs nothing.
    ASSERT_EQ(zeMemAllocDevice(c, &desc, (size_t(7) << 30), 0, d, &big), ZE_RESULT_SUCCESS);
    EXPECT_EQ(sysman_free(d), uint64_t(1) << 30);
    EXPECT_EQ(zeMemAllocDevice(c, &desc, (size_t(2) << 30), 0, d, &more), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    ze_physical_mem_desc_t pd{ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, nullptr, 0, size_t(2) << 30};
    ze_physical_mem_handle_t pm = nullptr;
    EXPECT_EQ(zePhysicalMemCreate(c, d, &pd, &pm), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    EXPECT_EQ(zeMemAllocDevice(c, &desc, 4096, 0, g_devices[1], &more), ZE_RESULT_ERROR_DEVICE_LOST)
        << "device outside the context";
    EXPECT_EQ(zeMemFree(c, big), ZE_RESULT_SUCCESS);
    EXPECT_EQ(sysman_free(d), uint64_t(8) << 30);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

// ---------------------------------------------------------------------------------
// Fault scripts: the shared grammar's refusals, size_limit and exhaust.
// The old form entry:when:action is refused with the same rule in the new form, and
// that spelling is accepted; the shared parser's other refusals name their reason.
TEST_F(FakeZe, OldFormsAreRefusedWithTheirNewSpelling) {
    const std::pair<const char*, const char*> old_new[] = {
        {"zeMemFree:1:ZE_RESULT_ERROR_DEVICE_LOST", "fail:zeMemFree:ZE_RESULT_ERROR_DEVICE_LOST@1"},
        {"zeMemAllocHost:*:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY", "fail:zeMemAllocHost:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY"},
        {"zeMemFree:3+:0x70000002", "fail:zeMemFree:0x70000002@3+"},
        {"zeMemAllocHost:2+:nonidentity", "nonidentity:zeMemAllocHost@2+"},
        {"zeVirtualMemMap:*:delay=20", "delay:zeVirtualMemMap:20ms"},
        {"zeCommandListAppendMemoryCopy:1:exec_delay=200", "exec_delay:zeCommandListAppendMemoryCopy:200ms@1"},
    };
    for (auto [old_rule, new_rule] : old_new) {
        EXPECT_EQ(ctl.set_faults(old_rule), -1) << old_rule;
        const std::string why = ctl.fault_error();
        EXPECT_NE(why.find(std::string("the old form ENTRY:WHEN:ACTION is gone (rules are ACTION:ENTRY:ARG[@WHEN]): "
                                       "write '") + new_rule + "'"),
                  std::string::npos)
            << why;
        EXPECT_EQ(ctl.set_faults(new_rule), 0) << new_rule << ": " << ctl.fault_error();
    }
    const std::pair<const char*, const char*> refused[] = {
        {"fail:zeNoSuchCall:ZE_RESULT_ERROR_DEVICE_LOST",
         "unknown entry point 'zeNoSuchCall' (the fake Level Zero driver does not implement it)"},
        {"fail:zeMemFree:ZE_RESULT_ERROR_NOPE", "unknown ze_result_t 'ZE_RESULT_ERROR_NOPE'"},
        {"fail:zeMemFree:0x80000000", "(a name or a number 1..2147483647)"},
        {"fail:zeMemFree:ZE_RESULT_SUCCESS", "'ZE_RESULT_SUCCESS' is success, not a failure"},
        {"fail:zeMemFree:ZE_RESULT_ERROR_UNKNOWN@0", "bad call number '0'"},
        {"fail:zeMemFree:ZE_RESULT_ERROR_UNKNOWN@*", "bad call number '*'"},
        {"delay:zeVirtualMemMap:20", "no unit: write 'delay:zeVirtualMemMap:20us'"},
        {"exec_delay:zeVirtualMemMap:2ms", "exec_delay does not apply to 'zeVirtualMemMap' (it applies to: "
                                           "zeCommandListAppendMemoryCopy, zeCommandListAppendMemoryCopyRegion,"},
        {"nonidentity:zeMemAllocHost:0x1000", "expected nonidentity:ENTRY[@WHEN]"},
        {"size_limit:zeMemFree:1G:ZE_RESULT_ERROR_UNSUPPORTED_SIZE",
         "size_limit does not apply to 'zeMemFree' (it applies to: zeMemAllocHost, zeMemAllocDevice,"},
        {"exhaust:zeMemFree:4:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY",
         "exhaust does not apply to 'zeMemFree' (it applies to: zeContextCreate, zeContextCreateEx,"},
    };
    for (auto [script, why] : refused) {
        EXPECT_EQ(ctl.set_faults(script), -1) << script;
        EXPECT_NE(std::string(ctl.fault_error()).find(why), std::string::npos) << ctl.fault_error();
    }
    EXPECT_EQ(ctl.set_faults(nullptr), 0);
}

// size_limit: a call whose size exceeds the limit answers the code and does nothing;
// smaller calls run.
TEST_F(FakeZe, SizeLimitRefusesOnlyCallsAboveTheLimit) {
    ze_device_handle_t d = g_devices[0];
    ze_context_handle_t c = context_for({d});
    ASSERT_EQ(ctl.set_faults("size_limit:zeMemAllocHost:8K:ZE_RESULT_ERROR_UNSUPPORTED_SIZE\n"
                             "size_limit:zeMemAllocDevice:1M:ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY\n"
                             "size_limit:zePhysicalMemCreate:2M:ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY\n"
                             "size_limit:zeVirtualMemReserve:4M:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY\n"
                             "size_limit:zeVirtualMemMap:2M:ZE_RESULT_ERROR_INVALID_ARGUMENT\n"
                             "size_limit:zeCommandListAppendMemoryCopy:16:ZE_RESULT_ERROR_INVALID_SIZE"),
              0)
        << ctl.fault_error();
    Pages host(3 * kPage);
    void* reg = nullptr;
    EXPECT_EQ(register_host(c, host.p, 3 * kPage, &reg), ZE_RESULT_ERROR_UNSUPPORTED_SIZE);
    EXPECT_EQ(ctl.live_objects(), 1u) << ledger_text();  // the context: nothing registered
    ASSERT_EQ(register_host(c, host.p, 2 * kPage, &reg), ZE_RESULT_SUCCESS);

    const uint64_t free0 = sysman_free(d);
    ze_device_mem_alloc_desc_t dd{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
    void* dev = nullptr;
    EXPECT_EQ(zeMemAllocDevice(c, &dd, (1u << 20) + 1, 0, d, &dev), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    EXPECT_EQ(sysman_free(d), free0) << "a refused allocation takes no memory";
    ASSERT_EQ(zeMemAllocDevice(c, &dd, 1u << 20, 0, d, &dev), ZE_RESULT_SUCCESS);

    ze_physical_mem_desc_t big{ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, nullptr, 0, 2 * kVmPage};
    ze_physical_mem_desc_t one{ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, nullptr, 0, kVmPage};
    ze_physical_mem_handle_t pm = nullptr;
    EXPECT_EQ(zePhysicalMemCreate(c, d, &big, &pm), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    ASSERT_EQ(zePhysicalMemCreate(c, d, &one, &pm), ZE_RESULT_SUCCESS);
    void* va = nullptr;
    EXPECT_EQ(zeVirtualMemReserve(c, kHint, 3 * kVmPage, &va), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    ASSERT_EQ(zeVirtualMemReserve(c, kHint, 2 * kVmPage, &va), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeVirtualMemMap(c, va, 2 * kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE),
              ZE_RESULT_ERROR_INVALID_ARGUMENT);
    ASSERT_EQ(zeVirtualMemMap(c, va, kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE), ZE_RESULT_SUCCESS);

    ze_command_list_handle_t l = immediate_list(c, d);
    std::vector<uint8_t> src(32, 9), dst(32, 0);
    EXPECT_EQ(copy_and_wait(c, l, dst.data(), src.data(), 17), ZE_RESULT_ERROR_INVALID_SIZE);
    EXPECT_EQ(dst[0], 0);
    EXPECT_EQ(copy_and_wait(c, l, dst.data(), src.data(), 16), ZE_RESULT_SUCCESS);
    EXPECT_EQ(dst[15], 9);
    // context, registration, device allocation, physical memory, reservation, mapping, list
    EXPECT_EQ(ctl.live_objects(), 7u) << ledger_text();
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeVirtualMemUnmap(c, va, kVmPage), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeVirtualMemFree(c, va, 2 * kVmPage), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zePhysicalMemDestroy(c, pm), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, dev), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, reg), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

// exhaust: once N objects made by the entry are alive, its calls answer the code until
// one is destroyed; objects made before the script count too.
TEST_F(FakeZe, ExhaustRefusesWhileNObjectsLiveAndRecoversAfterADestroy) {
    ze_device_handle_t d = g_devices[0];
    ze_context_handle_t c = context_for({d});
    ze_physical_mem_desc_t pd{ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, nullptr, 0, kVmPage};
    ze_physical_mem_handle_t pm[3] = {};
    ASSERT_EQ(zePhysicalMemCreate(c, d, &pd, &pm[0]), ZE_RESULT_SUCCESS);  // before the script
    ASSERT_EQ(ctl.set_faults("exhaust:zePhysicalMemCreate:2:ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY\n"
                             "exhaust:zeMemAllocHost:1:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY\n"
                             "exhaust:zeCommandListCreateImmediate:1:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY\n"
                             "exhaust:zeEventCreate:1:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY\n"
                             "exhaust:zeContextCreateEx:1:ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY"),
              0)
        << ctl.fault_error();
    const uint64_t free0 = sysman_free(d);
    ASSERT_EQ(zePhysicalMemCreate(c, d, &pd, &pm[1]), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zePhysicalMemCreate(c, d, &pd, &pm[2]), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY);
    EXPECT_EQ(zePhysicalMemCreate(c, d, &pd, &pm[2]), ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY) << "until one goes";
    EXPECT_EQ(sysman_free(d), free0 - kVmPage) << "a refused create takes no memory";
    EXPECT_EQ(ctl.live_objects(), 3u) << ledger_text();  // context, two physical memories
    ASSERT_EQ(zePhysicalMemDestroy(c, pm[0]), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zePhysicalMemCreate(c, d, &pd, &pm[2]), ZE_RESULT_SUCCESS) << "room again";

    // Plain host allocations and registrations are both made by zeMemAllocHost.
    Pages x(kPage), y(kPage);
    void* rx = nullptr;
    void* ry = nullptr;
    ASSERT_EQ(register_host(c, x.p, kPage, &rx), ZE_RESULT_SUCCESS);
    EXPECT_EQ(register_host(c, y.p, kPage, &ry), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    ze_host_mem_alloc_desc_t hd{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
    void* plain = nullptr;
    EXPECT_EQ(zeMemAllocHost(c, &hd, 64, 0, &plain), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    ASSERT_EQ(zeMemFree(c, rx), ZE_RESULT_SUCCESS);
    ASSERT_EQ(register_host(c, y.p, kPage, &ry), ZE_RESULT_SUCCESS);

    ze_command_list_handle_t l1 = immediate_list(c, d);
    ze_command_queue_desc_t q{ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0,
                              ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS, ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
    ze_command_list_handle_t l2 = nullptr;
    EXPECT_EQ(zeCommandListCreateImmediate(c, d, &q, &l2), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    ASSERT_EQ(zeCommandListDestroy(l1), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListCreateImmediate(c, d, &q, &l2), ZE_RESULT_SUCCESS);

    ze_event_pool_desc_t epd{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr, ZE_EVENT_POOL_FLAG_HOST_VISIBLE, 2};
    ze_event_pool_handle_t pool = nullptr;
    ASSERT_EQ(zeEventPoolCreate(c, &epd, 0, nullptr, &pool), ZE_RESULT_SUCCESS);
    ze_event_desc_t e0{ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, 0, ZE_EVENT_SCOPE_FLAG_HOST, ZE_EVENT_SCOPE_FLAG_HOST};
    ze_event_desc_t e1 = e0;
    e1.index = 1;
    ze_event_handle_t ev0 = nullptr, ev1 = nullptr;
    ASSERT_EQ(zeEventCreate(pool, &e0, &ev0), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeEventCreate(pool, &e1, &ev1), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY);
    ASSERT_EQ(zeEventDestroy(ev0), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeEventCreate(pool, &e1, &ev1), ZE_RESULT_SUCCESS);

    ze_context_desc_t cd{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    ze_context_handle_t c2 = nullptr;
    EXPECT_EQ(zeContextCreateEx(g_driver, &cd, 1, &d, &c2), ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
        << "one context is alive already";

    // context, two physical memories, a registration, a list, a pool, an event
    EXPECT_EQ(ctl.live_objects(), 7u) << ledger_text();
    EXPECT_EQ(zeEventDestroy(ev1), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeEventPoolDestroy(pool), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeCommandListDestroy(l2), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, ry), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zePhysicalMemDestroy(c, pm[1]), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zePhysicalMemDestroy(c, pm[2]), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeContextCreateEx(g_driver, &cd, 1, &d, &c2), ZE_RESULT_SUCCESS) << "room again";
    EXPECT_EQ(zeContextDestroy(c2), ZE_RESULT_SUCCESS);
}

}  // namespace
