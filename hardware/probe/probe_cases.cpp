// The probe's driver access and its list of cases: each case a short call
// sequence that records one answer of the driver and cleans up what it created
// (probe_recorded_<area>.cpp: the first two recordings'; probe_cases_<area>.cpp:
// the third's). See cuda_probe.cpp for how they are run and probe_format.h for
// how the answers are recorded.
#include "probe_cases.h"
#include "probe_support.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace xmc::probe {

// Loads the library and resolves every entry point; false with a message.
bool load_driver(const std::string& path, Driver& d, std::string& error) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
        const char* e = dlerror();
        error = "dlopen(" + path + "): " + (e ? e : "unknown error");
        return false;
    }
#define XMC_PROBE_RESOLVE(name)                                                   \
    d.name = reinterpret_cast<decltype(d.name)>(dlsym(h, XMC_PROBE_SYM(name)));   \
    if (d.name == nullptr) {                                                      \
        error = std::string("missing entry point ") + XMC_PROBE_SYM(name) + " in " + path; \
        return false;                                                             \
    }
    XMC_PROBE_ENTRIES(XMC_PROBE_RESOLVE)
#undef XMC_PROBE_RESOLVE
#define XMC_PROBE_RESOLVE_OPTIONAL(name) \
    d.name = reinterpret_cast<decltype(d.name)>(dlsym(h, XMC_PROBE_SYM(name)));
    XMC_PROBE_OPTIONAL(XMC_PROBE_RESOLVE_OPTIONAL)
#undef XMC_PROBE_RESOLVE_OPTIONAL
    d.fake_live_objects =
        reinterpret_cast<size_t (*)()>(dlsym(h, "xmc_fake_cuda_live_objects"));
    d.fake_ledger = reinterpret_cast<size_t (*)(char*, size_t)>(dlsym(h, "xmc_fake_cuda_ledger"));
    d.fake_reclaimed_objects =
        reinterpret_cast<size_t (*)()>(dlsym(h, "xmc_fake_cuda_reclaimed_objects"));
    return true;  // the handle stays open for the child's lifetime
}

std::string result_name(const Driver& d, CUresult r) {
    const char* s = nullptr;
    if (d.cuGetErrorName != nullptr && d.cuGetErrorName(r, &s) == CUDA_SUCCESS && s != nullptr)
        return s;
    return "CUresult_" + std::to_string(static_cast<int>(r));
}

Outcome word(const char* w, int64_t code, std::string note) { return Outcome{w, code, std::move(note)}; }

// ---- the case table ----------------------------------------------------------

