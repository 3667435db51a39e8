// Cases: the copies the backends issue (XMC_CU_COPY: cuMemcpyAsync,
// cuMemcpy2DAsync, cuMemcpy3DAsync; cuMemcpyHtoDAsync of XMC_CU_VMM):
// refused descriptions (NULL, pitches under the width, extents past an
// allocation, bad memory types, levels of detail), copies into a released
// slot range, and what follows a failed copy (VMM-ERROR-CLEAR): a refusal at
// enqueue, and a copy that faults when it runs because its range was unmapped
// while it waited in the stream.
#include "probe_support.h"

namespace xmc::probe {
namespace {

// A VMM range that was mapped, written and unmapped: a slot whose backing
// was released. The reservation stays (freed at cleanup).
CUdeviceptr released_slot(P& p, Cleanup& cl) {
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    CUmemGenericAllocationHandle h = create(p, cl, g);
    TRY(p.d.cuMemMap(va, g, 0, h, 0));
    Driver* d = &p.d;
    cl.add([d, va, g] { d->cuMemUnmap(va, g); });
    grant(p, va, g);
    TRY(p.d.cuMemUnmap(va, g));
    return va;
}

Outcome synced(P& p, CUstream s, CUresult r, const std::string& note) {
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, note + "; stream sync " + result_name(p.d, sr));
}

// -- 1-D: cuMemcpyAsync (unified addresses), cuMemcpyHtoDAsync. The
// allocations are 6144 bytes, so an overrun of one byte stays inside the
// fake's page-rounded mapping (the fake takes an address it does not hold for
// host memory: a copy from freed device memory would crash it, so that case
// is left to cuMemcpyPeerAsync, memcpy_peer_freed_source).
Outcome c_copy_1d(P& p, int which) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 6144), b = dalloc(p, cl, 6144);
    switch (which) {
        case 0: return synced(p, s, p.d.cuMemcpyAsync(b, a, 6145, s), "6145 bytes between 6144-byte allocations");
        case 2: return synced(p, s, p.d.cuMemcpyAsync(0, a, 4096, s), "destination 0");
        case 3: {
            char* h = host_pages(cl, 2);
            return synced(p, s, p.d.cuMemcpyAsync(b, reinterpret_cast<CUdeviceptr>(h), 6144, s),
                          "source unregistered host memory, by its address");
        }
        case 4: {
            CUdeviceptr va = released_slot(p, cl);
            return synced(p, s, p.d.cuMemcpyAsync(va, a, 4096, s), "destination a slot range unmapped after use");
        }
        case 6: return synced(p, s, p.d.cuMemcpyHtoDAsync(a, nullptr, 4096, s), "cuMemcpyHtoDAsync from NULL");
        default: {
            std::vector<char> h(4096, 1);
            return synced(p, s, p.d.cuMemcpyHtoDAsync(a, h.data(), ~static_cast<size_t>(0), s),
                          "cuMemcpyHtoDAsync of SIZE_MAX bytes");
        }
    }
}

// -- 2-D: host (pageable) rows into a 64 KiB device allocation, 4 rows of 128
// bytes at pitch 256; `which` spoils one field.
Outcome c_copy_2d(P& p, int which) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 1 << 16);
    std::vector<char> host(1 << 18, 0);  // larger than any source span below
    CUDA_MEMCPY2D c = rows_htod(host.data(), 256, a);
    const CUDA_MEMCPY2D* arg = &c;
    std::string note;
    switch (which) {
        case 0: c.dstPitch = 64; note = "dstPitch 64 < WidthInBytes 128"; break;
        case 1: c.srcPitch = 64; c.Height = 1; note = "one row, srcPitch 64 < WidthInBytes 128"; break;
        case 2: c.Height = 0; note = "Height 0"; break;
        case 4: c.Height = 512; note = "512 rows at pitch 256 (128 KiB) into a 64 KiB allocation"; break;
        case 6: arg = nullptr; note = "NULL description"; break;
        // 0 is no memory type, yet inside the enum's range (a C++ fake may
        // load it without undefined behaviour; 99 would not be)
        case 7: c.srcMemoryType = static_cast<CUmemorytype>(0); note = "srcMemoryType 0"; break;
        case 8: c.srcMemoryType = CU_MEMORYTYPE_ARRAY; c.srcArray = nullptr; note = "srcMemoryType ARRAY, NULL array"; break;
        case 9: c.dstDevice = released_slot(p, cl); note = "destination a slot range unmapped after use"; break;
        default: {
            // a source pitch of 4 GiB over two rows: 4 GiB + 128 bytes of
            // host address space, reserved, only the two rows touched
            size_t span = (size_t(1) << 32) + 4096;
            void* v = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (v == MAP_FAILED) throw SetupFailed{CUDA_ERROR_OUT_OF_MEMORY, "mmap of 4 GiB"};
            cl.add([v, span] { munmap(v, span); });
            c.srcHost = v;
            c.srcPitch = size_t(1) << 32;
            c.Height = 2;
            note = "srcPitch 4 GiB (two rows)";
            break;
        }
    }
    return synced(p, s, p.d.cuMemcpy2DAsync(arg, s), note);
}

