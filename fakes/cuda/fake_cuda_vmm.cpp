// Virtual memory management: address reservations, physical handles,
// mappings and access.
//
//   cuMemAddressReserve  mmap(PROT_NONE) of the range, aligned to the 2 MiB
//                        granularity: touching it while nothing is mapped (or
//                        before cuMemSetAccess) faults, as on a GPU
//   cuMemCreate          a memfd of the size, counted against the device's memory
//   cuMemMap             mmap(MAP_FIXED | MAP_SHARED) of the memfd into the
//                        reservation, still PROT_NONE
//   cuMemSetAccess       mprotect to read or read/write
//   cuMemUnmap           PROT_NONE anonymous memory back over the range
//   cuMemRelease         drops the handle (each cuMemRetainAllocationHandle
//                        holds it once more); the memory is freed (and the
//                        device's free memory grows) when its last mapping goes
//
// Answers on misuse, as recorded on a real driver (vmm_* cases of
// hardware/probe/cuda_driver_580_h200.tsv):
//   granularity, minimum and recommended             2097152, also of a device
//                                                    that does not exist
//   reserve or create of a size not a multiple of it CUDA_ERROR_INVALID_VALUE
//   create on a device that does not exist           CUDA_ERROR_INVALID_DEVICE
//   map of anything but a whole handle (an offset,
//     a size other than the handle's, part of it)    CUDA_ERROR_NOT_SUPPORTED
//   map at an unaligned address, onto a mapped
//     range, or outside a reservation                CUDA_ERROR_INVALID_VALUE
//   set access on a range not fully mapped, or for a
//     device that does not exist                     CUDA_ERROR_INVALID_VALUE
//   unmap of an unmapped (or never mapped) range     CUDA_SUCCESS
//   unmap of part of a mapping                       CUDA_ERROR_INVALID_VALUE
//   one unmap over several whole mappings            CUDA_SUCCESS
//   release of a released handle                     CUDA_ERROR_INVALID_VALUE
//   release while mapped                             CUDA_SUCCESS; the mapping stays
//                                                    usable, memory returns at unmap
//   address free with mappings present, twice, or
//     with another size                              CUDA_ERROR_INVALID_VALUE
//   unmap of an unaligned size of an unmapped range  CUDA_SUCCESS
//   unmap or map outside any reservation; reserve of
//     0 bytes or with a non-power-of-two alignment   CUDA_ERROR_INVALID_VALUE
//   memset or copy into a range that is unmapped, or
//     mapped without access                          CUDA_ERROR_INVALID_VALUE when enqueued
//   cuMemGetAccess: READWRITE after it is set, 0 before; of an unmapped
//     address CUDA_ERROR_INVALID_VALUE
// Deliberately different: cuMemMap of a released handle crashes the real
// driver (SIGSEGV); the fake answers CUDA_ERROR_INVALID_VALUE. Not recorded
// (chosen): mapping with non-zero flags is CUDA_ERROR_INVALID_VALUE.
#include <sys/mman.h>
#include <unistd.h>

#include "fake_cuda_internal.h"

namespace xmc_fake {

namespace {

bool aligned(uintptr_t v) { return v % kGranularity == 0; }

// The reservation holding all of [p, p+n), or null.
Reservation* reservation_for_locked(uintptr_t p, size_t n) {
    State& g = state();
    auto it = g.reservations.upper_bound(p);
    if (it == g.reservations.begin()) return nullptr;
    --it;
    Reservation& r = it->second;
    return (p >= r.base && p + n >= p && p + n <= r.base + r.size) ? &r : nullptr;
}

// Frees a handle's memory (its memfd) and gives it back to the device.
void free_handle_locked(std::map<uint64_t, PhysHandle>::iterator it) {
    State& g = state();
    PhysHandle& h = it->second;
    if (h.fd >= 0) ::close(h.fd);
    if (!h.imported && valid_ordinal_locked(h.ordinal)) g.devices[static_cast<size_t>(h.ordinal)].used -= h.size;
    g.handles.erase(it);
}

// Checks a CUmemAllocationProp: pinned device memory on an existing device
// (with `any_device`, a device that does not exist passes: recorded for
// cuMemGetAllocationGranularity, vmm_granularity_invalid_device).
CUresult check_prop_locked(const CUmemAllocationProp* prop, bool any_device = false) {
    if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ordinal_locked(prop->location.id)) return any_device ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    bool known = false;
    if (device_attribute_locked(prop->location.id, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                &known) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    return CUDA_SUCCESS;
}

}  // namespace

void vmm_free_all_locked() {
    State& g = state();
    for (auto& [b, r] : g.reservations) ::munmap(reinterpret_cast<void*>(r.base), r.size);
    g.reservations.clear();
    g.mappings.clear();
    g.unmapped.clear();
    for (auto& [h, p] : g.handles)
        if (p.fd >= 0) ::close(p.fd);
    g.handles.clear();
}

}  // namespace xmc_fake

