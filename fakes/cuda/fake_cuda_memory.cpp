// Device memory (cuMemAlloc: host memory standing in, counted against the
// device), host-memory registration, and pointer queries.
//
// Registration answers, as recorded on a real driver (probe cases in
// hardware/probe/cuda_driver_580_h200.tsv):
//   - ranges are tracked process-wide by exact byte range; unaligned
//     addresses and sizes are accepted, and two disjoint unaligned ranges in
//     one page are both accepted (reg_unaligned_*);
//   - any overlap with a registered range, also from another device's
//     context: CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED (reg_overlap_*, reg2_*);
//   - null, zero size, unknown flags, unmapped memory, read-only memory
//     without CU_MEMHOSTREGISTER_READ_ONLY, device memory, and
//     CU_MEMHOSTREGISTER_IOMEMORY (the fake has no I/O memory; recorded on
//     anonymous memory, reg_iomemory_flag): CUDA_ERROR_INVALID_VALUE;
//   - a range larger than the machine's memory: CUDA_ERROR_OUT_OF_MEMORY, even
//     when it is not mapped at all (reg_huge_prot_none);
//   - unregister of a registered base succeeds from any context or none; of
//     an interior address CUDA_ERROR_INVALID_VALUE (nothing changes); of null
//     CUDA_ERROR_INVALID_VALUE; of anything else (never registered, already
//     unregistered) CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
//   - cuMemHostGetFlags / cuMemHostGetDevicePointer work on any address inside
//     a registration (identity by default) and give CUDA_ERROR_INVALID_VALUE
//     elsewhere; the flags always include CU_MEMHOSTREGISTER_DEVICEMAP;
//     cuPointerGetAttribute gives CUDA_ERROR_INVALID_VALUE for memory the
//     driver does not know;
//   - registering, allocating, cuMemGetInfo and cuMemHostGetDevicePointer with
//     no current context: CUDA_ERROR_INVALID_CONTEXT.
//
// Device memory: freed memory stays reserved (PROT_NONE) and known as device
// memory until cuMemAlloc reuses it, so a copy from a freed pointer is refused
// instead of the fake reading an unmapped page as host memory (a SIGSEGV of
// the fake, not an answer of the driver's).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "fake_cuda_internal.h"

