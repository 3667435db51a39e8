// The first two recordings' cases (cuda_driver_580_h200.tsv): VMM: granularity, reservations, physical handles, mappings, access, and
// device work into unmapped or inaccessible ranges.
// probe_cases.cpp lists them, in the recording's order.
#include "probe_cases.h"
#include "probe_support.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace xmc::probe::recorded {

// -- VMM
Outcome c_vmm_granularity(P& p, CUmemAllocationGranularity_flags which) {
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    size_t g = 0;
    TRY(p.d.cuMemGetAllocationGranularity(&g, &prop, which));
    return value(static_cast<int64_t>(g), "bytes");
}

Outcome c_vmm_basic_cycle(P& p) {
    // reserve, create, map, grant, use (memset + copy back), unmap, release, free
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = mapped_range(p, cl, g);
    CUstream s = stream(p, cl);
    std::vector<unsigned char> back(4096, 0);
    TRY(p.d.cuMemsetD8Async(va, 0xab, g, s));
    TRY(p.d.cuMemcpyDtoHAsync(back.data(), va + g - back.size(), back.size(), s));
    TRY(p.d.cuStreamSynchronize(s));
    for (unsigned char c : back)
        if (c != 0xab) return word("no", 0, "contents after memset differ");
    return res(p, CUDA_SUCCESS, "memset + copy back through a fresh mapping");
}

Outcome c_vmm_reserve_unaligned_size(P& p) {
    size_t g = granularity(p);
    CUdeviceptr va = 0;
    CUresult r = p.d.cuMemAddressReserve(&va, g + 4096, 0, 0, 0);
    if (r == CUDA_SUCCESS) p.d.cuMemAddressFree(va, g + 4096);
    return res(p, r, "granularity + 4096 bytes");
}

Outcome c_vmm_create_unaligned_size(P& p) {
    size_t g = granularity(p);
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    CUmemGenericAllocationHandle h = 0;
    CUresult r = p.d.cuMemCreate(&h, g + g / 2, &prop, 0);
    if (r == CUDA_SUCCESS) p.d.cuMemRelease(h);
    return res(p, r, "1.5 x granularity");
}

Outcome c_vmm_create_invalid_device(P& p) {
    CUmemAllocationProp prop = vmm_prop(9999);
    CUmemGenericAllocationHandle h = 0;
    CUresult r = p.d.cuMemCreate(&h, granularity(p), &prop, 0);
    if (r == CUDA_SUCCESS) p.d.cuMemRelease(h);
    return res(p, r, "location id 9999");
}

Outcome c_vmm_map_unaligned(P& p, int which) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, 2 * g);
    CUmemGenericAllocationHandle h = create(p, cl, 2 * g);
    CUdeviceptr at = va;
    size_t size = g, off = 0;
    const char* note = "";
    if (which == 0) { off = 4096; note = "offset 4096"; }
    if (which == 1) { size = g / 2; note = "size granularity/2"; }
    if (which == 2) { at = va + 4096; note = "address reserved base + 4096"; }
    CUresult r = p.d.cuMemMap(at, size, off, h, 0);
    if (r == CUDA_SUCCESS) p.d.cuMemUnmap(at, size);
    return res(p, r, note);
}

Outcome c_vmm_map_beyond_handle(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, 2 * g);
    CUmemGenericAllocationHandle h = create(p, cl, g);
    CUresult r = p.d.cuMemMap(va, g, g, h, 0);
    if (r == CUDA_SUCCESS) p.d.cuMemUnmap(va, g);
    return res(p, r, "offset = handle size");
}

Outcome c_vmm_map_already_mapped(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    CUmemGenericAllocationHandle h1 = create(p, cl, g);
    CUmemGenericAllocationHandle h2 = create(p, cl, g);
    map(p, cl, va, g, h1);
    CUresult r = p.d.cuMemMap(va, g, 0, h2, 0);
    return res(p, r, "second handle onto the same mapped range");
}