// The first two recordings' cases, written by area in probe_recorded_<area>.cpp.
namespace recorded {
// probe_recorded_memory.cpp
Outcome c_init_not_called(P&), c_device_get_invalid_ordinal(P&), c_primary_ctx_release_unretained(P&),
    c_ctx_pop_empty(P&), c_reg_basic(P&), c_reg_double_same_range(P&), c_reg_overlap_partial(P&),
    c_reg_overlap_contained(P&), c_reg_overlap_containing(P&), c_reg_adjacent(P&), c_reg_unaligned_address(P&),
    c_reg_unaligned_size(P&), c_reg_unaligned_unregister(P&), c_reg_unaligned_unregister_page_base(P&),
    c_reg_unaligned_same_page(P&), c_reg_zero_size(P&), c_reg_null(P&), c_reg_invalid_flags(P&),
    c_reg_unmapped_memory(P&), c_reg_readonly_memory(P&), c_reg_device_memory(P&), c_reg_after_unregister(P&),
    c_unreg_interior(P&), c_unreg_interior_unaligned(P&), c_unreg_interior_then_base(P&), c_unreg_twice(P&),
    c_unreg_never_registered(P&), c_unreg_null(P&), c_unreg_no_current_context(P&), c_reg_get_flags(P&, bool,
    size_t, bool), c_ptr_attr(P&, bool, CUpointer_attribute, int), c_ptr_attr_memory_type_device_value(P&),
    c_get_dev_ptr(P&, bool, size_t, unsigned, bool), c_reg2_same_range_other_context(P&),
    c_reg2_get_dev_ptr_other_context(P&, unsigned), c_reg2_unregister_from_other_context(P&), c_no_ctx(P&, int),
    c_no_ctx_get_device_pointer(P&), c_reg_readonly_memory_with_flag(P&), c_reg_get_flags_value(P&, unsigned);
// probe_recorded_stream.cpp
Outcome c_callback_mem_alloc(P&), c_callback_mem_get_info(P&), c_callback_event_record_other_stream(P&),
    c_callback_stream_query_other_stream(P&), c_callback_ctx_get_current(P&), c_callback_mem_unmap(P&),
    c_mem_alloc_zero(P&), c_mem_free_interior(P&), c_mem_free_twice(P&), c_mem_free_null(P&),
    c_event_query_unrecorded(P&), c_event_synchronize_unrecorded(P&), c_event_elapsed_unrecorded(P&),
    c_event_elapsed_disable_timing(P&), c_stream_wait_event_unrecorded(P&), c_copy_2d_pitch_smaller_than_width(P&),
    c_copy_htod_to_host_pointer(P&), c_copy_zero_bytes(P&), c_memset_past_allocation_end(P&),
    c_stream_destroy_twice(P&), c_event_record_other_context(P&), c_stream_wait_event_other_context(P&),
    c_copy_dtod_between_devices(P&);
// probe_recorded_vmm.cpp
Outcome c_vmm_granularity(P&, CUmemAllocationGranularity_flags), c_vmm_basic_cycle(P&),
    c_vmm_reserve_unaligned_size(P&), c_vmm_create_unaligned_size(P&), c_vmm_create_invalid_device(P&),
    c_vmm_map_unaligned(P&, int), c_vmm_map_beyond_handle(P&), c_vmm_map_already_mapped(P&),
    c_vmm_map_outside_reservation(P&), c_vmm_set_access_unmapped(P&), c_vmm_unmap_unmapped(P&),
    c_vmm_unmap_twice(P&), c_vmm_unmap_partial(P&), c_vmm_unmap_spanning_two_mappings(P&), c_vmm_release_twice(P&),
    c_vmm_release_while_mapped(P&), c_vmm_release_while_mapped_still_usable(P&),
    c_vmm_release_mapped_memory_returned_when(P&), c_vmm_release_free_memory_growth(P&),
    c_vmm_address_free_with_mapping(P&), c_vmm_address_free_twice(P&), c_vmm_address_free_wrong_size(P&),
    c_vmm_unmap_unaligned_size(P&), c_vmm_unmap_outside_reservation(P&), c_vmm_map_released_handle(P&),
    c_vmm_reserve_bad_alignment(P&), c_vmm_reserve_zero_size(P&), c_vmm_set_access_read_only(P&),
    c_vmm_get_access_value(P&, bool), c_vmm_get_access_unmapped(P&), c_vmm_device_work(P&, int, bool, bool);
}  // namespace recorded