namespace xmc_fake {

namespace {

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
size_t physical_memory() { return static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * page_size(); }

// The entry of `m` (keyed by base, entries disjoint) whose [base, base+size)
// holds addr, or end().
template <class Map>
typename Map::iterator find_containing(Map& m, uintptr_t addr) {
    auto it = m.upper_bound(addr);
    if (it == m.begin()) return m.end();
    --it;
    return addr < it->first + it->second.size ? it : m.end();
}

// True when [p, p+n) overlaps any entry of `m` (keyed by base, entries disjoint).
template <class Map>
bool overlaps(Map& m, uintptr_t p, size_t n) {
    auto it = m.lower_bound(p + n);  // first entry starting at or after the end
    if (it == m.begin()) return false;
    --it;
    return it->first + it->second.size > p;
}

// True when every byte of [p, p+n) is mapped in this process, readable, and
// writable if `write`: what the real driver needs to pin the pages
// (recorded: unmapped or PROT_READ memory is CUDA_ERROR_INVALID_VALUE).
bool host_range_usable(uintptr_t p, size_t n, bool write) {
    int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return true;  // cannot tell: assume usable
    std::string text;
    char buf[8192];
    for (;;) {
        ssize_t k = ::read(fd, buf, sizeof buf);
        if (k <= 0) break;
        text.append(buf, static_cast<size_t>(k));
    }
    ::close(fd);
    uintptr_t need = p, end = p + n;
    size_t pos = 0;
    while (pos < text.size() && need < end) {
        size_t nl = text.find('\n', pos);
        if (nl == std::string::npos) nl = text.size();
        const char* line = text.c_str() + pos;
        char* e = nullptr;
        uintptr_t lo = std::strtoull(line, &e, 16);
        uintptr_t hi = (e && *e == '-') ? std::strtoull(e + 1, &e, 16) : 0;
        const char* perms = (e && *e == ' ') ? e + 1 : "----";
        bool ok = perms[0] == 'r' && (!write || perms[1] == 'w');
        if (lo <= need && need < hi) {
            if (!ok) return false;
            need = hi;
        } else if (lo > need) {
            return false;  // a hole
        }
        pos = nl + 1;
    }
    return need >= end;
}

}  // namespace

bool in_reservation_locked(uintptr_t addr, size_t n) {
    return overlaps(state().reservations, addr, n == 0 ? 1 : n);
}

bool in_device_range_locked(uintptr_t addr, size_t n) {
    State& g = state();
    if (n == 0) n = 1;
    const uintptr_t last = addr + n - 1 < addr ? UINTPTR_MAX : addr + n - 1;
    // Allocations by their whole mapping: the bytes past the asked size up to
    // the page's end are nobody's host memory either.
    auto a = g.allocations.upper_bound(last);
    if (a != g.allocations.begin() && std::prev(a)->first + std::prev(a)->second.mapped > addr) return true;
    auto f = g.freed.upper_bound(last);
    if (f != g.freed.begin() && std::prev(f)->first + std::prev(f)->second.size > addr) return true;
    auto o = g.ipc_opened.upper_bound(last);
    if (o != g.ipc_opened.begin() && std::prev(o)->first + std::prev(o)->second.size > addr) return true;
    return in_reservation_locked(addr, n);
}

void free_allocation_locked(std::map<uintptr_t, Allocation>::iterator it) {
    State& g = state();
    const Allocation a = it->second;
    g.allocations.erase(it);
    g.devices[static_cast<size_t>(a.ordinal)].used -= a.mapped;
    if (a.share_fd >= 0) {
        // Exported: the contents go for the processes that opened it too (they read zeros from
        // now on), as they go here. Not recorded (the driver calls it undefined): a reader still
        // pulling from freed memory gets no data, never the old data.
        ::fallocate(a.share_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(a.mapped));
        ::close(a.share_fd);
    }
    retire_range_locked(a.base, a.mapped);
}

void retire_range_locked(uintptr_t base, size_t size) {
    State& g = state();
    // Fresh PROT_NONE pages over the range: the contents go, the address stays ours.
    void* p = ::mmap(reinterpret_cast<void*>(base), size, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) {  // cannot keep it: give it back (a later copy from it reads unmapped memory)
        ::munmap(reinterpret_cast<void*>(base), size);
        return;
    }
    auto next = g.freed.lower_bound(base);
    if (next != g.freed.end() && next->first == base + size) {  // merge with the range after
        size += next->second.size;
        next = g.freed.erase(next);
    }
    if (next != g.freed.begin() && std::prev(next)->first + std::prev(next)->second.size == base) {
        std::prev(next)->second.size += size;  // and with the range before
        return;
    }
    g.freed[base] = FreedRange{size};
}

uintptr_t device_to_host_locked(uintptr_t addr, size_t n) {
    State& g = state();
    if (n == 0) n = 1;
    if (addr + n < addr) return 0;
    auto a = find_containing(g.allocations, addr);
    if (a != g.allocations.end()) return addr + n <= a->first + a->second.size ? addr : 0;
    if (const IpcOpened* o = find_ipc_opened_locked(addr)) return addr + n <= o->base + o->size ? addr : 0;
    for (auto& [b, r] : g.registrations)
        if (r.dev_base <= addr && addr + n <= r.dev_base + r.size) return r.base + (addr - r.dev_base);
    if (in_reservation_locked(addr, n)) {
        // every byte must lie in a mapping the device may access
        uintptr_t need = addr;
        auto m = find_containing(g.mappings, addr);
        while (m != g.mappings.end() && m->first <= need && need < addr + n) {
            if (m->second.host_prot == PROT_NONE) return 0;
            need = m->first + m->second.size;
            ++m;
        }
        return need >= addr + n ? addr : 0;
    }
    return 0;
}

}  // namespace xmc_fake

using namespace xmc_fake;

// ---- device memory ------------------------------------------------------------------

