// Host and device allocations, external-memmap registrations, virtual memory, and the
// classification of the memory a copy touches.
//
// Memory model. "Device memory" is host memory that the fake owns. A registration
// (zeMemAllocHost with the external-memmap descriptor) records an existing host range
// and the devices it is mapped for: only the first device of the registering context
// (see Context::first), which is the behaviour that broke real code. A virtual
// reservation is a PROT_NONE mapping; zeVirtualMemMap maps a memfd over it with
// MAP_FIXED, zeVirtualMemUnmap puts PROT_NONE back, so the host faults on unmapped
// pages as a device would.
#include "fake_ze_entries.h"
#include "fake_ze_internal.h"
#include "ze_external_memmap.h"  // reference/level_zero: the extension the Debian header lacks

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace xmc_fake_ze {

namespace {

bool is_pow2(size_t v) { return v != 0 && (v & (v - 1)) == 0; }

// The live allocation (host, device or registration) that contains p, or null.
Alloc* alloc_containing(uintptr_t p) {
    auto& m = S().allocs;
    auto it = m.upper_bound(p);
    if (it == m.begin()) return nullptr;
    --it;
    return p < it->first + it->second.size ? &it->second : nullptr;
}

Reservation* reservation_containing(uintptr_t p) {
    auto& m = S().reservations;
    auto it = m.upper_bound(p);
    if (it == m.begin()) return nullptr;
    --it;
    return p < it->first + it->second.size ? &it->second : nullptr;
}

// Every tracked allocation overlapping [p, p+n).
std::vector<Alloc*> allocs_overlapping(uintptr_t p, size_t n) {
    std::vector<Alloc*> out;
    auto& m = S().allocs;
    auto it = m.upper_bound(p);
    if (it != m.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second.size > p) out.push_back(&prev->second);
    }
    for (; it != m.end() && it->first < p + n; ++it) out.push_back(&it->second);
    return out;
}

bool reservation_overlaps(uintptr_t p, size_t n) {
    auto& m = S().reservations;
    auto it = m.upper_bound(p);
    if (it != m.begin() && std::prev(it)->first + std::prev(it)->second.size > p) return true;
    return it != m.end() && it->first < p + n;
}

// True when every page of [p, p+n) is mapped in this process (mincore fails with
// ENOMEM on a hole), as pinning the range in a real driver requires.
bool host_range_exists(uintptr_t p, size_t n) {
    std::vector<unsigned char> v((n + kHostPage - 1) / kHostPage);
    return mincore(reinterpret_cast<void*>(p), n, v.data()) == 0;
}

void* map_anonymous(size_t n) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

// Releases the memory behind one allocation record (not the record itself).
void release_alloc(Alloc& a) {
    State& s = S();
    switch (a.type) {
    case AllocType::Host: std::free(a.block); break;
    case AllocType::Device:
        std::free(a.block);
        s.devices[a.device].used -= a.size;
        break;
    case AllocType::Registration:
        if (a.block != nullptr) munmap(a.block, a.block_size);  // non-identity alias
        break;  // the registered host pages belong to the caller
    }
}

// Allocates `size` bytes aligned to max(alignment, 64) with posix_memalign.
void* aligned_block(size_t size, size_t alignment) {
    void* p = nullptr;
    if (posix_memalign(&p, std::max<size_t>(alignment, 64), size) != 0) return nullptr;
    return p;
}

// Registers [mem, mem+bytes) in context c (lock held). See the table in the header of
// MemAllocHost for the codes.
ze_result_t register_range(Context& c, const xmc_ze_external_memmap_sysmem_ext_desc_t& ext,
                           size_t size, bool nonidentity, void** pptr) {
    const uintptr_t mem = reinterpret_cast<uintptr_t>(ext.pSystemMemory);
    if (mem == 0) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (size == 0 || ext.size == 0) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    if (mem % kHostPage != 0) return ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
    if (ext.size % kHostPage != 0) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    if (size != ext.size) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (!allocs_overlapping(mem, ext.size).empty() || reservation_overlaps(mem, ext.size) ||
        !host_range_exists(mem, ext.size))
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    State& s = S();
    Alloc a;
    a.id = s.next_id++;
    a.type = AllocType::Registration;
    a.size = ext.size;
    a.ctx = c.id;
    a.mapped_for = {c.first};
    a.system_memory = mem;
    a.base = mem;
    if (nonidentity) {  // fault script: the "mapping" lands elsewhere
        a.block = map_anonymous(ext.size);
        if (a.block == nullptr) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        a.block_size = ext.size;
        a.base = reinterpret_cast<uintptr_t>(a.block);
    }
    s.allocs[a.base] = a;
    *pptr = reinterpret_cast<void*>(a.base);
    return ZE_RESULT_SUCCESS;
}

}  // namespace