Outcome c_vmm_map_outside_reservation(P& p) {
    size_t g = granularity(p);
    Cleanup cl;
    CUdeviceptr va = 0;
    TRY(p.d.cuMemAddressReserve(&va, g, 0, 0, 0));
    TRY(p.d.cuMemAddressFree(va, g));
    CUmemGenericAllocationHandle h = create(p, cl, g);
    CUresult r = p.d.cuMemMap(va, g, 0, h, 0);
    if (r == CUDA_SUCCESS) p.d.cuMemUnmap(va, g);
    return res(p, r, "a range freed by cuMemAddressFree");
}

Outcome c_vmm_set_access_unmapped(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    CUmemAccessDesc a;
    std::memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = p.dev[0];
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return res(p, p.d.cuMemSetAccess(va, g, &a, 1), "reserved, never mapped");
}

Outcome c_vmm_unmap_unmapped(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    return res(p, p.d.cuMemUnmap(va, g), "reserved, never mapped");
}

Outcome c_vmm_unmap_twice(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = mapping_to_unmap(p, cl, g);
    TRY(p.d.cuMemUnmap(va, g));
    return res(p, p.d.cuMemUnmap(va, g), "second unmap of the same range");
}

Outcome c_vmm_unmap_partial(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, 2 * g);
    CUmemGenericAllocationHandle h = create(p, cl, 2 * g);
    map(p, cl, va, 2 * g, h);
    CUresult r = p.d.cuMemUnmap(va, g);
    return res(p, r, "first granule of a two-granule mapping");
}

Outcome c_vmm_unmap_spanning_two_mappings(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, 2 * g);
    CUmemGenericAllocationHandle h1 = create(p, cl, g);
    CUmemGenericAllocationHandle h2 = create(p, cl, g);
    TRY(p.d.cuMemMap(va, g, 0, h1, 0));
    CUresult r2 = p.d.cuMemMap(va + g, g, 0, h2, 0);
    if (r2 != CUDA_SUCCESS) {
        p.d.cuMemUnmap(va, g);
        throw SetupFailed{r2, "cuMemMap(second)"};
    }
    CUresult r = p.d.cuMemUnmap(va, 2 * g);
    if (r != CUDA_SUCCESS) {
        p.d.cuMemUnmap(va, g);
        p.d.cuMemUnmap(va + g, g);
    }
    return res(p, r, "one unmap over two adjacent mappings");
}

Outcome c_vmm_release_twice(P& p) {
    size_t g = granularity(p);
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    CUmemGenericAllocationHandle h = 0;
    TRY(p.d.cuMemCreate(&h, g, &prop, 0));
    TRY(p.d.cuMemRelease(h));
    return res(p, p.d.cuMemRelease(h));
}

Outcome c_vmm_release_while_mapped(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    CUmemGenericAllocationHandle h = map_handle_to_release(p, cl, va, g);
    CUresult r = p.d.cuMemRelease(h);
    Driver* d = &p.d;
    if (r != CUDA_SUCCESS) cl.add([d, h] { d->cuMemRelease(h); });  // runs after the unmap
    return res(p, r, "release of a handle that is still mapped");
}

Outcome c_vmm_release_while_mapped_still_usable(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    CUmemGenericAllocationHandle h = map_handle_to_release(p, cl, va, g);
    grant(p, va, g);
    TRY(p.d.cuMemRelease(h));
    CUstream s = stream(p, cl);
    std::vector<unsigned char> back(4096, 0);
    TRY(p.d.cuMemsetD8Async(va, 0x3c, g, s));
    TRY(p.d.cuMemcpyDtoHAsync(back.data(), va, back.size(), s));
    CUresult r = p.d.cuStreamSynchronize(s);
    if (r != CUDA_SUCCESS) return res(p, r, "stream error using the mapping after release");
    bool ok = true;
    for (unsigned char c : back) ok = ok && c == 0x3c;
    return yes_no(ok, "memset + copy back through a mapping whose handle was released");
}