XMC_FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
    FAKE_ENTER_SIZE("cuMemAlloc_v2", bytesize);
    if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    if (CUresult r = unsafe_in_capture_locked(); r != CUDA_SUCCESS) return r;  // fake_cuda_graph.cpp
    CUresult err = CUDA_SUCCESS;
    Context* c = current_ctx_locked(&err);
    if (c == nullptr) return err;
    Device& d = g.devices[static_cast<size_t>(c->ordinal)];
    size_t ps = page_size();
    if (bytesize > d.total) return CUDA_ERROR_OUT_OF_MEMORY;
    size_t mapped = (bytesize + ps - 1) / ps * ps;
    if (mapped > d.total - d.used) return CUDA_ERROR_OUT_OF_MEMORY;
    // Freed device memory first (first fit), so freed ranges do not pile up.
    auto f = g.freed.begin();
    while (f != g.freed.end() && f->second.size < mapped) ++f;
    void* hint = f != g.freed.end() ? reinterpret_cast<void*>(f->first) : nullptr;
    void* p = mmap(hint, mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (hint != nullptr ? MAP_FIXED : 0), -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    if (hint != nullptr) {
        const FreedRange rest{f->second.size - mapped};
        g.freed.erase(f);
        if (rest.size > 0) g.freed[reinterpret_cast<uintptr_t>(p) + mapped] = rest;
    }
    Allocation a;
    a.base = reinterpret_cast<uintptr_t>(p);
    a.size = bytesize;
    a.mapped = mapped;
    a.ctx = c->handle;
    a.ordinal = c->ordinal;
    a.buffer_id = new_handle_locked();
    g.allocations[a.base] = a;
    d.used += mapped;
    *dptr = a.base;
    return CUDA_SUCCESS;
}

// Recorded: cuMemFree(0) succeeds; an interior, unknown or already freed
// pointer is CUDA_ERROR_INVALID_VALUE.
XMC_FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    FAKE_ENTER("cuMemFree_v2");
    if (dptr == 0) return CUDA_SUCCESS;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    auto it = g.allocations.find(dptr);
    if (it == g.allocations.end()) return CUDA_ERROR_INVALID_VALUE;
    free_allocation_locked(it);
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
    FAKE_ENTER("cuMemGetInfo_v2");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    Context* c = current_ctx_locked(&err);
    if (c == nullptr) return err;
    // Recorded: a NULL result is skipped, not refused (mem_get_info_null).
    const Device& d = g.devices[static_cast<size_t>(c->ordinal)];
    if (free_bytes != nullptr) *free_bytes = d.total - d.used;
    if (total_bytes != nullptr) *total_bytes = d.total;
    return CUDA_SUCCESS;
}

// ---- registration -----------------------------------------------------------------------