// -- 3-D: device to device, 2 slices of 4 rows of 128 bytes, pitch 256, slice
// height 4, in 64 KiB allocations; `which` spoils one field.
Outcome c_copy_3d(P& p, int which) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 1 << 16), b = dalloc(p, cl, 1 << 16);
    CUDA_MEMCPY3D c;
    std::memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = a;
    c.srcPitch = 256;
    c.srcHeight = 4;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = b;
    c.dstPitch = 256;
    c.dstHeight = 4;
    c.WidthInBytes = 128;
    c.Height = 4;
    c.Depth = 2;
    const CUDA_MEMCPY3D* arg = &c;
    std::string note;
    switch (which) {
        case 0: c.srcHeight = 2; note = "srcHeight 2 < Height 4, two slices"; break;
        case 1: c.srcPitch = 64; note = "srcPitch 64 < WidthInBytes 128"; break;
        case 2: c.Depth = 128; note = "128 slices of 1 KiB into 64 KiB allocations"; break;
        case 3: arg = nullptr; note = "NULL description"; break;
        case 4: c.srcLOD = 1; note = "srcLOD 1"; break;
        case 5: c.Depth = 0; note = "Depth 0"; break;
        default: c.dstDevice = released_slot(p, cl); note = "destination a slot range unmapped after use"; break;
    }
    return synced(p, s, p.d.cuMemcpy3DAsync(arg, s), note);
}

// -- after a failed copy
Outcome c_copy_refused_then_valid(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 4096), b = dalloc(p, cl, 4096);
    CUresult refused = p.d.cuMemcpyAsync(0, a, 4096, s);
    if (refused == CUDA_SUCCESS) return word("skipped", 0, "a copy to address 0 was accepted");
    TRY(p.d.cuMemcpyAsync(b, a, 4096, s));
    return res(p, p.d.cuStreamSynchronize(s),
               "after a refused copy to address 0 (" + result_name(p.d, refused) +
                   "): a valid copy on the same stream, then sync");
}

// A device-to-device copy into a mapped slot range, queued behind a host
// function; the range is unmapped before the copy runs. which: 0 the stream's
// synchronize, 1 whether cuMemUnmap waited for the queued copy, 2 cuMemAlloc
// afterwards (a sticky error?), 3 new stream work afterwards.
Outcome c_copy_fault(P& p, int which) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr a = dalloc(p, cl, 1 << 16);
    CUdeviceptr va = mapped_range(p, cl, g);
    CUstream s = stream(p, cl);
    Gate* gate = hold(p, cl, s, 1000);
    TRY(p.d.cuMemcpyDtoDAsync(va, a, 1 << 16, s));
    auto t0 = std::chrono::steady_clock::now();
    CUresult u = p.d.cuMemUnmap(va, g);
    int64_t ms = ms_since(t0);
    gate->open.store(true);
    CUresult sr = p.d.cuStreamSynchronize(s);
    std::string note = "unmap " + result_name(p.d, u) + " after " + std::to_string(ms) +
                       " ms (the host function holds up to 1000 ms); stream sync " + result_name(p.d, sr);
    if (which == 0) return res(p, sr, note);
    if (which == 1) return yes_no(ms >= 500, note);
    if (which == 2) {
        CUdeviceptr x = 0;
        CUresult r = p.d.cuMemAlloc(&x, 1 << 20);
        if (r == CUDA_SUCCESS) p.d.cuMemFree(x);
        return res(p, r, note + "; then cuMemAlloc");
    }
    CUstream s2 = nullptr;
    CUresult r = p.d.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) return res(p, r, note + "; then cuStreamCreate");
    CUresult m = p.d.cuMemsetD8Async(a, 1, 4096, s2);
    CUresult r2 = m == CUDA_SUCCESS ? p.d.cuStreamSynchronize(s2) : m;
    p.d.cuStreamDestroy(s2);
    return res(p, r2, note + "; then memset on a new stream and its synchronize");
}

}  // namespace