using namespace xmc_fake;

XMC_FAKE_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                                       CUmemAllocationGranularity_flags option) {
    FAKE_ENTER("cuMemGetAllocationGranularity");
    if (granularity == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> lk(state().mu);
    CUresult r = check_prop_locked(prop, true);
    if (r != CUDA_SUCCESS) return r;
    *granularity = kGranularity;
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                             unsigned long long flags) {
    FAKE_ENTER_SIZE("cuMemAddressReserve", size);
    if (ptr == nullptr || size == 0 || !aligned(size) || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (alignment != 0 && (alignment & (alignment - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
    size_t align = alignment > kGranularity ? alignment : kGranularity;
    if (size > (size_t(1) << 46) || align > (size_t(1) << 40)) return CUDA_ERROR_OUT_OF_MEMORY;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    // Over-reserve, then trim to an aligned range of exactly `size`.
    size_t span = size + align;
    void* hint = (addr != 0 && addr % align == 0) ? reinterpret_cast<void*>(addr) : nullptr;
    void* p = mmap(hint, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t lo = reinterpret_cast<uintptr_t>(p);
    uintptr_t base = (lo + align - 1) / align * align;
    if (base > lo) ::munmap(p, base - lo);
    uintptr_t end = lo + span;
    if (end > base + size) ::munmap(reinterpret_cast<void*>(base + size), end - (base + size));
    g.reservations[base] = Reservation{base, size};
    *ptr = base;
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    FAKE_ENTER("cuMemAddressFree");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    auto it = g.reservations.find(ptr);
    if (it == g.reservations.end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
    auto m = g.mappings.lower_bound(ptr);
    if (m != g.mappings.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;  // still mapped
    ::munmap(reinterpret_cast<void*>(ptr), size);
    g.unmapped.erase(g.unmapped.lower_bound(ptr), g.unmapped.lower_bound(ptr + size));  // the range may come back
    g.reservations.erase(it);
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                     const CUmemAllocationProp* prop, unsigned long long flags) {
    FAKE_ENTER_SIZE("cuMemCreate", size);
    if (handle == nullptr || flags != 0 || size == 0 || !aligned(size)) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult r = check_prop_locked(prop);
    if (r != CUDA_SUCCESS) return r;
    if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
        prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    Device& d = g.devices[static_cast<size_t>(prop->location.id)];
    if (size > d.total - d.used) return CUDA_ERROR_OUT_OF_MEMORY;
    // Named after the physical device: an importing process (fake_cuda_ipc.cpp) finds it by that.
    const std::string name = "xmc_fake_cuda_vmm." + std::to_string(d.physical);
    int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
        ::close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    PhysHandle h;
    h.handle = new_handle_locked();
    h.ordinal = prop->location.id;
    h.size = size;
    h.fd = fd;
    h.shareable = prop->requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    g.handles[h.handle] = h;
    d.used += size;
    *handle = h.handle;
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    FAKE_ENTER("cuMemRelease");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    auto it = g.handles.find(handle);
    if (it == g.handles.end() || it->second.released) {
        if (g.released.count(handle)) ++g.second_releases;  // VMM-DOUBLE: a second release
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (--it->second.refs > 0) return CUDA_SUCCESS;  // a cuMemRetainAllocationHandle still holds it
    it->second.released = true;
    g.released.insert(handle);
    if (it->second.map_count == 0) free_handle_locked(it);
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                                  unsigned long long flags) {
    FAKE_ENTER_SIZE("cuMemMap", size);
    if (flags != 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    auto h = g.handles.find(handle);
    if (h == g.handles.end() || h->second.released) return CUDA_ERROR_INVALID_VALUE;
    // Recorded: only a whole handle maps (vmm_map_part_of_handle, _unaligned_offset,
    // _unaligned_size, _beyond_handle); that checked, an unaligned address is
    // CUDA_ERROR_INVALID_VALUE (the refusal vmm_map_refused_then_use reports).
    if (offset != 0 || size != h->second.size) return CUDA_ERROR_NOT_SUPPORTED;
    if (!aligned(ptr)) return CUDA_ERROR_INVALID_VALUE;
    if (reservation_for_locked(ptr, size) == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto m = g.mappings.lower_bound(ptr);
    if (m != g.mappings.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
    if (m != g.mappings.begin() && std::prev(m)->first + std::prev(m)->second.size > ptr)
        return CUDA_ERROR_INVALID_VALUE;
    void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->second.fd,
                   static_cast<off_t>(offset));
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    Mapping mp;
    mp.va = ptr;
    mp.size = size;
    mp.handle = handle;
    mp.offset = offset;
    mp.host_prot = PROT_NONE;  // no access until cuMemSetAccess
    mp.buffer_id = new_handle_locked();
    g.mappings[ptr] = mp;
    g.unmapped.erase(ptr);
    ++h->second.map_count;
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    FAKE_ENTER("cuMemUnmap");
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    // No alignment check: recorded, an unaligned unmap of an unmapped range
    // succeeds; one that cuts a mapping fails below like any partial unmap.
    if (reservation_for_locked(ptr, size) == nullptr) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t end = ptr + size;
    // Every mapping the range touches must lie wholly inside it.
    auto first = g.mappings.lower_bound(ptr);
    if (first != g.mappings.begin() && std::prev(first)->first + std::prev(first)->second.size > ptr)
        return CUDA_ERROR_INVALID_VALUE;
    auto last = first;
    while (last != g.mappings.end() && last->first < end) {
        if (last->first + last->second.size > end) return CUDA_ERROR_INVALID_VALUE;
        ++last;
    }
    // VMM-DOUBLE: an unmap that finds nothing mapped where a mapping was unmapped before is a
    // second unmap of that mapping (the real driver answers it CUDA_SUCCESS: recorded).
    if (first == last) {
        auto u = g.unmapped.lower_bound(ptr);
        if (u != g.unmapped.end() && *u < end) ++g.second_releases;
    }
    for (auto it = first; it != last;) {
        Mapping& m = it->second;
        g.unmapped.insert(m.va);
        ::mmap(reinterpret_cast<void*>(m.va), m.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
               -1, 0);
        auto h = g.handles.find(m.handle);
        if (h != g.handles.end() && --h->second.map_count == 0 && h->second.released) free_handle_locked(h);
        it = g.mappings.erase(it);
    }
    return CUDA_SUCCESS;  // also when nothing was mapped (recorded)
}

XMC_FAKE_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
    FAKE_ENTER("cuMemSetAccess");
    if (desc == nullptr || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    for (size_t i = 0; i < count; ++i) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
        // Recorded: CUDA_ERROR_INVALID_VALUE, not INVALID_DEVICE (vmm_set_access_invalid_device).
        if (!valid_ordinal_locked(desc[i].location.id)) return CUDA_ERROR_INVALID_VALUE;
        unsigned f = desc[i].flags;
        if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    // The whole range must be mapped.
    uintptr_t end = ptr + size, need = ptr;
    auto m = g.mappings.upper_bound(ptr);
    if (m != g.mappings.begin()) --m;
    std::vector<Mapping*> touched;
    for (; m != g.mappings.end() && m->first < end; ++m) {
        if (m->first + m->second.size <= need) continue;
        if (m->first > need) break;  // a hole
        touched.push_back(&m->second);
        need = m->first + m->second.size;
    }
    if (need < end) return CUDA_ERROR_INVALID_VALUE;
    for (Mapping* mp : touched) {
        for (size_t i = 0; i < count; ++i) mp->access[desc[i].location.id] = desc[i].flags;
        unsigned most = 0;
        for (auto& [dev, f] : mp->access) most |= f;
        int prot = (most & CU_MEM_ACCESS_FLAGS_PROT_READWRITE) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                       ? PROT_READ | PROT_WRITE
                   : (most & CU_MEM_ACCESS_FLAGS_PROT_READ) ? PROT_READ
                                                             : PROT_NONE;
        uintptr_t lo = mp->va > ptr ? mp->va : ptr;
        uintptr_t hi = mp->va + mp->size < end ? mp->va + mp->size : end;
        if (::mprotect(reinterpret_cast<void*>(lo), hi - lo, prot) != 0) return CUDA_ERROR_UNKNOWN;
        mp->host_prot = prot;
    }
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr) {
    FAKE_ENTER("cuMemGetAccess");
    if (flags == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    if (location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ordinal_locked(location->id)) return CUDA_ERROR_INVALID_DEVICE;
    auto m = g.mappings.upper_bound(ptr);
    if (m == g.mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
    --m;
    if (ptr >= m->first + m->second.size) return CUDA_ERROR_INVALID_VALUE;
    auto a = m->second.access.find(location->id);
    *flags = a == m->second.access.end() ? 0u : a->second;
    return CUDA_SUCCESS;
}
