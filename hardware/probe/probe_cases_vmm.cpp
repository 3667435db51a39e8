// Cases: the slots' driver calls beyond the first recordings (XMC_CU_VMM:
// granularity, reservations, physical handles, mappings, access): each
// refused argument, sizes above the device's memory, handles and ranges used
// after release or unmap, and what the next call answers after a refused
// cuMemCreate or cuMemMap (VMM-ERROR-CLEAR: a refusal leaves the slot able to
// map again).
#include "probe_support.h"

namespace xmc::probe {
namespace {

// -- granularity
Outcome c_vmm_granularity_case(P& p, int which) {
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    size_t g = 0;
    switch (which) {
        case 0: return res(p, p.d.cuMemGetAllocationGranularity(nullptr, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        case 1: return res(p, p.d.cuMemGetAllocationGranularity(&g, nullptr, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        default:
            prop.location.id = 9999;
            return res(p, p.d.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                       "location id 9999");
    }
}

// -- reservations
Outcome c_vmm_reserve_null_out(P& p) { return res(p, p.d.cuMemAddressReserve(nullptr, granularity(p), 0, 0, 0)); }

Outcome c_vmm_reserve_try(P& p, size_t n, CUdeviceptr hint, unsigned long long flags, const std::string& note) {
    CUdeviceptr va = 0;
    CUresult r = p.d.cuMemAddressReserve(&va, n, 0, hint, flags);
    if (r == CUDA_SUCCESS) p.d.cuMemAddressFree(va, n);
    return res(p, r, note);
}
Outcome c_vmm_reserve_huge(P& p) {
    return c_vmm_reserve_try(p, size_t(1) << 52, 0, 0, "4 PiB, far above any GPU's virtual address space");
}
Outcome c_vmm_reserve_bad_flags(P& p) { return c_vmm_reserve_try(p, granularity(p), 0, 1, "flags 1"); }

// A hint at a range freed just before: is the same address given again?
// (What a slot that frees and re-reserves its range would rely on.)
Outcome c_vmm_reserve_hint_freed_same_address(P& p) {
    size_t g = granularity(p);
    CUdeviceptr va = 0;
    TRY(p.d.cuMemAddressReserve(&va, g, 0, 0, 0));
    TRY(p.d.cuMemAddressFree(va, g));
    CUdeviceptr again = 0;
    TRY(p.d.cuMemAddressReserve(&again, g, 0, va, 0));
    p.d.cuMemAddressFree(again, g);
    return yes_no(again == va, "hint " + hex(va) + " (freed), got " + hex(again));
}

Outcome c_vmm_address_free_interior(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, 2 * g);
    return res(p, p.d.cuMemAddressFree(va + g, g), "second granule of a two-granule reservation");
}
// -- physical handles: cuMemCreate's refused arguments
Outcome c_vmm_create_case(P& p, int which) {
    size_t g = granularity(p);
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    CUmemGenericAllocationHandle h = 0;
    size_t n = g;
    unsigned long long flags = 0;
    const CUmemAllocationProp* arg = &prop;
    CUmemGenericAllocationHandle* out = &h;
    std::string note;
    switch (which) {
        case 0: out = nullptr; note = "NULL result"; break;
        case 1: arg = nullptr; note = "NULL properties"; break;
        case 2: n = 0; note = "size 0"; break;
        case 3: prop.type = CU_MEM_ALLOCATION_TYPE_INVALID; note = "type CU_MEM_ALLOCATION_TYPE_INVALID"; break;
        case 5: flags = 1; note = "flags 1"; break;
        default: {
            size_t t = total_mem(p);
            n = (t / g + 1) * g;
            note = "the device's memory rounded up to the granularity";
            break;
        }
    }
    CUresult r = p.d.cuMemCreate(out, n, arg, flags);
    if (r == CUDA_SUCCESS && out != nullptr) p.d.cuMemRelease(h);
    return res(p, r, note);
}

// After a refused cuMemCreate of more than the device has: the next create
// (which 0), and a whole slot cycle on it: map, access, memset, synchronize (1).
Outcome c_vmm_create_oom_then(P& p, int which) {
    Cleanup cl;
    size_t g = granularity(p);
    size_t t = total_mem(p);
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    CUmemGenericAllocationHandle big = 0;
    CUresult refused = p.d.cuMemCreate(&big, (t / g + 1) * g, &prop, 0);
    if (refused == CUDA_SUCCESS) {
        p.d.cuMemRelease(big);
        return word("skipped", 0, "a cuMemCreate above device memory was accepted");
    }
    std::string note = "after a refused cuMemCreate above device memory (" + result_name(p.d, refused) + "): ";
    if (which == 0) {
        CUmemGenericAllocationHandle h = 0;
        CUresult r = p.d.cuMemCreate(&h, g, &prop, 0);
        if (r == CUDA_SUCCESS) p.d.cuMemRelease(h);
        return res(p, r, note + "cuMemCreate of one granule");
    }
    CUstream s = stream(p, cl);
    CUdeviceptr va = mapped_range(p, cl, g);
    TRY(p.d.cuMemsetD8Async(va, 3, g, s));
    return res(p, p.d.cuStreamSynchronize(s), note + "create, map, access, memset, synchronize");
}

// -- release and map with handles that are not (or no longer) handles
Outcome c_vmm_release_zero_handle(P& p) { return res(p, p.d.cuMemRelease(0), "handle 0"); }
Outcome c_vmm_release_garbage_handle(P& p) {
    return res(p, p.d.cuMemRelease(0x7e57000000000000ull), "handle 0x7e57000000000000: may crash a real driver");
}

Outcome c_vmm_map_case(P& p, int which) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, 2 * g);
    CUmemGenericAllocationHandle h = create(p, cl, which == 5 ? 2 * g : g);
    size_t n = g;
    unsigned long long flags = 0;
    CUmemGenericAllocationHandle use = h;
    std::string note;
    switch (which) {
        case 0: n = 0; note = "size 0"; break;
        case 1: flags = 1; note = "flags 1"; break;
        case 2: use = 0; note = "handle 0"; break;
        case 3: use = 0x7e57000000000000ull; note = "handle 0x7e57000000000000: may crash a real driver"; break;
        case 4:
            map(p, cl, va, g, h);
            note = "the same handle, offset and range, already mapped";
            break;
        default: note = "the first granule of a two-granule handle"; break;
    }
    CUresult r = p.d.cuMemMap(va, n, 0, use, flags);
    if (r == CUDA_SUCCESS && which != 4) p.d.cuMemUnmap(va, n);
    return res(p, r, note);
}

// After a refused cuMemMap (an unaligned address: which 1; past the handle's
// end: 2), a whole use of the range: map, access, memset, synchronize.
Outcome c_vmm_map_refused_then(P& p, int which) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, 2 * g);
    CUmemGenericAllocationHandle h = create(p, cl, g);
    CUresult refused = which == 2 ? p.d.cuMemMap(va, 2 * g, 0, h, 0) : p.d.cuMemMap(va + 4096, g, 0, h, 0);
    if (refused == CUDA_SUCCESS) {
        p.d.cuMemUnmap(which == 2 ? va : va + 4096, which == 2 ? 2 * g : g);
        return word("skipped", 0, "the bad cuMemMap was accepted");
    }
    std::string note = std::string("after a refused cuMemMap (") + (which == 2 ? "past the handle's end" : "unaligned address") +
                       ", " + result_name(p.d, refused) + "): ";
    CUresult r = p.d.cuMemMap(va, g, 0, h, 0);
    if (r != CUDA_SUCCESS) return res(p, r, note + "cuMemMap of the granule");
    Driver* d = &p.d;
    cl.add([d, va, g] { d->cuMemUnmap(va, g); });
    grant(p, va, g);
    CUstream s = stream(p, cl);
    TRY(p.d.cuMemsetD8Async(va, 9, g, s));
    return res(p, p.d.cuStreamSynchronize(s), note + "map, access, memset, synchronize");
}

// The slot's cycle: map, unmap, map the same handle at the same range again,
// and use it.
Outcome c_vmm_remap_same_handle(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = mapping_to_unmap(p, cl, g, &h);
    TRY(p.d.cuMemUnmap(va, g));
    CUresult r = p.d.cuMemMap(va, g, 0, h, 0);
    if (r != CUDA_SUCCESS) return res(p, r, "map again after unmap");
    Driver* d = &p.d;
    cl.add([d, va, g] { d->cuMemUnmap(va, g); });
    grant(p, va, g);
    CUstream s = stream(p, cl);
    TRY(p.d.cuMemsetD8Async(va, 5, g, s));
    return res(p, p.d.cuStreamSynchronize(s), "map, unmap, map again, access, memset, synchronize");
}

// -- unmap
Outcome c_vmm_unmap_zero_size(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = mapped_range(p, cl, g);
    return res(p, p.d.cuMemUnmap(va, 0), "size 0 of a mapped range");
}
Outcome c_vmm_unmap_unaligned_address_mapped(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = mapped_range(p, cl, 2 * g);
    return res(p, p.d.cuMemUnmap(va + 4096, g), "base + 4096 of a two-granule mapping, one granule");
}

// -- access
Outcome c_vmm_set_access_case(P& p, int which) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, 2 * g);
    CUmemGenericAllocationHandle h = create(p, cl, which == 4 ? g : 2 * g);
    CUmemAccessDesc a = access_desc(p.dev[0], CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    const CUmemAccessDesc* desc = &a;
    std::string note;
    if (which == 4) {
        map(p, cl, va, g, h);
        note = "two granules, only the first mapped";
    } else {
        map(p, cl, va, 2 * g, h);
    }
    switch (which) {
        case 0: desc = nullptr; note = "NULL descriptors"; break;
        case 2: a.location.id = 9999; note = "location id 9999"; break;
        case 3: a.flags = static_cast<CUmemAccess_flags>(0x10); note = "flags 0x10"; break;
        case 4: break;
        case 5: TRY(p.d.cuMemUnmap(va, 2 * g)); note = "unmapped after mapping"; break;
        default: a.flags = CU_MEM_ACCESS_FLAGS_PROT_NONE; note = "CU_MEM_ACCESS_FLAGS_PROT_NONE of a mapping"; break;
    }
    return res(p, p.d.cuMemSetAccess(va, 2 * g, desc, 1), note);
}

}  // namespace