std::vector<Case> copy_cases() {
    return {
        {"copy_1d_past_end", Setup::ctx, with<c_copy_1d, 0>, "cuMemcpyAsync one byte past the allocations", nullptr},
        {"copy_1d_null_destination", Setup::ctx, with<c_copy_1d, 2>, "cuMemcpyAsync to address 0", nullptr},
        {"copy_1d_pageable_host_source", Setup::ctx, with<c_copy_1d, 3>,
         "cuMemcpyAsync from unregistered host memory", nullptr},
        {"copy_1d_into_released_slot", Setup::ctx, with<c_copy_1d, 4>,
         "cuMemcpyAsync into a slot range unmapped after use", kRefusedNotCrashed},
        {"copy_htod_null_source", Setup::ctx, with<c_copy_1d, 6>, "cuMemcpyHtoDAsync from NULL", nullptr},
        {"copy_htod_size_max", Setup::ctx, with<c_copy_1d, 7>, "cuMemcpyHtoDAsync of SIZE_MAX bytes", nullptr},
        {"copy_2d_dst_pitch_smaller_than_width", Setup::ctx, with<c_copy_2d, 0>,
         "cuMemcpy2DAsync with dstPitch < WidthInBytes", nullptr},
        {"copy_2d_single_row_pitch_smaller", Setup::ctx, with<c_copy_2d, 1>,
         "cuMemcpy2DAsync of one row with srcPitch < WidthInBytes", nullptr},
        {"copy_2d_height_zero", Setup::ctx, with<c_copy_2d, 2>, "cuMemcpy2DAsync of Height 0", nullptr},
        {"copy_2d_past_allocation", Setup::ctx, with<c_copy_2d, 4>,
         "cuMemcpy2DAsync whose rows run past the allocation", nullptr},
        {"copy_2d_null_desc", Setup::ctx, with<c_copy_2d, 6>, "cuMemcpy2DAsync(NULL)", nullptr},
        {"copy_2d_bad_memory_type", Setup::ctx, with<c_copy_2d, 7>, "cuMemcpy2DAsync with memory type 0",
         nullptr},
        {"copy_2d_array_null", Setup::ctx, with<c_copy_2d, 8>, "cuMemcpy2DAsync from a NULL CUDA array",
         nullptr},
        {"copy_2d_into_released_slot", Setup::ctx, with<c_copy_2d, 9>,
         "cuMemcpy2DAsync into a slot range unmapped after use", nullptr},
        {"copy_2d_huge_pitch", Setup::ctx, with<c_copy_2d, 11>, "cuMemcpy2DAsync with a 4 GiB source pitch",
         nullptr},
        {"copy_3d_src_height_smaller", Setup::ctx, with<c_copy_3d, 0>,
         "cuMemcpy3DAsync with srcHeight < Height over two slices", nullptr},
        {"copy_3d_pitch_smaller_than_width", Setup::ctx, with<c_copy_3d, 1>,
         "cuMemcpy3DAsync with srcPitch < WidthInBytes", nullptr},
        {"copy_3d_past_allocation", Setup::ctx, with<c_copy_3d, 2>,
         "cuMemcpy3DAsync whose slices run past the allocations", nullptr},
        {"copy_3d_null_desc", Setup::ctx, with<c_copy_3d, 3>, "cuMemcpy3DAsync(NULL)", nullptr},
        {"copy_3d_nonzero_lod", Setup::ctx, with<c_copy_3d, 4>, "cuMemcpy3DAsync with srcLOD 1", nullptr},
        {"copy_3d_depth_zero", Setup::ctx, with<c_copy_3d, 5>, "cuMemcpy3DAsync of Depth 0", nullptr},
        {"copy_3d_into_released_slot", Setup::ctx, with<c_copy_3d, 6>,
         "cuMemcpy3DAsync into a slot range unmapped after use", nullptr},
        {"copy_refused_then_valid", Setup::ctx, c_copy_refused_then_valid,
         "after a refused copy, a valid copy on the same stream and its synchronize", nullptr},
        {"copy_fault_sync", Setup::ctx, with<c_copy_fault, 0>,
         "a queued copy whose slot range is unmapped before it runs: the stream's synchronize", nullptr, true},
        {"copy_fault_unmap_waits", Setup::ctx, with<c_copy_fault, 1>,
         "does cuMemUnmap wait for a queued copy into the range", nullptr, true},
        {"copy_fault_then_mem_alloc", Setup::ctx, with<c_copy_fault, 2>,
         "after that copy, cuMemAlloc in the same context", nullptr, true},
        {"copy_fault_then_new_stream", Setup::ctx, with<c_copy_fault, 3>,
         "after that copy, work on a new stream and its synchronize", nullptr, true},
    };
}

}  // namespace xmc::probe