// ---------------------------------------------------------------------------------
// zeMemAllocHost.
//   plain (no descriptor chained): a host allocation usable by every device.
//   with the external-memmap descriptor: registers pSystemMemory..+size, returns the
//   same address (unless the fault script says "nonidentity"), and maps it for the
//   first device of the context only. Refusals:
//     pSystemMemory null                        ZE_RESULT_ERROR_INVALID_NULL_POINTER
//     size or desc size 0, or size not a
//       multiple of 4096                        ZE_RESULT_ERROR_UNSUPPORTED_SIZE
//     pSystemMemory not 4096-aligned            ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT
//     size argument != descriptor size          ZE_RESULT_ERROR_INVALID_ARGUMENT
//     range overlaps a registration or any
//       allocation/reservation of the fake, or
//       is not mapped in the process            ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY
//   (Intel's compute-runtime returns OUT_OF_HOST_MEMORY whenever its host-pointer
//   allocation for this extension fails; the alignment and size codes are the fake's
//   choice, the spec only says "must be page aligned".)
//   An unknown structure in the pNext chain: ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION,
//   as compute-runtime answers.
ze_result_t ZE_APICALL MemAllocHost(ze_context_handle_t hContext, const ze_host_mem_alloc_desc_t* host_desc,
                                    size_t size, size_t alignment, void** pptr) {
    FaultOutcome f = enter_sized("zeMemAllocHost", size);
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    Context* c = context_of(hContext);
    if (c == nullptr) return bad_handle(hContext);
    if (host_desc == nullptr || pptr == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (alignment != 0 && !is_pow2(alignment)) return ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
    const xmc_ze_external_memmap_sysmem_ext_desc_t* ext = nullptr;
    for (auto* d = static_cast<const ze_base_desc_t*>(host_desc->pNext); d != nullptr;
         d = static_cast<const ze_base_desc_t*>(d->pNext)) {
        if (d->stype == XMC_ZE_STRUCTURE_TYPE_EXTERNAL_MEMMAP_SYSMEM_EXT_DESC)
            ext = reinterpret_cast<const xmc_ze_external_memmap_sysmem_ext_desc_t*>(d);
        else if (d->stype != ZE_STRUCTURE_TYPE_RELAXED_ALLOCATION_LIMITS_EXP_DESC)
            return ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION;
    }
    if (ext != nullptr) return register_range(*c, *ext, size, f.nonidentity, pptr);

    if (size == 0) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    Alloc a;
    a.block = aligned_block(size, alignment);
    if (a.block == nullptr) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    a.id = s.next_id++;
    a.type = AllocType::Host;
    a.base = reinterpret_cast<uintptr_t>(a.block);
    a.size = size;
    a.ctx = c->id;
    s.allocs[a.base] = a;
    *pptr = a.block;
    return ZE_RESULT_SUCCESS;
}

// Device allocations are counted against the device's memory. A device that is not
// in the context: ZE_RESULT_ERROR_DEVICE_LOST (what compute-runtime returns).
ze_result_t ZE_APICALL MemAllocDevice(ze_context_handle_t hContext, const ze_device_mem_alloc_desc_t* device_desc,
                                      size_t size, size_t alignment, ze_device_handle_t hDevice,
                                      void** pptr) {
    FaultOutcome f = enter_sized("zeMemAllocDevice", size);
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    const auto [looked_up, c, d] = context_and_device(hContext, hDevice);
    if (looked_up != ZE_RESULT_SUCCESS) return looked_up;
    if (device_desc == nullptr || pptr == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (!context_has(*c, d->native)) return ZE_RESULT_ERROR_DEVICE_LOST;
    if (alignment != 0 && !is_pow2(alignment)) return ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
    if (size == 0 || size > d->total) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    if (size > d->total - d->used) return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
    Alloc a;
    a.block = aligned_block(size, alignment);
    if (a.block == nullptr) return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
    a.id = s.next_id++;
    a.type = AllocType::Device;
    a.base = reinterpret_cast<uintptr_t>(a.block);
    a.size = size;
    a.ctx = c->id;
    a.device = d->native;
    d->used += size;
    s.allocs[a.base] = a;
    *pptr = a.block;
    return ZE_RESULT_SUCCESS;
}

// zeMemFree takes exactly a base the fake returned, in the context that created it
// (stricter than compute-runtime, which accepts any context of the driver: a backend
// that frees in another context is wrong, see REG-SAME-CONTEXT). Anything else:
// ZE_RESULT_ERROR_INVALID_ARGUMENT, nothing changes. For a registration it removes the
// mapping and never touches the caller's pages.
ze_result_t ZE_APICALL MemFree(ze_context_handle_t hContext, void* ptr) {
    FaultOutcome f = enter("zeMemFree");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    Context* c = context_of(hContext);
    if (c == nullptr) return bad_handle(hContext);
    if (ptr == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    auto it = s.allocs.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == s.allocs.end() || it->second.ctx != c->id) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    release_alloc(it->second);
    s.allocs.erase(it);
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL MemGetAllocProperties(ze_context_handle_t hContext, const void* ptr,
                                             ze_memory_allocation_properties_t* props,
                                             ze_device_handle_t* phDevice) {
    FaultOutcome f = enter("zeMemGetAllocProperties");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    if (context_of(hContext) == nullptr) return bad_handle(hContext);
    if (ptr == nullptr || props == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    Alloc* a = alloc_containing(reinterpret_cast<uintptr_t>(ptr));
    if (phDevice != nullptr) *phDevice = nullptr;
    if (a == nullptr) {
        props->type = ZE_MEMORY_TYPE_UNKNOWN;
        props->id = 0;
        props->pageSize = 0;
        return ZE_RESULT_SUCCESS;
    }
    props->type = a->type == AllocType::Device ? ZE_MEMORY_TYPE_DEVICE : ZE_MEMORY_TYPE_HOST;
    props->id = a->id;
    props->pageSize = kHostPage;
    if (a->type == AllocType::Device && phDevice != nullptr) *phDevice = device_handle(a->device);
    return ZE_RESULT_SUCCESS;
}

// Unknown pointers: ZE_RESULT_ERROR_INVALID_ARGUMENT (the fake's choice).
ze_result_t ZE_APICALL MemGetAddressRange(ze_context_handle_t hContext, const void* ptr, void** pBase,
                                          size_t* pSize) {
    FaultOutcome f = enter("zeMemGetAddressRange");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    if (context_of(hContext) == nullptr) return bad_handle(hContext);
    if (ptr == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    Alloc* a = alloc_containing(reinterpret_cast<uintptr_t>(ptr));
    if (a == nullptr) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (pBase != nullptr) *pBase = reinterpret_cast<void*>(a->base);
    if (pSize != nullptr) *pSize = a->size;
    return ZE_RESULT_SUCCESS;
}

// ---------------------------------------------------------------------------------
// Virtual memory. Page size 2 MiB; addresses and sizes must be multiples of it.
namespace {

// The reservation of context c that holds all of [p, p+n), with p and n 2 MiB
// multiples; null otherwise (code set to the reason).
Reservation* vm_range(const Context& c, const void* ptr, size_t n, ze_result_t& code) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    if (ptr == nullptr) {
        code = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
        return nullptr;
    }
    if (p % kVmmPage != 0) {
        code = ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
        return nullptr;
    }
    if (n == 0 || n % kVmmPage != 0) {
        code = ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
        return nullptr;
    }
    Reservation* r = reservation_containing(p);
    if (r == nullptr || r->ctx != c.id || p + n > r->base + r->size) {
        code = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        return nullptr;
    }
    return r;
}

int prot_of(ze_memory_access_attribute_t a) {
    return a == ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE ? PROT_READ | PROT_WRITE
           : a == ZE_MEMORY_ACCESS_ATTRIBUTE_READONLY ? PROT_READ
                                                       : PROT_NONE;
}

bool valid_access(ze_memory_access_attribute_t a) {
    return a == ZE_MEMORY_ACCESS_ATTRIBUTE_NONE || a == ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE ||
           a == ZE_MEMORY_ACCESS_ATTRIBUTE_READONLY;
}

// Puts PROT_NONE anonymous memory back over [p, p+n).
bool make_inaccessible(uintptr_t p, size_t n) {
    return mmap(reinterpret_cast<void*>(p), n, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) != MAP_FAILED;
}

// Unmaps pages [first, first+count) of r (all mapped), updating the bookkeeping.
void unmap_pages(Reservation& r, size_t first, size_t count) {
    State& s = S();
    make_inaccessible(r.base + first * kVmmPage, count * kVmmPage);
    for (size_t i = first; i < first + count; ++i) {
        Page& pg = r.pages[i];
        if (pg.phys == 0) continue;
        auto pm = s.physmems.find(pg.phys);
        if (pm != s.physmems.end()) --pm->second.mapped_pages;
        auto m = s.mappings.find(pg.mapping);
        if (m != s.mappings.end() && --m->second.pages_left == 0) s.mappings.erase(m);
        pg = Page{};
    }
}

ze_result_t add_reservation(const Context& c, uintptr_t base, size_t size, void** pptr) {
    Reservation r;
    r.base = base;
    r.size = size;
    r.ctx = c.id;
    r.pages.resize(size / kVmmPage);
    S().reservations[base] = std::move(r);
    *pptr = reinterpret_cast<void*>(base);
    return ZE_RESULT_SUCCESS;
}

}  // namespace

ze_result_t ZE_APICALL VirtualMemQueryPageSize(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                               size_t size, size_t* pagesize) {
    FaultOutcome f = enter("zeVirtualMemQueryPageSize");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    if (context_of(hContext) == nullptr) return bad_handle(hContext);
    if (device_of(hDevice) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (pagesize == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    (void)size;
    *pagesize = kVmmPage;
    return ZE_RESULT_SUCCESS;
}

// Reserves a 2 MiB-aligned PROT_NONE range. pStart is only a hint and the fake ignores
// it (as a driver may); note that the loader's validation layer refuses a null pStart
// with ZE_RESULT_ERROR_INVALID_NULL_POINTER, so callers pass some non-null hint.
ze_result_t ZE_APICALL VirtualMemReserve(ze_context_handle_t hContext, const void* pStart, size_t size,
                                         void** pptr) {
    FaultOutcome f = enter_sized("zeVirtualMemReserve", size);
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    Context* c = context_of(hContext);
    if (c == nullptr) return bad_handle(hContext);
    if (pptr == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (size == 0 || size % kVmmPage != 0) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    (void)pStart;
    void* raw = mmap(nullptr, size + kVmmPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    const uintptr_t r0 = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t base = (r0 + kVmmPage - 1) / kVmmPage * kVmmPage;
    if (base > r0) munmap(raw, base - r0);  // trim to the aligned range
    if (r0 + kVmmPage > base) munmap(reinterpret_cast<void*>(base + size), r0 + kVmmPage - base);
    return add_reservation(*c, base, size, pptr);
}

// Frees a whole reservation (exact base and size). Refused with
// ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE while any page is still mapped.
ze_result_t ZE_APICALL VirtualMemFree(ze_context_handle_t hContext, const void* ptr, size_t size) {
    FaultOutcome f = enter("zeVirtualMemFree");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    Context* c = context_of(hContext);
    if (c == nullptr) return bad_handle(hContext);
    if (ptr == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    auto it = s.reservations.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == s.reservations.end() || it->second.ctx != c->id || it->second.size != size)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    for (const Page& pg : it->second.pages)
        if (pg.phys != 0) return ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
    munmap(reinterpret_cast<void*>(it->first), it->second.size);
    s.unmapped.erase(s.unmapped.lower_bound(it->first), s.unmapped.lower_bound(it->first + size));  // may come back
    s.reservations.erase(it);
    return ZE_RESULT_SUCCESS;
}

// Physical memory: a memfd of the requested size (2 MiB multiple), counted against the
// device's free memory (ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY when it does not fit). A
// device outside the context: ZE_RESULT_ERROR_DEVICE_LOST, as for zeMemAllocDevice.
ze_result_t ZE_APICALL PhysicalMemCreate(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                         ze_physical_mem_desc_t* desc, ze_physical_mem_handle_t* phPhysicalMemory) {
    // desc is checked below; without one there is no size for size_limit to see.
    FaultOutcome f = desc != nullptr ? enter_sized("zePhysicalMemCreate", desc->size) : enter("zePhysicalMemCreate");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    const auto [looked_up, c, d] = context_and_device(hContext, hDevice);
    if (looked_up != ZE_RESULT_SUCCESS) return looked_up;
    if (desc == nullptr || phPhysicalMemory == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (!context_has(*c, d->native)) return ZE_RESULT_ERROR_DEVICE_LOST;
    if (desc->size == 0 || desc->size % kVmmPage != 0) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    if (desc->size > d->total - d->used) return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
    int fd = memfd_create("xmc_fake_ze_physical", MFD_CLOEXEC);
    if (fd < 0) return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    if (ftruncate(fd, static_cast<off_t>(desc->size)) != 0) {
        close(fd);
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    PhysMem pm;
    pm.id = s.next_id++;
    pm.ctx = c->id;
    pm.device = d->native;
    pm.size = desc->size;
    pm.fd = fd;
    d->used += pm.size;
    s.physmems[pm.id] = pm;
    *phPhysicalMemory = make_handle<ze_physical_mem_handle_t>(Kind::PhysMem, pm.id);
    return ZE_RESULT_SUCCESS;
}

// Refused with ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE while any of it is mapped.
ze_result_t ZE_APICALL PhysicalMemDestroy(ze_context_handle_t hContext, ze_physical_mem_handle_t hPhysicalMemory) {
    FaultOutcome f = enter("zePhysicalMemDestroy");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    Context* c = context_of(hContext);
    if (c == nullptr) return bad_handle(hContext);
    auto it = s.physmems.find(handle_id(hPhysicalMemory, Kind::PhysMem));
    if (it == s.physmems.end() || it->second.ctx != c->id) {
        if (hPhysicalMemory && s.destroyed.count(handle_id(hPhysicalMemory, Kind::PhysMem)))
            ++s.second_releases;  // VMM-DOUBLE: a second destroy
        return hPhysicalMemory ? ZE_RESULT_ERROR_INVALID_ARGUMENT : ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    }
    if (it->second.mapped_pages > 0) return ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
    s.destroyed.insert(it->first);
    close(it->second.fd);
    s.devices[it->second.device].used -= it->second.size;
    s.physmems.erase(it);
    return ZE_RESULT_SUCCESS;
}

// Maps [offset, offset+size) of a physical memory object at ptr (every page of the
// range must be reserved and unmapped: else ZE_RESULT_ERROR_INVALID_ARGUMENT).
ze_result_t ZE_APICALL VirtualMemMap(ze_context_handle_t hContext, const void* ptr, size_t size,
                                     ze_physical_mem_handle_t hPhysicalMemory, size_t offset,
                                     ze_memory_access_attribute_t access) {
    FaultOutcome f = enter_sized("zeVirtualMemMap", size);
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    Context* c = context_of(hContext);
    if (c == nullptr) return bad_handle(hContext);
    ze_result_t code = ZE_RESULT_SUCCESS;
    Reservation* r = vm_range(*c, ptr, size, code);
    if (r == nullptr) return code;
    auto pm = s.physmems.find(handle_id(hPhysicalMemory, Kind::PhysMem));
    if (pm == s.physmems.end() || pm->second.ctx != c->id)
        return hPhysicalMemory ? ZE_RESULT_ERROR_INVALID_ARGUMENT : ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (!valid_access(access)) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    if (offset % kVmmPage != 0 || offset > pm->second.size || size > pm->second.size - offset)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    const size_t first = (p - r->base) / kVmmPage, count = size / kVmmPage;
    for (size_t i = first; i < first + count; ++i)
        if (r->pages[i].phys != 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;  // already mapped
    if (mmap(const_cast<void*>(ptr), size, prot_of(access), MAP_SHARED | MAP_FIXED, pm->second.fd,
             static_cast<off_t>(offset)) == MAP_FAILED)
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    Mapping m;
    m.id = s.next_id++;
    m.base = p;
    m.size = size;
    m.phys = pm->second.id;
    m.pages_left = count;
    s.mappings[m.id] = m;
    for (size_t i = 0; i < count; ++i) {
        Page& pg = r->pages[first + i];
        pg.phys = pm->second.id;
        pg.offset = offset + i * kVmmPage;
        pg.mapping = m.id;
        pg.access = access;
    }
    pm->second.mapped_pages += count;
    s.unmapped.erase(p);
    return ZE_RESULT_SUCCESS;
}

// Unmaps a range whose every page is mapped (else ZE_RESULT_ERROR_INVALID_ARGUMENT);
// the range becomes PROT_NONE again, so a later access faults.
ze_result_t ZE_APICALL VirtualMemUnmap(ze_context_handle_t hContext, const void* ptr, size_t size) {
    FaultOutcome f = enter("zeVirtualMemUnmap");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    Context* c = context_of(hContext);
    if (c == nullptr) return bad_handle(hContext);
    ze_result_t code = ZE_RESULT_SUCCESS;
    Reservation* r = vm_range(*c, ptr, size, code);
    if (r == nullptr) return code;
    const size_t first = (reinterpret_cast<uintptr_t>(ptr) - r->base) / kVmmPage, count = size / kVmmPage;
    for (size_t i = first; i < first + count; ++i)
        if (r->pages[i].phys == 0) {
            if (S().unmapped.count(reinterpret_cast<uintptr_t>(ptr))) ++S().second_releases;  // VMM-DOUBLE
            return ZE_RESULT_ERROR_INVALID_ARGUMENT;
        }
    unmap_pages(*r, first, count);
    S().unmapped.insert(reinterpret_cast<uintptr_t>(ptr));
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL VirtualMemSetAccessAttribute(ze_context_handle_t hContext, const void* ptr, size_t size,
                                                    ze_memory_access_attribute_t access) {
    FaultOutcome f = enter("zeVirtualMemSetAccessAttribute");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    Context* c = context_of(hContext);
    if (c == nullptr) return bad_handle(hContext);
    ze_result_t code = ZE_RESULT_SUCCESS;
    Reservation* r = vm_range(*c, ptr, size, code);
    if (r == nullptr) return code;
    if (!valid_access(access)) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    const size_t first = (reinterpret_cast<uintptr_t>(ptr) - r->base) / kVmmPage, count = size / kVmmPage;
    for (size_t i = first; i < first + count; ++i)
        if (r->pages[i].phys == 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (mprotect(const_cast<void*>(ptr), size, prot_of(access)) != 0) return ZE_RESULT_ERROR_UNKNOWN;
    for (size_t i = first; i < first + count; ++i) r->pages[i].access = access;
    return ZE_RESULT_SUCCESS;
}

// The access of the page holding ptr (NONE when unmapped) and how many bytes from ptr,
// up to size, share it.
ze_result_t ZE_APICALL VirtualMemGetAccessAttribute(ze_context_handle_t hContext, const void* ptr, size_t size,
                                                    ze_memory_access_attribute_t* access, size_t* outSize) {
    FaultOutcome f = enter("zeVirtualMemGetAccessAttribute");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    Context* c = context_of(hContext);
    if (c == nullptr) return bad_handle(hContext);
    if (ptr == nullptr || access == nullptr || outSize == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    Reservation* r = reservation_containing(p);
    if (r == nullptr || r->ctx != c->id || size == 0 || size > r->base + r->size - p)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    size_t i = (p - r->base) / kVmmPage;
    const ze_memory_access_attribute_t a = r->pages[i].access;
    uintptr_t end = r->base + (i + 1) * kVmmPage;
    while (end < p + size && r->pages[(end - r->base) / kVmmPage].access == a) end += kVmmPage;
    *access = a;
    *outSize = std::min<size_t>(end - p, size);
    return ZE_RESULT_SUCCESS;
}

// ---------------------------------------------------------------------------------
// Copies: what memory does [p, p+n) belong to, and may `device` use it?
ze_result_t check_range(uintptr_t p, size_t n, uint32_t device, bool write, RangeRef& out) {
    out = RangeRef{};
    out.ptr = p;
    out.bytes = n;
    out.write = write;
    if (n == 0) return ZE_RESULT_SUCCESS;
    if (p + n < p) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    std::vector<Alloc*> hits = allocs_overlapping(p, n);
    for (Alloc* a : hits)  // the behaviour that broke real code
        if (a->type == AllocType::Registration &&
            std::find(a->mapped_for.begin(), a->mapped_for.end(), device) == a->mapped_for.end())
            return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
    if (!hits.empty()) {
        Alloc* a = hits.front();
        if (hits.size() > 1 || p < a->base || p + n > a->base + a->size) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
        out.what = RangeRef::Alloc;
        out.alloc_base = a->base;
        out.alloc_id = a->id;
        return ZE_RESULT_SUCCESS;
    }
    if (reservation_overlaps(p, n)) {
        Reservation* r = reservation_containing(p);
        if (r == nullptr || p + n > r->base + r->size) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
        out.what = RangeRef::Virtual;  // whether it is mapped is checked when it runs
    }
    return ZE_RESULT_SUCCESS;  // pageable host memory
}

bool recheck_range(const RangeRef& r, std::string& why) {
    if (r.bytes == 0) return true;
    char where[96];
    std::snprintf(where, sizeof where, "%s [%p, +%zu)", r.write ? "destination" : "source",
                  reinterpret_cast<void*>(r.ptr), r.bytes);
    if (r.what == RangeRef::Pageable) {  // at least make sure the pages exist
        const uintptr_t first = r.ptr / kHostPage * kHostPage;
        if (host_range_exists(first, r.ptr + r.bytes - first)) return true;
        why = std::string(where) + " is not mapped in the process when the copy runs";
        return false;
    }
    if (r.what == RangeRef::Alloc) {
        auto it = S().allocs.find(r.alloc_base);
        if (it != S().allocs.end() && it->second.id == r.alloc_id) return true;
        why = std::string(where) + " was freed before the copy ran";
        return false;
    }
    Reservation* res = reservation_containing(r.ptr);
    if (res == nullptr || r.ptr + r.bytes > res->base + res->size) {
        why = std::string(where) + ": its virtual reservation was freed before the copy ran";
        return false;
    }
    for (uintptr_t a = r.ptr / kVmmPage * kVmmPage; a < r.ptr + r.bytes; a += kVmmPage) {
        const Page& pg = res->pages[(a - res->base) / kVmmPage];
        bool ok = pg.phys != 0 && (r.write ? pg.access == ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE
                                           : pg.access != ZE_MEMORY_ACCESS_ATTRIBUTE_NONE);
        if (!ok) {
            why = std::string(where) + " touches a virtual page that is " +
                  (pg.phys == 0 ? "not mapped" : "not accessible") + " when the copy runs";
            return false;
        }
    }
    return true;
}

// ---------------------------------------------------------------------------------
void release_memory_locked() {
    State& s = S();
    for (auto& [base, a] : s.allocs) release_alloc(a);
    s.allocs.clear();
    for (auto& [base, r] : s.reservations) {
        unmap_pages(r, 0, r.pages.size());
        munmap(reinterpret_cast<void*>(base), r.size);
    }
    s.reservations.clear();
    s.mappings.clear();
    s.unmapped.clear();
    for (auto& [id, pm] : s.physmems) {
        close(pm.fd);
        s.devices[pm.device].used -= pm.size;
    }
    s.physmems.clear();
    s.contexts.clear();
}

}  // namespace xmc_fake_ze