namespace {

// The cases of the first two recordings, in their order.
std::vector<Case> recorded_cases() {
    using namespace recorded;
    return {
        {"init_not_called_device_get_count", Setup::none, c_init_not_called,
         "cuDeviceGetCount before cuInit", nullptr},
        {"device_get_invalid_ordinal", Setup::init, c_device_get_invalid_ordinal,
         "cuDeviceGet(ordinal = device count)", nullptr},
        {"primary_ctx_release_unretained", Setup::init, c_primary_ctx_release_unretained,
         "cuDevicePrimaryCtxRelease of a never-retained primary context", nullptr},
        {"ctx_pop_empty", Setup::ctx, c_ctx_pop_empty, "cuCtxPopCurrent with no current context", nullptr},

        {"reg_basic", Setup::ctx, c_reg_basic, "register 16 page-aligned pages, flags 0", nullptr},
        {"reg_double_same_range", Setup::ctx, c_reg_double_same_range,
         "register the same range twice", nullptr},
        {"reg_overlap_partial", Setup::ctx, c_reg_overlap_partial,
         "register a range overlapping half of a registered one", nullptr},
        {"reg_overlap_contained", Setup::ctx, c_reg_overlap_contained,
         "register a range inside a registered one", nullptr},
        {"reg_overlap_containing", Setup::ctx, c_reg_overlap_containing,
         "register a range containing a registered one", nullptr},
        {"reg_adjacent", Setup::ctx, c_reg_adjacent, "register a range adjacent to a registered one", nullptr},
        {"reg_unaligned_address", Setup::ctx, c_reg_unaligned_address,
         "register an address 8 bytes past a page start", nullptr},
        {"reg_unaligned_size", Setup::ctx, c_reg_unaligned_size,
         "register a size that is not a page multiple", nullptr},
        {"reg_unaligned_unregister", Setup::ctx, c_reg_unaligned_unregister,
         "unregister an unaligned registration by the pointer given", nullptr},
        {"reg_unaligned_unregister_page_base", Setup::ctx, c_reg_unaligned_unregister_page_base,
         "unregister an unaligned registration by its page base", nullptr},
        {"reg_unaligned_same_page", Setup::ctx, c_reg_unaligned_same_page,
         "register two disjoint unaligned ranges in one page", nullptr},
        {"reg_zero_size", Setup::ctx, c_reg_zero_size, "register 0 bytes", nullptr},
        {"reg_null", Setup::ctx, c_reg_null, "register a null pointer", nullptr},
        {"reg_invalid_flags", Setup::ctx, c_reg_invalid_flags, "register with an unknown flag", nullptr},
        {"reg_unmapped_memory", Setup::ctx, c_reg_unmapped_memory, "register unmapped memory", nullptr},
        {"reg_readonly_memory", Setup::ctx, c_reg_readonly_memory,
         "register PROT_READ memory without CU_MEMHOSTREGISTER_READ_ONLY", nullptr},
        {"reg_device_memory", Setup::ctx, c_reg_device_memory, "register a cuMemAlloc pointer", nullptr},
        {"reg_after_unregister", Setup::ctx, c_reg_after_unregister,
         "register, unregister, register again", nullptr},
        {"unreg_interior", Setup::ctx, c_unreg_interior, "unregister base + 1 page", nullptr},
        {"unreg_interior_unaligned", Setup::ctx, c_unreg_interior_unaligned,
         "unregister base + 64 bytes", nullptr},
        {"unreg_interior_then_base", Setup::ctx, c_unreg_interior_then_base,
         "after a refused interior unregister, unregister the base", nullptr},
        {"unreg_twice", Setup::ctx, c_unreg_twice, "unregister the same base twice", nullptr},
        {"unreg_never_registered", Setup::ctx, c_unreg_never_registered,
         "unregister memory never registered", nullptr},
        {"unreg_null", Setup::ctx, c_unreg_null, "unregister a null pointer", nullptr},
        {"unreg_no_current_context", Setup::ctx, c_unreg_no_current_context,
         "unregister with no current context", nullptr},
        {"reg_get_flags_registered", Setup::ctx, with<c_reg_get_flags, true, 0, false>,
         "cuMemHostGetFlags of a registered base", nullptr},
        {"reg_get_flags_registered_value", Setup::ctx, with<c_reg_get_flags, true, 0, true>,
         "the flags cuMemHostGetFlags reports for a DEVICEMAP registration", nullptr},
        {"reg_get_flags_interior", Setup::ctx, with<c_reg_get_flags, true, 64, false>,
         "cuMemHostGetFlags of a registered interior address", nullptr},
        {"reg_get_flags_unregistered", Setup::ctx, with<c_reg_get_flags, false, 0, false>,
         "cuMemHostGetFlags of unregistered memory", nullptr},
        {"ptr_attr_device_pointer_registered", Setup::ctx, with<c_ptr_attr, true, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, 0>,
         "CU_POINTER_ATTRIBUTE_DEVICE_POINTER of registered memory", nullptr},
        {"ptr_attr_device_pointer_registered_identity", Setup::ctx,
         with<c_ptr_attr, true, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, 2>,
         "is that device pointer the host pointer", nullptr},
        {"ptr_attr_memory_type_registered", Setup::ctx, with<c_ptr_attr, true, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 0>,
         "CU_POINTER_ATTRIBUTE_MEMORY_TYPE of registered memory", nullptr},
        {"ptr_attr_memory_type_registered_value", Setup::ctx, with<c_ptr_attr, true, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 1>,
         "the memory type of registered memory", nullptr},
        {"ptr_attr_device_pointer_unregistered", Setup::ctx, with<c_ptr_attr, false, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, 0>,
         "CU_POINTER_ATTRIBUTE_DEVICE_POINTER of unregistered memory", nullptr},
        {"ptr_attr_memory_type_unregistered", Setup::ctx, with<c_ptr_attr, false, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 0>,
         "CU_POINTER_ATTRIBUTE_MEMORY_TYPE of unregistered memory", nullptr},
        {"ptr_attr_memory_type_device_value", Setup::ctx, c_ptr_attr_memory_type_device_value,
         "the memory type of cuMemAlloc memory", nullptr},
        {"host_get_device_pointer_registered", Setup::ctx, with<c_get_dev_ptr, true, 0, 0, false>,
         "cuMemHostGetDevicePointer of a registered base", nullptr},
        {"host_get_device_pointer_identity", Setup::ctx, with<c_get_dev_ptr, true, 0, 0, true>,
         "is that device pointer the host pointer", nullptr},
        {"host_get_device_pointer_interior", Setup::ctx, with<c_get_dev_ptr, true, 100, 0, false>,
         "cuMemHostGetDevicePointer of a registered interior address", nullptr},
        {"host_get_device_pointer_interior_identity", Setup::ctx, with<c_get_dev_ptr, true, 100, 0, true>,
         "is the interior device pointer the host pointer", nullptr},
        {"host_get_device_pointer_unregistered", Setup::ctx, with<c_get_dev_ptr, false, 0, 0, false>,
         "cuMemHostGetDevicePointer of unregistered memory", nullptr},
        {"host_get_device_pointer_nonzero_flags", Setup::ctx, with<c_get_dev_ptr, true, 0, 1, false>,
         "cuMemHostGetDevicePointer with flags 1", nullptr},
        {"reg2_same_range_other_context", Setup::ctx2, c_reg2_same_range_other_context,
         "register in device 0's context, then the same range in device 1's", nullptr},
        {"reg2_get_device_pointer_other_context", Setup::ctx2, with<c_reg2_get_dev_ptr_other_context, CU_MEMHOSTREGISTER_DEVICEMAP>,
         "device pointer of a non-portable registration asked in another device's context", nullptr},
        {"reg2_get_device_pointer_other_context_portable", Setup::ctx2,
         with<c_reg2_get_dev_ptr_other_context, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE>,
         "device pointer of a portable registration asked in another device's context", nullptr},
        {"reg2_unregister_from_other_context", Setup::ctx2, c_reg2_unregister_from_other_context,
         "unregister from another device's context", nullptr},

        {"callback_mem_alloc", Setup::ctx, c_callback_mem_alloc, "cuMemAlloc inside a host callback",
         kNotPermitted},
        {"callback_mem_get_info", Setup::ctx, c_callback_mem_get_info,
         "cuMemGetInfo inside a host callback", kNotPermitted},
        {"callback_event_record_other_stream", Setup::ctx, c_callback_event_record_other_stream,
         "cuEventRecord on another stream inside a host callback", kNotPermitted},
        {"callback_stream_query_other_stream", Setup::ctx, c_callback_stream_query_other_stream,
         "cuStreamQuery of another stream inside a host callback", kNotPermitted},
        {"callback_ctx_get_current", Setup::ctx, c_callback_ctx_get_current,
         "cuCtxGetCurrent inside a host callback", kNotPermitted},
        {"callback_mem_unmap", Setup::ctx, c_callback_mem_unmap, "cuMemUnmap inside a host callback",
         kNotPermitted},

        {"vmm_granularity_minimum", Setup::ctx, with<c_vmm_granularity, CU_MEM_ALLOC_GRANULARITY_MINIMUM>,
         "minimum allocation granularity of device 0", nullptr},
        {"vmm_granularity_recommended", Setup::ctx, with<c_vmm_granularity, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED>,
         "recommended allocation granularity of device 0", nullptr},
        {"vmm_basic_cycle", Setup::ctx, c_vmm_basic_cycle,
         "reserve, create, map, set access, memset, copy back, unmap, release, free", nullptr},
        {"vmm_reserve_unaligned_size", Setup::ctx, c_vmm_reserve_unaligned_size,
         "cuMemAddressReserve of a size that is not a granularity multiple", nullptr},
        {"vmm_create_unaligned_size", Setup::ctx, c_vmm_create_unaligned_size,
         "cuMemCreate of a size that is not a granularity multiple", nullptr},
        {"vmm_create_invalid_device", Setup::ctx, c_vmm_create_invalid_device,
         "cuMemCreate on a device that does not exist", nullptr},
        {"vmm_map_unaligned_offset", Setup::ctx, with<c_vmm_map_unaligned, 0>,
         "cuMemMap with an unaligned offset", nullptr},
        {"vmm_map_unaligned_size", Setup::ctx, with<c_vmm_map_unaligned, 1>, "cuMemMap with an unaligned size",
         nullptr},
        {"vmm_map_unaligned_address", Setup::ctx, with<c_vmm_map_unaligned, 2>,
         "cuMemMap at an unaligned address", nullptr},
        {"vmm_map_beyond_handle", Setup::ctx, c_vmm_map_beyond_handle,
         "cuMemMap of offset+size past the handle's end", nullptr},
        {"vmm_map_already_mapped", Setup::ctx, c_vmm_map_already_mapped,
         "cuMemMap onto an already-mapped range", nullptr},
        {"vmm_map_outside_reservation", Setup::ctx, c_vmm_map_outside_reservation,
         "cuMemMap onto a range that is not reserved", nullptr},
        {"vmm_set_access_unmapped", Setup::ctx, c_vmm_set_access_unmapped,
         "cuMemSetAccess of a reserved but unmapped range", nullptr},
        {"vmm_unmap_unmapped", Setup::ctx, c_vmm_unmap_unmapped,
         "cuMemUnmap of a reserved range never mapped", nullptr},
        {"vmm_unmap_twice", Setup::ctx, c_vmm_unmap_twice, "cuMemUnmap of a range already unmapped",
         nullptr},
        {"vmm_unmap_partial", Setup::ctx, c_vmm_unmap_partial, "cuMemUnmap of part of a mapping", nullptr},
        {"vmm_unmap_spanning_two_mappings", Setup::ctx, c_vmm_unmap_spanning_two_mappings,
         "one cuMemUnmap over two adjacent mappings", nullptr},
        {"vmm_release_twice", Setup::ctx, c_vmm_release_twice, "cuMemRelease of the same handle twice",
         nullptr},
        {"vmm_release_while_mapped", Setup::ctx, c_vmm_release_while_mapped,
         "cuMemRelease of a handle that is still mapped", nullptr},
        {"vmm_release_while_mapped_still_usable", Setup::ctx, c_vmm_release_while_mapped_still_usable,
         "a mapping stays usable after its handle is released", nullptr},
        {"vmm_release_mapped_memory_returned_when", Setup::ctx, c_vmm_release_mapped_memory_returned_when,
         "when free memory grows for a handle released while mapped", nullptr, true},
        {"vmm_release_free_memory_growth", Setup::ctx, c_vmm_release_free_memory_growth,
         "cuMemGetInfo free memory grows by >= 2 MiB on releasing a 2 MiB handle", nullptr, true},
        {"vmm_address_free_with_mapping", Setup::ctx, c_vmm_address_free_with_mapping,
         "cuMemAddressFree of a range with a mapping present", nullptr},
        {"vmm_address_free_twice", Setup::ctx, c_vmm_address_free_twice,
         "cuMemAddressFree of the same range twice", nullptr},
        {"vmm_address_free_wrong_size", Setup::ctx, c_vmm_address_free_wrong_size,
         "cuMemAddressFree with a size other than the reserved one", nullptr},

        {"mem_alloc_zero", Setup::ctx, c_mem_alloc_zero, "cuMemAlloc of 0 bytes", nullptr},
        {"mem_free_interior", Setup::ctx, c_mem_free_interior, "cuMemFree of an interior pointer", nullptr},
        {"mem_free_twice", Setup::ctx, c_mem_free_twice, "cuMemFree twice", nullptr},
        {"mem_free_null", Setup::ctx, c_mem_free_null, "cuMemFree(0)", nullptr},
        {"event_query_unrecorded", Setup::ctx, c_event_query_unrecorded,
         "cuEventQuery of a never-recorded event", nullptr},
        {"event_synchronize_unrecorded", Setup::ctx, c_event_synchronize_unrecorded,
         "cuEventSynchronize of a never-recorded event", nullptr},
        {"event_elapsed_unrecorded", Setup::ctx, c_event_elapsed_unrecorded,
         "cuEventElapsedTime of never-recorded events", nullptr},
        {"event_elapsed_disable_timing", Setup::ctx, c_event_elapsed_disable_timing,
         "cuEventElapsedTime of CU_EVENT_DISABLE_TIMING events", nullptr},
        {"stream_wait_event_unrecorded", Setup::ctx, c_stream_wait_event_unrecorded,
         "cuStreamWaitEvent on a never-recorded event", nullptr},
        {"copy_2d_pitch_smaller_than_width", Setup::ctx, c_copy_2d_pitch_smaller_than_width,
         "cuMemcpy2DAsync with a pitch smaller than the width", nullptr},
        {"copy_htod_to_host_pointer", Setup::ctx, c_copy_htod_to_host_pointer,
         "cuMemcpyHtoDAsync whose destination is unregistered host memory", nullptr},

        // added in the second recording
        {"no_ctx_register", Setup::ctx, with<c_no_ctx, 0>, "cuMemHostRegister with no current context",
         nullptr},
        {"no_ctx_mem_alloc", Setup::ctx, with<c_no_ctx, 1>, "cuMemAlloc with no current context", nullptr},
        {"no_ctx_mem_get_info", Setup::ctx, with<c_no_ctx, 2>, "cuMemGetInfo with no current context",
         nullptr},
        {"no_ctx_stream_create", Setup::ctx, with<c_no_ctx, 3>, "cuStreamCreate with no current context",
         nullptr},
        {"no_ctx_host_get_device_pointer", Setup::ctx, c_no_ctx_get_device_pointer,
         "cuMemHostGetDevicePointer with no current context", nullptr},
        {"reg_readonly_memory_with_flag", Setup::ctx, c_reg_readonly_memory_with_flag,
         "register PROT_READ memory with CU_MEMHOSTREGISTER_READ_ONLY", nullptr},
        {"reg_get_flags_plain_value", Setup::ctx, with<c_reg_get_flags_value, 0>,
         "the flags cuMemHostGetFlags reports for a flags-0 registration", nullptr},
        {"reg_get_flags_portable_value", Setup::ctx, with<c_reg_get_flags_value, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP>,
         "the flags cuMemHostGetFlags reports for a PORTABLE|DEVICEMAP registration", nullptr},
        {"vmm_unmap_unaligned_size", Setup::ctx, c_vmm_unmap_unaligned_size,
         "cuMemUnmap of 4096 bytes of a reservation", nullptr},
        {"vmm_unmap_outside_reservation", Setup::ctx, c_vmm_unmap_outside_reservation,
         "cuMemUnmap of a range that is not reserved", nullptr},
        {"vmm_map_released_handle", Setup::ctx, c_vmm_map_released_handle, "cuMemMap of a released handle",
         kRefusedNotCrashed},
        {"vmm_reserve_bad_alignment", Setup::ctx, c_vmm_reserve_bad_alignment,
         "cuMemAddressReserve with an alignment that is not a power of two", nullptr},
        {"vmm_reserve_zero_size", Setup::ctx, c_vmm_reserve_zero_size, "cuMemAddressReserve of 0 bytes", nullptr},
        {"vmm_set_access_read_only", Setup::ctx, c_vmm_set_access_read_only,
         "cuMemSetAccess with CU_MEM_ACCESS_FLAGS_PROT_READ", nullptr},
        {"vmm_get_access_granted_value", Setup::ctx, with<c_vmm_get_access_value, true>,
         "cuMemGetAccess after READWRITE was set", nullptr},
        {"vmm_get_access_not_granted_value", Setup::ctx, with<c_vmm_get_access_value, false>,
         "cuMemGetAccess of a mapping whose access was never set", nullptr},
        {"vmm_get_access_unmapped", Setup::ctx, c_vmm_get_access_unmapped,
         "cuMemGetAccess of a reserved, unmapped address", nullptr},
        {"vmm_memset_unmapped_enqueue", Setup::ctx, with<c_vmm_device_work, 0, false, false>,
         "cuMemsetD8Async into a reserved, never mapped range", nullptr},
        {"vmm_memset_unmapped_sync", Setup::ctx, with<c_vmm_device_work, 0, true, false>,
         "then cuStreamSynchronize", nullptr},
        {"vmm_memset_no_access_enqueue", Setup::ctx, with<c_vmm_device_work, 1, false, false>,
         "cuMemsetD8Async into a mapping without access", nullptr},
        {"vmm_memset_no_access_sync", Setup::ctx, with<c_vmm_device_work, 1, true, false>, "then cuStreamSynchronize",
         nullptr},
        {"vmm_htod_after_unmap_enqueue", Setup::ctx, with<c_vmm_device_work, 2, false, true>,
         "cuMemcpyHtoDAsync into a range unmapped after use", nullptr},
        {"vmm_htod_after_unmap_sync", Setup::ctx, with<c_vmm_device_work, 2, true, true>, "then cuStreamSynchronize",
         nullptr},
        {"copy_zero_bytes", Setup::ctx, c_copy_zero_bytes, "cuMemcpyHtoDAsync of 0 bytes", nullptr},
        {"memset_past_allocation_end", Setup::ctx, c_memset_past_allocation_end,
         "cuMemsetD8Async one byte past the end of an allocation", nullptr},
        {"stream_destroy_twice", Setup::ctx, c_stream_destroy_twice, "cuStreamDestroy of a destroyed stream",
         kBadHandleNotCrashed},
        {"event_record_other_context", Setup::ctx2, c_event_record_other_context,
         "cuEventRecord of an event on a stream of another context", nullptr},
        {"stream_wait_event_other_context", Setup::ctx2, c_stream_wait_event_other_context,
         "cuStreamWaitEvent on an event of another context", nullptr},
        {"copy_dtod_between_devices", Setup::ctx2, c_copy_dtod_between_devices,
         "cuMemcpyDtoDAsync from device 0 to device 1 memory", nullptr},
    };
}

}  // namespace

const std::vector<Case>& cases() {
    static const std::vector<Case> k = [] {
        std::vector<Case> all = recorded_cases();
        // added for the third recording: one list per area, in this order
        for (std::vector<Case> (*area)() : {core_cases, memory_cases, stream_cases, copy_cases, vmm_cases,
                                           capture_cases, ipc_cases, fidelity_cases})
            for (const Case& c : area()) all.push_back(c);
        return all;
    }();
    return k;
}

}  // namespace xmc::probe
