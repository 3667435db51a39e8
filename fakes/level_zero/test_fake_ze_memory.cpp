// Tests of the fake Level Zero driver (test_fake_ze.cpp says how the files divide them): copies,
// events and virtual memory.
#include "test_fake_ze.hpp"

namespace {
using namespace fake_ze_test;

// ---------------------------------------------------------------------------------
// Copies and events.
TEST_F(FakeZe, RegionCopyHonoursOriginsExtentsAndPitches) {
    ze_context_handle_t c = context_for({g_devices[0]});
    ze_command_list_handle_t l = immediate_list(c, g_devices[0]);
    // 3-D: source pitches 37 / 37*9, destination 50 / 50*7 (device memory).
    const uint32_t sp = 37, ssp = 37 * 9, dp = 50, dsp = 50 * 7;
    const ze_copy_region_t sr{3, 2, 1, 11, 4, 3}, dr{5, 1, 2, 11, 4, 3};
    std::vector<uint8_t> src(ssp * 5), expect(dsp * 6, 0xee), back(dsp * 6, 0);
    fill_pattern(src.data(), src.size(), 2);
    void* dev = device_alloc(c, g_devices[0], expect.size());
    EXPECT_EQ(copy_and_wait(c, l, dev, expect.data(), expect.size()), ZE_RESULT_SUCCESS);  // poison
    for (uint32_t z = 0; z < 3; ++z)
        for (uint32_t y = 0; y < 4; ++y)
            for (uint32_t x = 0; x < 11; ++x)
                expect[(dr.originZ + z) * dsp + (dr.originY + y) * dp + dr.originX + x] =
                    src[(sr.originZ + z) * ssp + (sr.originY + y) * sp + sr.originX + x];
    Events e(c, 1);
    ASSERT_EQ(zeCommandListAppendMemoryCopyRegion(l, dev, &dr, dp, dsp, src.data(), &sr, sp, ssp, e[0], 0, nullptr),
              ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeEventHostSynchronize(e[0], UINT64_MAX), ZE_RESULT_SUCCESS);
    EXPECT_EQ(copy_and_wait(c, l, back.data(), dev, back.size()), ZE_RESULT_SUCCESS);
    EXPECT_EQ(back, expect);

    // 2-D (depth 0): originZ and the slice pitches are ignored.
    const ze_copy_region_t sr2{1, 1, 7, 6, 3, 0}, dr2{0, 2, 9, 6, 3, 0};
    std::vector<uint8_t> dst2(16 * 8, 0xcc), expect2 = dst2;
    for (uint32_t y = 0; y < 3; ++y)
        for (uint32_t x = 0; x < 6; ++x) expect2[(2 + y) * 16 + x] = src[(1 + y) * sp + 1 + x];
    ASSERT_EQ(zeEventHostReset(e[0]), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListAppendMemoryCopyRegion(l, dst2.data(), &dr2, 16, 0, src.data(), &sr2, sp, 0, e[0], 0,
                                                  nullptr),
              ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeEventHostSynchronize(e[0], UINT64_MAX), ZE_RESULT_SUCCESS);
    EXPECT_EQ(dst2, expect2);

    // Refusals: a row that does not fit its pitch, different extents, a region that
    // runs past a device allocation.
    const ze_copy_region_t wide{30, 0, 0, 11, 2, 0};
    EXPECT_EQ(zeCommandListAppendMemoryCopyRegion(l, dst2.data(), &dr2, 16, 0, src.data(), &sr, sp, ssp, nullptr, 0,
                                                  nullptr),
              ZE_RESULT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(zeCommandListAppendMemoryCopyRegion(l, dst2.data(), &wide, 16, 0, src.data(), &wide, sp, 0, nullptr, 0,
                                                  nullptr),
              ZE_RESULT_ERROR_INVALID_ARGUMENT);
    const ze_copy_region_t big{0, 0, 0, 50, 7, 7};
    EXPECT_EQ(zeCommandListAppendMemoryCopyRegion(l, dev, &big, dp, dsp, src.data(), &big, dp, dsp, nullptr, 0, nullptr),
              ZE_RESULT_ERROR_INVALID_ARGUMENT);
    e.release();
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, dev), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, EventsOrderWorkAcrossImmediateLists) {
    ze_context_handle_t c = context_all();
    ze_command_list_handle_t l0 = immediate_list(c, g_devices[0]);
    ze_command_list_handle_t l1 = immediate_list(c, g_devices[1]);
    Events e(c, 3);  // 0: host gate, 1: first copy done, 2: second copy done
    std::vector<uint8_t> a(4096, 1), b(4096, 0), d(4096, 0);
    ASSERT_EQ(zeCommandListAppendWaitOnEvents(l0, 1, &e.ev[0]), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListAppendMemoryCopy(l0, b.data(), a.data(), a.size(), e[1], 0, nullptr), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListAppendMemoryCopy(l1, d.data(), b.data(), b.size(), nullptr, 1, &e.ev[1]),
              ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListAppendBarrier(l1, e[2], 0, nullptr), ZE_RESULT_SUCCESS);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(zeEventQueryStatus(e[2]), ZE_RESULT_NOT_READY);
    EXPECT_EQ(zeEventHostSynchronize(e[2], 1000000), ZE_RESULT_NOT_READY);
    EXPECT_EQ(d[0], 0) << "nothing ran before the gate opened";
    ASSERT_EQ(zeEventHostSignal(e[0]), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeEventHostSynchronize(e[2], UINT64_MAX), ZE_RESULT_SUCCESS);
    EXPECT_EQ(d, a) << "the second copy read what the first wrote";
    EXPECT_EQ(zeEventQueryStatus(e[1]), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeEventHostReset(e[1]), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeEventQueryStatus(e[1]), ZE_RESULT_NOT_READY);
    ASSERT_EQ(zeCommandListAppendSignalEvent(l1, e[1]), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeEventHostSynchronize(e[1], UINT64_MAX), ZE_RESULT_SUCCESS);
    e.release();
    EXPECT_EQ(zeCommandListDestroy(l0), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeCommandListDestroy(l1), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, RegularCommandListRunsOnACommandQueue) {
    ze_context_handle_t c = context_for({g_devices[1]});
    ze_command_queue_desc_t qd{ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0,
                               ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS, ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
    ze_command_queue_handle_t q = nullptr;
    ASSERT_EQ(zeCommandQueueCreate(c, g_devices[1], &qd, &q), ZE_RESULT_SUCCESS);
    ze_command_list_desc_t ld{ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, nullptr, 0, 0};
    ze_command_list_handle_t l = nullptr;
    ASSERT_EQ(zeCommandListCreate(c, g_devices[1], &ld, &l), ZE_RESULT_SUCCESS);
    std::vector<uint8_t> a(1000), b(1000, 0), d(1000, 0);
    fill_pattern(a.data(), a.size(), 3);
    void* dev = device_alloc(c, g_devices[1], a.size());
    ASSERT_EQ(zeCommandListAppendMemoryCopy(l, dev, a.data(), a.size(), nullptr, 0, nullptr), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListAppendBarrier(l, nullptr, 0, nullptr), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListAppendMemoryCopy(l, b.data(), dev, a.size(), nullptr, 0, nullptr), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandListClose(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(b[0], 0) << "a regular list runs only when executed";
    ASSERT_EQ(zeCommandQueueExecuteCommandLists(q, 1, &l, nullptr), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeCommandQueueSynchronize(q, UINT64_MAX), ZE_RESULT_SUCCESS);
    EXPECT_EQ(a, b);
    ASSERT_EQ(zeCommandListReset(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeCommandQueueDestroy(q), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeMemFree(c, dev), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

// ---------------------------------------------------------------------------------
// Virtual memory.
// True when a forked child touching p dies by SIGSEGV.
bool touch_kills_child(volatile uint8_t* p) {
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);  // no sanitizer or test-framework handler
        p[0] = 1;
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

TEST_F(FakeZe, VirtualMemoryReserveMapUnmapAndFault) {
    ze_device_handle_t d = g_devices[1];
    ze_context_handle_t c = context_for({d});
    size_t page = 0;
    ASSERT_EQ(zeVirtualMemQueryPageSize(c, d, 1, &page), ZE_RESULT_SUCCESS);
    ASSERT_EQ(page, kVmPage);
    void* va = nullptr;
    ASSERT_EQ(zeVirtualMemReserve(c, kHint, 3 * kVmPage, &va), ZE_RESULT_SUCCESS);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(va) % kVmPage, 0u);
    auto* p = static_cast<uint8_t*>(va);
    EXPECT_TRUE(touch_kills_child(p)) << "a reserved, unmapped range faults";

    const uint64_t free0 = sysman_free(d);
    EXPECT_EQ(static_cast<uint64_t>(ctl.device_free_memory(1)), free0);
    ze_physical_mem_desc_t pd{ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, nullptr, 0, 2 * kVmPage};
    ze_physical_mem_handle_t pm = nullptr;
    ASSERT_EQ(zePhysicalMemCreate(c, d, &pd, &pm), ZE_RESULT_SUCCESS);
    EXPECT_EQ(sysman_free(d), free0 - 2 * kVmPage);
    EXPECT_EQ(sysman_free(g_devices[0]), uint64_t(8) << 30) << "counted on its own device only";

    EXPECT_EQ(zeVirtualMemMap(c, p + 4096, kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE),
              ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT);
    ASSERT_EQ(zeVirtualMemMap(c, p + kVmPage, 2 * kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE),
              ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeVirtualMemMap(c, p + kVmPage, kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE),
              ZE_RESULT_ERROR_INVALID_ARGUMENT)
        << "already mapped";
    p[kVmPage + 5] = 42;  // host access works while mapped
    ze_memory_access_attribute_t acc{};
    size_t out = 0;
    ASSERT_EQ(zeVirtualMemGetAccessAttribute(c, p, 3 * kVmPage, &acc, &out), ZE_RESULT_SUCCESS);
    EXPECT_EQ(acc, ZE_MEMORY_ACCESS_ATTRIBUTE_NONE);
    EXPECT_EQ(out, kVmPage);
    ASSERT_EQ(zeVirtualMemGetAccessAttribute(c, p + kVmPage, 2 * kVmPage, &acc, &out), ZE_RESULT_SUCCESS);
    EXPECT_EQ(acc, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE);
    EXPECT_EQ(out, 2 * kVmPage);

    // A device copy into the mapped range.
    ze_command_list_handle_t l = immediate_list(c, d);
    std::vector<uint8_t> src(kVmPage + 1000);
    fill_pattern(src.data(), src.size(), 4);
    EXPECT_EQ(copy_and_wait(c, l, p + kVmPage + 100, src.data(), src.size()), ZE_RESULT_SUCCESS);
    EXPECT_EQ(std::memcmp(p + kVmPage + 100, src.data(), src.size()), 0);
    EXPECT_EQ(copy_and_wait(c, l, p + 2 * kVmPage, src.data(), 2 * kVmPage), ZE_RESULT_ERROR_INVALID_ARGUMENT)
        << "runs past the reservation";

    EXPECT_EQ(zePhysicalMemDestroy(c, pm), ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE);
    EXPECT_EQ(zeVirtualMemFree(c, va, 3 * kVmPage), ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE);
    ASSERT_EQ(zeVirtualMemSetAccessAttribute(c, p + 2 * kVmPage, kVmPage, ZE_MEMORY_ACCESS_ATTRIBUTE_READONLY),
              ZE_RESULT_SUCCESS);
    EXPECT_TRUE(touch_kills_child(p + 2 * kVmPage)) << "read-only page";
    EXPECT_EQ(p[2 * kVmPage], src[kVmPage - 100]);
    ASSERT_EQ(zeVirtualMemUnmap(c, p + kVmPage, 2 * kVmPage), ZE_RESULT_SUCCESS);
    EXPECT_TRUE(touch_kills_child(p + kVmPage + 5)) << "unmapped again";
    EXPECT_EQ(zeVirtualMemUnmap(c, p + kVmPage, kVmPage), ZE_RESULT_ERROR_INVALID_ARGUMENT) << "not mapped";

    // Remap at the same address: the contents of the physical memory are back.
    ASSERT_EQ(zeVirtualMemMap(c, p, kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE), ZE_RESULT_SUCCESS);
    EXPECT_EQ(p[5], 42);
    ASSERT_EQ(zeVirtualMemUnmap(c, p, kVmPage), ZE_RESULT_SUCCESS);

    EXPECT_EQ(zePhysicalMemDestroy(c, pm), ZE_RESULT_SUCCESS);
    EXPECT_EQ(sysman_free(d), free0);
    EXPECT_EQ(zeVirtualMemFree(c, va, 3 * kVmPage), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

TEST_F(FakeZe, CopyIntoMemoryUnmappedBeforeItRunsIsADeviceFault) {
    ze_device_handle_t d = g_devices[0];
    ze_context_handle_t c = context_for({d});
    void* va = nullptr;
    ASSERT_EQ(zeVirtualMemReserve(c, kHint, kVmPage, &va), ZE_RESULT_SUCCESS);
    ze_physical_mem_desc_t pd{ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, nullptr, 0, kVmPage};
    ze_physical_mem_handle_t pm = nullptr;
    ASSERT_EQ(zePhysicalMemCreate(c, d, &pd, &pm), ZE_RESULT_SUCCESS);
    ASSERT_EQ(zeVirtualMemMap(c, va, kVmPage, pm, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE), ZE_RESULT_SUCCESS);
    ze_command_list_handle_t l = immediate_list(c, d);
    std::vector<uint8_t> src(4096, 9);
    {
        Events e(c, 2);  // 0: done, 1: gate that holds the copy back
        ASSERT_EQ(zeCommandListAppendMemoryCopy(l, va, src.data(), src.size(), e[0], 1, &e.ev[1]),
                  ZE_RESULT_SUCCESS);
        ASSERT_EQ(zeVirtualMemUnmap(c, va, kVmPage), ZE_RESULT_SUCCESS);  // while the copy is in flight
        ASSERT_EQ(zeEventHostSignal(e[1]), ZE_RESULT_SUCCESS);
        // The event completes (no waiter hangs) but reports the loss.
        EXPECT_EQ(zeEventHostSynchronize(e[0], UINT64_MAX), ZE_RESULT_ERROR_DEVICE_LOST);
        EXPECT_EQ(zeEventQueryStatus(e[0]), ZE_RESULT_ERROR_DEVICE_LOST);
        EXPECT_EQ(zeCommandListAppendBarrier(l, nullptr, 0, nullptr), ZE_RESULT_ERROR_DEVICE_LOST);
    }
    EXPECT_EQ(ctl.device_faults(), 1u);
    EXPECT_NE(ledger_text().find("not mapped"), std::string::npos) << ledger_text();
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);

    // Pageable host memory unmapped before the copy runs: a fault, not a crash.
    l = immediate_list(c, d);
    // Placed far below the mmap area: a page-sized hole there is not handed to
    // the next mmap (made by any thread, e.g. the ASan allocator's) before the
    // copy runs, which would make the source readable again.
    void* const far = reinterpret_cast<void*>(uintptr_t{0x300000000000});
    void* gone = mmap(far, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (gone == MAP_FAILED) gone = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(gone, MAP_FAILED);
    {
        Events e(c, 2);
        ASSERT_EQ(zeCommandListAppendMemoryCopy(l, src.data(), gone, kPage, e[0], 1, &e.ev[1]), ZE_RESULT_SUCCESS);
        munmap(gone, kPage);
        ASSERT_EQ(zeEventHostSignal(e[1]), ZE_RESULT_SUCCESS);
        EXPECT_EQ(zeEventHostSynchronize(e[0], UINT64_MAX), ZE_RESULT_ERROR_DEVICE_LOST);
    }
    EXPECT_EQ(ctl.device_faults(), 2u) << ledger_text();
    expected_device_faults = 2;
    EXPECT_EQ(zeCommandListDestroy(l), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zePhysicalMemDestroy(c, pm), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeVirtualMemFree(c, va, kVmPage), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeContextDestroy(c), ZE_RESULT_SUCCESS);
}

}  // namespace