std::vector<Case> vmm_cases() {
    return {
        {"vmm_granularity_null_out", Setup::ctx, with<c_vmm_granularity_case, 0>,
         "cuMemGetAllocationGranularity with a NULL result", nullptr},
        {"vmm_granularity_null_prop", Setup::ctx, with<c_vmm_granularity_case, 1>,
         "cuMemGetAllocationGranularity with NULL properties", nullptr},
        {"vmm_granularity_invalid_device", Setup::ctx, with<c_vmm_granularity_case, 3>,
         "cuMemGetAllocationGranularity of a device that does not exist", nullptr},
        {"vmm_reserve_null_out", Setup::ctx, c_vmm_reserve_null_out, "cuMemAddressReserve with a NULL result",
         nullptr},
        {"vmm_reserve_huge", Setup::ctx, c_vmm_reserve_huge, "cuMemAddressReserve of 4 PiB", nullptr},
        {"vmm_reserve_bad_flags", Setup::ctx, c_vmm_reserve_bad_flags, "cuMemAddressReserve with flags 1", nullptr},
        {"vmm_reserve_hint_freed_same_address", Setup::ctx, c_vmm_reserve_hint_freed_same_address,
         "does a hint at a just-freed range give that address again", nullptr},
        {"vmm_address_free_interior", Setup::ctx, c_vmm_address_free_interior,
         "cuMemAddressFree of the second half of a reservation", nullptr},
        {"vmm_create_null_out", Setup::ctx, with<c_vmm_create_case, 0>, "cuMemCreate with a NULL result", nullptr},
        {"vmm_create_null_prop", Setup::ctx, with<c_vmm_create_case, 1>, "cuMemCreate with NULL properties", nullptr},
        {"vmm_create_zero_size", Setup::ctx, with<c_vmm_create_case, 2>, "cuMemCreate of 0 bytes", nullptr},
        {"vmm_create_bad_type", Setup::ctx, with<c_vmm_create_case, 3>, "cuMemCreate with allocation type INVALID",
         nullptr},
        {"vmm_create_bad_flags", Setup::ctx, with<c_vmm_create_case, 5>, "cuMemCreate with flags 1", nullptr},
        {"vmm_create_above_total", Setup::ctx, with<c_vmm_create_case, 7>, "cuMemCreate above the device's memory",
         nullptr},
        {"vmm_create_oom_then_valid", Setup::ctx, with<c_vmm_create_oom_then, 0>,
         "after a refused oversized cuMemCreate, cuMemCreate of one granule", nullptr},
        {"vmm_create_oom_then_slot_cycle", Setup::ctx, with<c_vmm_create_oom_then, 1>,
         "after a refused oversized cuMemCreate, create, map, access, memset, synchronize", nullptr},
        {"vmm_release_zero_handle", Setup::ctx, c_vmm_release_zero_handle, "cuMemRelease(0)", nullptr},
        {"vmm_release_garbage_handle", Setup::ctx, c_vmm_release_garbage_handle,
         "cuMemRelease of a number that was never a handle", kRefusedNotCrashed},
        {"vmm_map_zero_size", Setup::ctx, with<c_vmm_map_case, 0>, "cuMemMap of 0 bytes", nullptr},
        {"vmm_map_bad_flags", Setup::ctx, with<c_vmm_map_case, 1>, "cuMemMap with flags 1", nullptr},
        {"vmm_map_zero_handle", Setup::ctx, with<c_vmm_map_case, 2>, "cuMemMap of handle 0", nullptr},
        {"vmm_map_garbage_handle", Setup::ctx, with<c_vmm_map_case, 3>,
         "cuMemMap of a number that was never a handle", kRefusedNotCrashed},
        {"vmm_map_twice_same_handle", Setup::ctx, with<c_vmm_map_case, 4>,
         "cuMemMap of the same handle onto its own mapping", nullptr},
        {"vmm_map_part_of_handle", Setup::ctx, with<c_vmm_map_case, 5>,
         "cuMemMap of the first granule of a two-granule handle", nullptr},
        {"vmm_map_refused_then_use", Setup::ctx, with<c_vmm_map_refused_then, 1>,
         "after a refused unaligned cuMemMap, map, access, memset, synchronize", nullptr},
        {"vmm_map_past_end_then_use", Setup::ctx, with<c_vmm_map_refused_then, 2>,
         "after a refused cuMemMap past the handle, map, access, memset, synchronize", nullptr},
        {"vmm_remap_same_handle", Setup::ctx, c_vmm_remap_same_handle,
         "map, unmap, map the same handle again and use it", nullptr},
        {"vmm_unmap_zero_size", Setup::ctx, c_vmm_unmap_zero_size, "cuMemUnmap of 0 bytes of a mapping", nullptr},
        {"vmm_unmap_unaligned_address_mapped", Setup::ctx, c_vmm_unmap_unaligned_address_mapped,
         "cuMemUnmap at an unaligned address inside a mapping", nullptr},
        {"vmm_set_access_null_desc", Setup::ctx, with<c_vmm_set_access_case, 0>, "cuMemSetAccess with NULL descriptors",
         nullptr},
        {"vmm_set_access_invalid_device", Setup::ctx, with<c_vmm_set_access_case, 2>,
         "cuMemSetAccess for a device that does not exist", nullptr},
        {"vmm_set_access_bad_flags", Setup::ctx, with<c_vmm_set_access_case, 3>, "cuMemSetAccess with flags 0x10",
         nullptr},
        {"vmm_set_access_partially_mapped", Setup::ctx, with<c_vmm_set_access_case, 4>,
         "cuMemSetAccess of a range only half mapped", nullptr},
        {"vmm_set_access_after_unmap", Setup::ctx, with<c_vmm_set_access_case, 5>,
         "cuMemSetAccess of a range unmapped after mapping", nullptr},
        {"vmm_set_access_prot_none", Setup::ctx, with<c_vmm_set_access_case, 6>,
         "cuMemSetAccess with CU_MEM_ACCESS_FLAGS_PROT_NONE", nullptr},
    };
}

}  // namespace xmc::probe