Outcome c_vmm_release_mapped_memory_returned_when(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    size_t n = 8 * g;
    CUdeviceptr va = reserve(p, cl, n);
    size_t before = free_mem(p);
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    CUmemGenericAllocationHandle h = 0;
    TRY(p.d.cuMemCreate(&h, n, &prop, 0));
    CUresult m = p.d.cuMemMap(va, n, 0, h, 0);
    if (m != CUDA_SUCCESS) {
        p.d.cuMemRelease(h);
        throw SetupFailed{m, "cuMemMap"};
    }
    size_t mapped = free_mem(p);
    TRY(p.d.cuMemRelease(h));
    size_t released = free_mem(p);
    TRY(p.d.cuMemUnmap(va, n));
    size_t unmapped = free_mem(p);
    std::string note = "free before " + std::to_string(before) + ", created+mapped " +
                       std::to_string(mapped) + ", released " + std::to_string(released) +
                       ", unmapped " + std::to_string(unmapped) + " (8 granules)";
    if (released >= mapped + n) return word("at_release", 0, note);
    if (unmapped >= mapped + n) return word("at_unmap", 1, note);
    return word("never", 2, note);
}

Outcome c_vmm_release_free_memory_growth(P& p) {
    // the growth of cuMemGetInfo's free memory when a 2 MiB handle is released
    size_t n = 2u << 20;
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    CUmemGenericAllocationHandle h = 0;
    TRY(p.d.cuMemCreate(&h, n, &prop, 0));
    size_t created = 0;
    try {
        created = free_mem(p);
    } catch (...) {
        p.d.cuMemRelease(h);
        throw;
    }
    TRY(p.d.cuMemRelease(h));
    size_t released = free_mem(p);
    int64_t growth = static_cast<int64_t>(released) - static_cast<int64_t>(created);
    return yes_no(growth >= static_cast<int64_t>(n),
                  "free memory grew by " + std::to_string(growth) + " bytes on releasing a 2 MiB handle");
}

Outcome c_vmm_address_free_with_mapping(P& p) {
    size_t g = granularity(p);
    Cleanup cl;
    CUdeviceptr va = 0;
    TRY(p.d.cuMemAddressReserve(&va, g, 0, 0, 0));
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    CUmemGenericAllocationHandle h = 0;
    CUresult c = p.d.cuMemCreate(&h, g, &prop, 0);
    if (c != CUDA_SUCCESS) {
        p.d.cuMemAddressFree(va, g);
        throw SetupFailed{c, "cuMemCreate"};
    }
    CUresult m = p.d.cuMemMap(va, g, 0, h, 0);
    if (m != CUDA_SUCCESS) {
        p.d.cuMemRelease(h);
        p.d.cuMemAddressFree(va, g);
        throw SetupFailed{m, "cuMemMap"};
    }
    CUresult r = p.d.cuMemAddressFree(va, g);
    // clean up whatever the answer was: unmap may fail if the free took the mapping
    CUresult u = p.d.cuMemUnmap(va, g);
    p.d.cuMemRelease(h);
    if (r != CUDA_SUCCESS) p.d.cuMemAddressFree(va, g);
    return res(p, r, "mapping still present; the later unmap answered " + result_name(p.d, u));
}

Outcome c_vmm_address_free_twice(P& p) {
    size_t g = granularity(p);
    CUdeviceptr va = 0;
    TRY(p.d.cuMemAddressReserve(&va, g, 0, 0, 0));
    TRY(p.d.cuMemAddressFree(va, g));
    return res(p, p.d.cuMemAddressFree(va, g));
}

Outcome c_vmm_address_free_wrong_size(P& p) {
    size_t g = granularity(p);
    CUdeviceptr va = 0;
    TRY(p.d.cuMemAddressReserve(&va, 2 * g, 0, 0, 0));
    CUresult r = p.d.cuMemAddressFree(va, g);
    if (r != CUDA_SUCCESS) p.d.cuMemAddressFree(va, 2 * g);
    return res(p, r, "reserved 2 granules, freed 1");
}

Outcome c_vmm_unmap_unaligned_size(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    return res(p, p.d.cuMemUnmap(va, 4096), "reserved, never mapped; size 4096");
}

