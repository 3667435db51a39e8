// Tests of the fake CUDA driver (test_fake_cuda.cpp says how the four files divide them): VMM, and
// memory shared with another process.
#include "test_fake_cuda.hpp"

namespace {
using namespace fake_cuda_test;

// ---- VMM -------------------------------------------------------------------------------------------------

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

}  // namespace