XMC_FAKE_EXPORT CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int flags) {
    FAKE_ENTER_SIZE("cuMemHostRegister_v2", bytesize);
    uint64_t offset = current_nonidentity_offset();
    uintptr_t base = reinterpret_cast<uintptr_t>(p);
    if (p == nullptr || bytesize == 0 || base + bytesize < base) return CUDA_ERROR_INVALID_VALUE;
    const unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                           CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
    if (flags & ~known) return CUDA_ERROR_INVALID_VALUE;
    if (flags & CU_MEMHOSTREGISTER_IOMEMORY) return CUDA_ERROR_INVALID_VALUE;  // no I/O memory here
    bool read_only = (flags & CU_MEMHOSTREGISTER_READ_ONLY) != 0;
    bool usable = host_range_usable(base, bytesize, !read_only);  // reads /proc: outside the lock
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    if (CUresult r = unsafe_in_capture_locked(); r != CUDA_SUCCESS) return r;  // fake_cuda_graph.cpp
    CUresult err = CUDA_SUCCESS;
    Context* c = current_ctx_locked(&err);
    if (c == nullptr) return err;
    bool known_attr = false;
    if (device_attribute_locked(c->ordinal, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, &known_attr) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (read_only &&
        device_attribute_locked(c->ordinal, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, &known_attr) == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (overlaps(g.allocations, base, bytesize) || in_reservation_locked(base, bytesize))
        return CUDA_ERROR_INVALID_VALUE;  // device memory (recorded: reg_device_memory)
    for (auto& [b, r] : g.registrations)  // recorded: host_alloc_then_register
        if (r.mapped != 0 && b < base + bytesize && base < b + r.size) return CUDA_ERROR_INVALID_VALUE;
    if (overlaps(g.registrations, base, bytesize)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    if (bytesize > physical_memory()) return CUDA_ERROR_OUT_OF_MEMORY;  // whether mapped or not (recorded)
    if (!usable) return CUDA_ERROR_INVALID_VALUE;
    Registration r;
    r.base = base;
    r.size = bytesize;
    r.flags = flags;
    r.ctx = c->handle;
    r.ordinal = c->ordinal;
    r.dev_base = base + offset;  // identity unless a nonidentity fault rule chose an offset
    r.buffer_id = new_handle_locked();
    g.registrations[base] = r;
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuMemHostUnregister(void* p) {
    FAKE_ENTER("cuMemHostUnregister");
    if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = g.registrations.find(a);
    if (it != g.registrations.end()) {
        if (it->second.mapped != 0) return CUDA_ERROR_INVALID_VALUE;  // recorded: host_alloc_then_unregister
        g.registrations.erase(it);
        return CUDA_SUCCESS;
    }
    if (find_containing(g.registrations, a) != g.registrations.end()) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

XMC_FAKE_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p, unsigned int flags) {
    FAKE_ENTER("cuMemHostGetDevicePointer_v2");
    if (pdptr == nullptr || p == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    if (current_ctx_locked(&err) == nullptr) return err;
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = find_containing(g.registrations, a);
    if (it == g.registrations.end()) return CUDA_ERROR_INVALID_VALUE;
    // Recorded: also works in another device's context, portable or not.
    *pdptr = it->second.dev_base + (a - it->second.base);
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuMemHostGetFlags(unsigned int* pflags, void* p) {
    FAKE_ENTER("cuMemHostGetFlags");
    if (pflags == nullptr || p == nullptr) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    auto it = find_containing(g.registrations, reinterpret_cast<uintptr_t>(p));
    if (it == g.registrations.end()) return CUDA_ERROR_INVALID_VALUE;
    // Recorded: flags 0 reports 2, DEVICEMAP 2, PORTABLE|DEVICEMAP 3: with unified
    // addressing every registration is mapped.
    *pflags = it->second.flags | CU_MEMHOSTREGISTER_DEVICEMAP;
    return CUDA_SUCCESS;
}

// ---- host memory the driver allocates ----------------------------------------------------
// Recorded (probe_cases_fidelity.cpp, host_*): cuMemHostAlloc and cuMemAllocHost give page-locked
// memory the driver owns, known to every query as a registration (flags | DEVICEMAP, identity
// device pointer, memory type host), which cuMemHostRegister / cuMemHostUnregister refuse with
// CUDA_ERROR_INVALID_VALUE; cuMemFreeHost frees only such a base (NULL: success; twice, an
// interior address, registered or foreign memory: CUDA_ERROR_INVALID_VALUE); 0 bytes succeed with
// a NULL pointer; an unknown flag or a NULL out-pointer is CUDA_ERROR_INVALID_VALUE; no current
// context, CUDA_ERROR_INVALID_CONTEXT.

namespace {
CUresult host_alloc(void** pp, size_t bytesize, unsigned int flags) {
    const unsigned known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
    if (pp == nullptr || (flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    Context* c = current_ctx_locked(&err);
    if (c == nullptr) return err;
    *pp = nullptr;
    if (bytesize == 0) return CUDA_SUCCESS;
    if (bytesize > physical_memory()) return CUDA_ERROR_OUT_OF_MEMORY;
    const size_t mapped = (bytesize + page_size() - 1) / page_size() * page_size();
    void* m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    Registration r;
    r.base = reinterpret_cast<uintptr_t>(m);
    r.size = bytesize;
    r.flags = flags & (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    r.ctx = c->handle;
    r.ordinal = c->ordinal;
    r.dev_base = r.base;
    r.mapped = mapped;
    r.buffer_id = new_handle_locked();
    g.registrations[r.base] = r;
    *pp = m;
    return CUDA_SUCCESS;
}
}  // namespace

XMC_FAKE_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int flags) {
    FAKE_ENTER_SIZE("cuMemHostAlloc", bytesize);
    return host_alloc(pp, bytesize, flags);
}

XMC_FAKE_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
    FAKE_ENTER_SIZE("cuMemAllocHost_v2", bytesize);
    return host_alloc(pp, bytesize, 0);
}

XMC_FAKE_EXPORT CUresult cuMemFreeHost(void* p) {
    FAKE_ENTER("cuMemFreeHost");
    if (p == nullptr) return CUDA_SUCCESS;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    auto it = g.registrations.find(reinterpret_cast<uintptr_t>(p));
    if (it == g.registrations.end() || it->second.mapped == 0) return CUDA_ERROR_INVALID_VALUE;
    munmap(p, it->second.mapped);
    g.registrations.erase(it);
    return CUDA_SUCCESS;
}

// ---- pointer attributes --------------------------------------------------------------------

XMC_FAKE_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
    FAKE_ENTER("cuPointerGetAttribute");
    if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);

    // What is at ptr: a registration (by host or device address), a device
    // allocation, or a VMM mapping.
    const Registration* reg = nullptr;
    const Allocation* alloc = nullptr;
    const Mapping* map = nullptr;
    const IpcOpened* ipc = nullptr;
    uintptr_t host = 0, dev = 0, start = 0;
    size_t size = 0;
    auto r = find_containing(g.registrations, ptr);
    if (r != g.registrations.end()) {
        reg = &r->second;
        host = ptr;
        dev = reg->dev_base + (ptr - reg->base);
    } else {
        for (auto& [b, rr] : g.registrations)
            if (rr.dev_base <= ptr && ptr < rr.dev_base + rr.size) {
                reg = &rr;
                dev = ptr;
                host = rr.base + (ptr - rr.dev_base);
            }
    }
    if (reg != nullptr) {
        start = reg->dev_base;
        size = reg->size;
    } else if (auto a = find_containing(g.allocations, ptr); a != g.allocations.end()) {
        alloc = &a->second;
        dev = ptr;
        start = alloc->base;
        size = alloc->size;
    } else if ((ipc = find_ipc_opened_locked(ptr)) != nullptr) {
        dev = ptr;
        start = ipc->base;
        size = ipc->size;
    } else if (auto m = find_containing(g.mappings, ptr); m != g.mappings.end()) {
        map = &m->second;
        dev = ptr;
        start = map->va;
        size = map->size;
    } else {
        return CUDA_ERROR_INVALID_VALUE;  // recorded for unregistered host memory
    }
    int ordinal = 0;
    if (reg != nullptr) {
        ordinal = reg->ordinal;
    } else if (alloc != nullptr) {
        ordinal = alloc->ordinal;
    } else if (ipc != nullptr) {
        ordinal = ipc->ordinal;
    } else if (auto h = g.handles.find(map->handle); h != g.handles.end()) {
        ordinal = h->second.ordinal;  // a mapping keeps its (maybe released) handle alive
    }
    uint64_t ctx = reg ? reg->ctx : alloc ? alloc->ctx : ipc ? ipc->ctx : 0;
    // VMM memory may be exported as a POSIX fd when its handle was created for it.
    unsigned long long handle_types = CU_MEM_HANDLE_TYPE_NONE;
    if (map != nullptr)
        if (auto h = g.handles.find(map->handle); h != g.handles.end() && h->second.shareable)
            handle_types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

    switch (attribute) {
        case CU_POINTER_ATTRIBUTE_CONTEXT:
            *static_cast<CUcontext*>(data) = to_handle<CUcontext>(ctx);
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *static_cast<unsigned int*>(data) = reg ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
            *static_cast<CUdeviceptr*>(data) = dev;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_HOST_POINTER:
            if (reg == nullptr) return CUDA_ERROR_INVALID_VALUE;
            *static_cast<void**>(data) = reinterpret_cast<void*>(host);
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
            *static_cast<int*>(data) = ordinal;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *static_cast<CUdeviceptr*>(data) = start;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            *static_cast<size_t*>(data) = size;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:  // the mapping (VMM) or the allocation itself
            *static_cast<CUdeviceptr*>(data) = start;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
            *static_cast<size_t*>(data) = size;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_MAPPED:
            *static_cast<bool*>(data) = true;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED:
            *static_cast<bool*>(data) = false;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:  // cuIpcGetMemHandle takes cuMemAlloc memory only
            *static_cast<bool*>(data) = alloc != nullptr;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_BUFFER_ID:  // recorded: new for every allocation, also at a reused address
            *static_cast<unsigned long long*>(data) =
                reg ? reg->buffer_id : alloc ? alloc->buffer_id : ipc ? ipc->buffer_id : map->buffer_id;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
            *static_cast<unsigned long long*>(data) = handle_types;
            return CUDA_SUCCESS;
        default:
            return CUDA_ERROR_INVALID_VALUE;  // not modelled
    }
}