Outcome c_vmm_unmap_outside_reservation(P& p) {
    size_t g = granularity(p);
    CUdeviceptr va = 0;
    TRY(p.d.cuMemAddressReserve(&va, g, 0, 0, 0));
    TRY(p.d.cuMemAddressFree(va, g));
    return res(p, p.d.cuMemUnmap(va, g), "a range freed by cuMemAddressFree");
}

Outcome c_vmm_map_released_handle(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    CUmemGenericAllocationHandle h = 0;
    TRY(p.d.cuMemCreate(&h, g, &prop, 0));
    TRY(p.d.cuMemRelease(h));
    CUresult r = p.d.cuMemMap(va, g, 0, h, 0);
    if (r == CUDA_SUCCESS) p.d.cuMemUnmap(va, g);
    return res(p, r);
}

Outcome c_vmm_reserve_bad_alignment(P& p) {
    size_t g = granularity(p);
    CUdeviceptr va = 0;
    CUresult r = p.d.cuMemAddressReserve(&va, g, 3 * g, 0, 0);
    if (r == CUDA_SUCCESS) p.d.cuMemAddressFree(va, g);
    return res(p, r, "alignment 3 x granularity");
}

Outcome c_vmm_reserve_zero_size(P& p) {
    CUdeviceptr va = 0;
    CUresult r = p.d.cuMemAddressReserve(&va, 0, 0, 0, 0);
    return res(p, r);
}

Outcome c_vmm_set_access_read_only(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    CUmemGenericAllocationHandle h = create(p, cl, g);
    map(p, cl, va, g, h);
    CUmemAccessDesc a;
    std::memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = p.dev[0];
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
    return res(p, p.d.cuMemSetAccess(va, g, &a, 1));
}

Outcome c_vmm_get_access_value(P& p, bool granted) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    CUmemGenericAllocationHandle h = create(p, cl, g);
    map(p, cl, va, g, h);
    if (granted) grant(p, va, g);
    CUmemLocation loc;
    loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
    loc.id = p.dev[0];
    unsigned long long f = 99;
    TRY(p.d.cuMemGetAccess(&f, &loc, va));
    return value(static_cast<int64_t>(f), granted ? "after READWRITE" : "mapped, access never set");
}

Outcome c_vmm_get_access_unmapped(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    CUmemLocation loc;
    loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
    loc.id = p.dev[0];
    unsigned long long f = 0;
    return res(p, p.d.cuMemGetAccess(&f, &loc, va), "reserved, never mapped");
}

// Device work on a VMM range that cannot be accessed: what enqueueing
// answers (which = 0..2) and, when it was accepted, what the stream answers.
// state 0: reserved, never mapped; 1: mapped without access; 2: unmapped after use.
Outcome c_vmm_device_work(P& p, int state, bool at_sync, bool copy) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    if (state >= 1) {
        CUmemGenericAllocationHandle h = create(p, cl, g);
        TRY(p.d.cuMemMap(va, g, 0, h, 0));
        Driver* d = &p.d;
        cl.add([d, va, g] { d->cuMemUnmap(va, g); });
        if (state == 2) {
            grant(p, va, g);
            TRY(p.d.cuMemUnmap(va, g));
        }
    }
    CUstream s = stream(p, cl);
    std::vector<unsigned char> src(65536, 1);
    CUresult r = copy ? p.d.cuMemcpyHtoDAsync(va, src.data(), src.size(), s)
                      : p.d.cuMemsetD8Async(va, 0x11, 65536, s);
    const char* what[] = {"reserved, never mapped", "mapped, no access set", "unmapped after use"};
    std::string note = std::string(copy ? "cuMemcpyHtoDAsync" : "cuMemsetD8Async") + " to a range " + what[state];
    if (!at_sync) {
        p.d.cuStreamSynchronize(s);
        return res(p, r, note + "; enqueue");
    }
    if (r != CUDA_SUCCESS) return word("skipped", 0, note + ": enqueue refused with " + result_name(p.d, r));
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, sr, note + "; stream synchronize");
}

}  // namespace xmc::probe::recorded
