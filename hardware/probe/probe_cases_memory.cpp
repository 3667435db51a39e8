// Cases: host-memory registration and device memory beyond the first
// recordings (XMC_CU_REGISTER, cuMemAlloc/cuMemFree/cuMemGetInfo): refused
// arguments, the per-call limits (ranges above the machine's memory or over a
// hole, allocations above the device's), the backends' pin path (mlock'ed
// memory, no cuMemHostAlloc), operations on unregistered or unmapped memory,
// and what the next call answers after a refusal (PIN-FAIL-CLEAN: a refused
// call changes nothing).
#include "probe_support.h"

#include <cstdlib>

namespace xmc::probe {
namespace {

// -- registration: refused arguments and per-call limits
Outcome c_reg_size_wraps(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 1);
    size_t n = ~static_cast<size_t>(0) - reinterpret_cast<uintptr_t>(b) + 4096;  // p + n wraps past 0
    return res(p, try_reg(p, cl, b, n, 0), "p + size wraps around the address space");
}

Outcome c_reg_over_hole(P& p) {
    Cleanup cl;
    size_t ps = page_size();
    char* b = host_pages(cl, 3);
    if (munmap(b + ps, ps) != 0) throw SetupFailed{CUDA_ERROR_OPERATING_SYSTEM, "munmap"};
    return res(p, try_reg(p, cl, b, 3 * ps, 0), "three pages, the middle one unmapped");
}

// The machine's memory plus 1 GiB, a page multiple.
size_t above_ram() {
    size_t ram = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * page_size();
    return ram + (size_t(1) << 30);
}

// A range larger than the machine's memory that costs nothing: reserved
// PROT_NONE (which = 0), or one touched page followed by nothing mapped (1).
// (A range that large and really backed would pin every page first: minutes,
// and the OOM killer on the GPU machine.)
Outcome c_reg_huge(P& p, int which) {
    size_t n = above_ram();
    void* v = mmap(nullptr, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (v == MAP_FAILED) throw SetupFailed{CUDA_ERROR_OUT_OF_MEMORY, "mmap of the machine's memory + 1 GiB"};
    char* b = static_cast<char*>(v);
    size_t mapped = n;
    if (which == 1) {
        munmap(b + page_size(), n - page_size());
        mapped = page_size();
        mprotect(b, page_size(), PROT_READ | PROT_WRITE);
        b[0] = 1;
    }
    CUresult r = p.d.cuMemHostRegister(b, n, 0);
    if (r == CUDA_SUCCESS) p.d.cuMemHostUnregister(b);
    munmap(b, mapped);
    return res(p, r, std::to_string(n >> 20) + " MiB (the machine's memory + 1 GiB), " +
                         (which == 0 ? "reserved PROT_NONE" : "one page mapped, the rest unmapped"));
}

Outcome c_reg_flag(P& p, unsigned flags, const char* note) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    return res(p, try_reg(p, cl, b, 4 * page_size(), flags), note);
}
Outcome c_reg_iomemory_flag(P& p) {
    return c_reg_flag(p, CU_MEMHOSTREGISTER_IOMEMORY, "CU_MEMHOSTREGISTER_IOMEMORY on anonymous memory");
}

// The backends' pin path: posix_memalign + mlock, then register (no cuMemHostAlloc).
Outcome c_reg_mlocked_memory(P& p) {
    Cleanup cl;
    size_t n = 1 << 20;
    void* v = nullptr;
    if (posix_memalign(&v, page_size(), n) != 0) throw SetupFailed{CUDA_ERROR_OUT_OF_MEMORY, "posix_memalign"};
    cl.add([v] { std::free(v); });
    std::memset(v, 0x11, n);
    bool locked = mlock(v, n) == 0;
    if (locked) cl.add([v, n] { munlock(v, n); });
    CUresult r = try_reg(p, cl, v, n, CU_MEMHOSTREGISTER_DEVICEMAP);
    return res(p, r, std::string("posix_memalign'ed 1 MiB, ") + (locked ? "mlock'ed" : "mlock refused") +
                         ", CU_MEMHOSTREGISTER_DEVICEMAP");
}

// -- registration: what changes (nothing) after a refusal
Outcome c_reg_refused_then(P& p, int which) {
    Cleanup cl;
    size_t ps = page_size();
    char* b = host_pages(cl, 4);
    void* gone = mmap(nullptr, 4 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (gone == MAP_FAILED) throw SetupFailed{CUDA_ERROR_OUT_OF_MEMORY, "mmap"};
    munmap(gone, 4 * ps);
    CUresult refused = p.d.cuMemHostRegister(gone, 4 * ps, 0);
    if (refused == CUDA_SUCCESS) {
        p.d.cuMemHostUnregister(gone);
        return word("skipped", 0, "registration of unmapped memory was accepted");
    }
    std::string note = "after a refused registration of unmapped memory (" + result_name(p.d, refused) + "): ";
    if (which == 0) {
        return res(p, try_reg(p, cl, b, 4 * ps, 0), note + "register valid memory");
    }
    CUdeviceptr a = 0;
    CUresult r = p.d.cuMemAlloc(&a, 1 << 20);
    if (r == CUDA_SUCCESS) p.d.cuMemFree(a);
    return res(p, r, note + "cuMemAlloc");
}

// [p, p+8pg) registered; [p+4pg, p+12pg) refused as overlapping; then the
// first registration must still be whole (which 0) and the refused range's
// tail must not have been registered (which 1).
Outcome c_reg_refused_overlap(P& p, int which) {
    Cleanup cl;
    size_t ps = page_size();
    char* b = host_pages(cl, 16);
    TRY(p.d.cuMemHostRegister(b, 8 * ps, 0));
    CUresult refused = p.d.cuMemHostRegister(b + 4 * ps, 8 * ps, 0);
    if (refused == CUDA_SUCCESS) unreg_later(p, cl, b + 4 * ps);
    std::string note = "after a refused overlapping registration (" + result_name(p.d, refused) + "): ";
    if (which == 0) {
        CUresult r = p.d.cuMemHostUnregister(b);
        if (r != CUDA_SUCCESS) unreg_later(p, cl, b);
        return res(p, r, note + "unregister the first");
    }
    unreg_later(p, cl, b);
    return res(p, try_reg(p, cl, b + 8 * ps, 4 * ps, 0), note + "register its tail [p+8pg, p+12pg)");
}

// -- registration: operations on memory that is gone or unregistered
Outcome c_reg_unregister_after_munmap(P& p) {
    size_t n = 4 * page_size();
    void* v = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (v == MAP_FAILED) throw SetupFailed{CUDA_ERROR_OUT_OF_MEMORY, "mmap"};
    std::memset(v, 1, n);
    CUresult rr = p.d.cuMemHostRegister(v, n, 0);
    if (rr != CUDA_SUCCESS) {
        munmap(v, n);
        throw SetupFailed{rr, "cuMemHostRegister"};
    }
    munmap(v, n);
    return res(p, p.d.cuMemHostUnregister(v), "registered, munmap'ed, then unregistered");
}

// A registration whose memory was unmapped, and new memory mapped at the same
// address: does the driver still hold the old range?
Outcome c_reg_stale_after_munmap(P& p) {
    Cleanup cl;
    size_t n = 4 * page_size();
    void* v = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (v == MAP_FAILED) throw SetupFailed{CUDA_ERROR_OUT_OF_MEMORY, "mmap"};
    std::memset(v, 1, n);
    CUresult rr = p.d.cuMemHostRegister(v, n, 0);
    if (rr != CUDA_SUCCESS) {
        munmap(v, n);
        throw SetupFailed{rr, "cuMemHostRegister"};
    }
    unreg_later(p, cl, v);  // runs after the munmap below (registered first)
    munmap(v, n);
    void* w = mmap(v, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (w == MAP_FAILED || w != v) {
        if (w != MAP_FAILED) munmap(w, n);
        return word("skipped", 0, "could not map new memory at the same address");
    }
    cl.add([w, n] { munmap(w, n); });
    std::memset(w, 2, n);
    CUresult r = p.d.cuMemHostRegister(w, n, 0);
    if (r == CUDA_SUCCESS) {
        // the old registration is gone or was replaced: unregister the new one too
        unreg_later(p, cl, w);
    }
    return res(p, r, "register new memory mapped where a registered range was munmap'ed");
}

Outcome c_get_dev_ptr_case(P& p, int which) {
    Cleanup cl;
    size_t n = 4 * page_size();
    char* b = host_pages(cl, 4);
    CUdeviceptr dp = 0;
    if (which == 0) {
        reg(p, cl, b, n, CU_MEMHOSTREGISTER_DEVICEMAP);
        return res(p, p.d.cuMemHostGetDevicePointer(nullptr, b, 0), "registered base, NULL result");
    }
    if (which == 1) {
        TRY(p.d.cuMemHostRegister(b, n, CU_MEMHOSTREGISTER_DEVICEMAP));
        TRY(p.d.cuMemHostUnregister(b));
        return res(p, p.d.cuMemHostGetDevicePointer(&dp, b, 0), "registered, then unregistered");
    }
    reg(p, cl, b, n, CU_MEMHOSTREGISTER_DEVICEMAP);
    return res(p, p.d.cuMemHostGetDevicePointer(&dp, b + n, 0), "one byte past the registered range");
}

// -- device memory
Outcome c_mem_alloc_null_out(P& p) { return res(p, p.d.cuMemAlloc(nullptr, 4096)); }

Outcome c_mem_alloc_size(P& p, size_t n, const std::string& note) {
    CUdeviceptr a = 0;
    CUresult r = p.d.cuMemAlloc(&a, n);
    if (r == CUDA_SUCCESS) p.d.cuMemFree(a);
    return res(p, r, note);
}
Outcome c_mem_alloc_above_total(P& p) {
    size_t t = total_mem(p);
    return c_mem_alloc_size(p, t + (size_t(1) << 30), "device memory + 1 GiB");
}

// After a refused cuMemAlloc of more than the device has: the next valid
// allocation (which 0), and stream work in the same context (which 1).
Outcome c_mem_alloc_oom_then(P& p, int which) {
    Cleanup cl;
    size_t t = total_mem(p);
    CUdeviceptr big = 0;
    CUresult refused = p.d.cuMemAlloc(&big, t + (size_t(1) << 30));
    if (refused == CUDA_SUCCESS) {
        p.d.cuMemFree(big);
        return word("skipped", 0, "an allocation above device memory was accepted");
    }
    std::string note = "after a refused cuMemAlloc of device memory + 1 GiB (" + result_name(p.d, refused) + "): ";
    if (which == 0) {
        CUdeviceptr a = 0;
        CUresult r = p.d.cuMemAlloc(&a, 1 << 20);
        if (r == CUDA_SUCCESS) p.d.cuMemFree(a);
        return res(p, r, note + "cuMemAlloc of 1 MiB");
    }
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 1 << 20);
    TRY(p.d.cuMemsetD8Async(a, 7, 1 << 20, s));
    return res(p, p.d.cuStreamSynchronize(s), note + "memset on a stream, then its synchronize");
}

Outcome c_mem_free_vmm_pointer(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = mapped_range(p, cl, g);
    return res(p, p.d.cuMemFree(va), "a mapped VMM range");
}
Outcome c_mem_get_info_null(P& p) {
    size_t t = 0;
    return res(p, p.d.cuMemGetInfo(nullptr, &t), "free NULL");
}

}  // namespace

std::vector<Case> memory_cases() {
    return {
        {"reg_size_wraps", Setup::ctx, c_reg_size_wraps, "register a size that wraps the address space", nullptr},
        {"reg_over_hole", Setup::ctx, c_reg_over_hole, "register a range with an unmapped page inside", nullptr},
        {"reg_huge_prot_none", Setup::ctx, with<c_reg_huge, 0>,
         "register more than the machine's memory, reserved PROT_NONE", nullptr},
        {"reg_iomemory_flag", Setup::ctx, c_reg_iomemory_flag,
         "register anonymous memory with CU_MEMHOSTREGISTER_IOMEMORY", nullptr},
        {"reg_mlocked_memory", Setup::ctx, c_reg_mlocked_memory,
         "register posix_memalign'ed, mlock'ed memory (the pin path)", nullptr},
        {"reg_refused_then_valid", Setup::ctx, with<c_reg_refused_then, 0>,
         "after a refused registration, register valid memory", nullptr},
        {"reg_refused_overlap_keeps_first", Setup::ctx, with<c_reg_refused_overlap, 0>,
         "after a refused overlapping registration, unregister the first", nullptr},
        {"reg_refused_overlap_tail_free", Setup::ctx, with<c_reg_refused_overlap, 1>,
         "after a refused overlapping registration, register its non-overlapping tail", nullptr},
        {"reg_unregister_after_munmap", Setup::ctx, c_reg_unregister_after_munmap,
         "unregister a range whose memory was munmap'ed", nullptr},
        {"reg_stale_after_munmap", Setup::ctx, c_reg_stale_after_munmap,
         "register new memory at the address of a registered, munmap'ed range", nullptr},
        {"host_get_device_pointer_null_out", Setup::ctx, with<c_get_dev_ptr_case, 0>,
         "cuMemHostGetDevicePointer with a NULL result", nullptr},
        {"host_get_device_pointer_after_unregister", Setup::ctx, with<c_get_dev_ptr_case, 1>,
         "cuMemHostGetDevicePointer of an unregistered range", nullptr},
        {"host_get_device_pointer_past_end", Setup::ctx, with<c_get_dev_ptr_case, 2>,
         "cuMemHostGetDevicePointer one byte past a registration", nullptr},
        {"mem_alloc_null_out", Setup::ctx, c_mem_alloc_null_out, "cuMemAlloc with a NULL result", nullptr},
        {"mem_alloc_above_total", Setup::ctx, c_mem_alloc_above_total, "cuMemAlloc of device memory + 1 GiB",
         nullptr},
        {"mem_alloc_oom_then_valid", Setup::ctx, with<c_mem_alloc_oom_then, 0>,
         "after a refused oversized cuMemAlloc, cuMemAlloc of 1 MiB", nullptr},
        {"mem_alloc_oom_then_stream", Setup::ctx, with<c_mem_alloc_oom_then, 1>,
         "after a refused oversized cuMemAlloc, stream work and its synchronize", nullptr},
        {"mem_free_vmm_pointer", Setup::ctx, c_mem_free_vmm_pointer, "cuMemFree of a mapped VMM range", nullptr},
        {"mem_get_info_null", Setup::ctx, c_mem_get_info_null, "cuMemGetInfo with a NULL free result", nullptr},
    };
}

}  // namespace xmc::probe
