// The first two recordings' cases (cuda_driver_580_h200.tsv): before initialisation, host-memory registration (cuMemHostRegister and its
// queries: flags, pointer attributes, device pointers, across two devices'
// contexts) and calls that need a current context, made without one.
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

// -- before initialisation
Outcome c_init_not_called(P& p) {
    int n = 0;
    return res(p, p.d.cuDeviceGetCount(&n));
}

Outcome c_device_get_invalid_ordinal(P& p) {
    CUdevice d = 0;
    return res(p, p.d.cuDeviceGet(&d, p.device_count));
}

Outcome c_primary_ctx_release_unretained(P& p) { return res(p, p.d.cuDevicePrimaryCtxRelease(0)); }

Outcome c_ctx_pop_empty(P& p) {
    TRY(p.d.cuCtxSetCurrent(nullptr));
    CUcontext c = nullptr;
    CUresult r = p.d.cuCtxPopCurrent(&c);
    p.d.cuCtxSetCurrent(p.ctx[0]);
    return res(p, r);
}

// -- registration
Outcome c_reg_basic(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 16);
    return res(p, try_reg(p, cl, b, 16 * page_size(), 0));
}

// In 16 pages at p: [first, first + first_n) pages registered, then the registration under test
// of [at, at + n) pages.
Outcome c_reg_second(P& p, size_t first, size_t first_n, size_t at, size_t n, const char* note) {
    Cleanup cl;
    size_t ps = page_size();
    char* b = host_pages(cl, 16);
    reg(p, cl, b + first * ps, first_n * ps);
    return res(p, try_reg(p, cl, b + at * ps, n * ps, 0), note);
}
Outcome c_reg_double_same_range(P& p) { return c_reg_second(p, 0, 16, 0, 16, ""); }
Outcome c_reg_overlap_partial(P& p) {
    return c_reg_second(p, 0, 8, 4, 8, "[p,p+8pg) registered, then [p+4pg,p+12pg)");
}
Outcome c_reg_overlap_contained(P& p) {
    return c_reg_second(p, 0, 8, 2, 2, "[p,p+8pg) registered, then [p+2pg,p+4pg)");
}
Outcome c_reg_overlap_containing(P& p) {
    return c_reg_second(p, 4, 2, 0, 12, "[p+4pg,p+6pg) registered, then [p,p+12pg)");
}
Outcome c_reg_adjacent(P& p) { return c_reg_second(p, 0, 4, 4, 4, "[p,p+4pg) registered, then [p+4pg,p+8pg)"); }

Outcome c_reg_unaligned_address(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    return res(p, try_reg(p, cl, b + 8, page_size(), 0), "p+8, one page");
}

Outcome c_reg_unaligned_size(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    return res(p, try_reg(p, cl, b, page_size() + 100, 0), "page-aligned p, one page + 100 bytes");
}

Outcome c_reg_unaligned_unregister(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    CUresult r = p.d.cuMemHostRegister(b + 8, page_size(), 0);
    if (r != CUDA_SUCCESS) return word("skipped", 0, "unaligned registration refused");
    return res(p, p.d.cuMemHostUnregister(b + 8), "unregister of the unaligned pointer given");
}

Outcome c_reg_unaligned_unregister_page_base(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    CUresult r = p.d.cuMemHostRegister(b + 8, page_size(), 0);
    if (r != CUDA_SUCCESS) return word("skipped", 0, "unaligned registration refused");
    CUresult u = p.d.cuMemHostUnregister(b);
    if (u != CUDA_SUCCESS) unreg_later(p, cl, b + 8);
    return res(p, u, "registered p+8, unregister of the page base p");
}

Outcome c_reg_unaligned_same_page(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    CUresult r = p.d.cuMemHostRegister(b + 8, 100, 0);
    if (r != CUDA_SUCCESS) return word("skipped", 0, "unaligned registration refused");
    unreg_later(p, cl, b + 8);
    CUresult r2 = p.d.cuMemHostRegister(b + 512, 100, 0);
    if (r2 == CUDA_SUCCESS) unreg_later(p, cl, b + 512);
    return res(p, r2, "[p+8,p+108) registered, then disjoint [p+512,p+612) in the same page");
}

Outcome c_reg_zero_size(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 1);
    return res(p, try_reg(p, cl, b, 0, 0));
}

Outcome c_reg_null(P& p) {
    CUresult r = p.d.cuMemHostRegister(nullptr, page_size(), 0);
    if (r == CUDA_SUCCESS) p.d.cuMemHostUnregister(nullptr);
    return res(p, r);
}

Outcome c_reg_invalid_flags(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 1);
    return res(p, try_reg(p, cl, b, page_size(), 0x80), "flags 0x80");
}

Outcome c_reg_unmapped_memory(P& p) {
    size_t n = 4 * page_size();
    void* v = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (v == MAP_FAILED) throw SetupFailed{CUDA_ERROR_OUT_OF_MEMORY, "mmap"};
    munmap(v, n);
    CUresult r = p.d.cuMemHostRegister(v, n, 0);
    if (r == CUDA_SUCCESS) p.d.cuMemHostUnregister(v);
    return res(p, r, "a range just munmap'ed");
}

Outcome c_reg_readonly_memory(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4, PROT_READ);
    return res(p, try_reg(p, cl, b, 4 * page_size(), 0), "PROT_READ mapping, flags 0");
}

Outcome c_reg_device_memory(P& p) {
    Cleanup cl;
    CUdeviceptr a = dalloc(p, cl, 1 << 20);
    void* v = reinterpret_cast<void*>(a);
    return res(p, try_reg(p, cl, v, 1 << 20, 0), "a cuMemAlloc pointer");
}

Outcome c_reg_after_unregister(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    TRY(p.d.cuMemHostRegister(b, 4 * page_size(), 0));
    TRY(p.d.cuMemHostUnregister(b));
    return res(p, try_reg(p, cl, b, 4 * page_size(), 0));
}

Outcome c_unreg_interior(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    reg(p, cl, b, 4 * page_size());
    return res(p, p.d.cuMemHostUnregister(b + page_size()), "base + 1 page");
}

Outcome c_unreg_interior_unaligned(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    reg(p, cl, b, 4 * page_size());
    return res(p, p.d.cuMemHostUnregister(b + 64), "base + 64 bytes");
}

Outcome c_unreg_interior_then_base(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    TRY(p.d.cuMemHostRegister(b, 4 * page_size(), 0));
    CUresult first = p.d.cuMemHostUnregister(b + page_size());
    CUresult r = p.d.cuMemHostUnregister(b);
    return res(p, r, "unregister of the base after a refused interior unregister (" +
                         result_name(p.d, first) + ")");
}

Outcome c_unreg_twice(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    TRY(p.d.cuMemHostRegister(b, 4 * page_size(), 0));
    TRY(p.d.cuMemHostUnregister(b));
    return res(p, p.d.cuMemHostUnregister(b));
}

Outcome c_unreg_never_registered(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    return res(p, p.d.cuMemHostUnregister(b));
}

Outcome c_unreg_null(P& p) { return res(p, p.d.cuMemHostUnregister(nullptr)); }

Outcome c_unreg_no_current_context(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    TRY(p.d.cuMemHostRegister(b, 4 * page_size(), 0));
    TRY(p.d.cuCtxSetCurrent(nullptr));
    CUresult r = p.d.cuMemHostUnregister(b);
    p.d.cuCtxSetCurrent(p.ctx[0]);
    if (r != CUDA_SUCCESS) unreg_later(p, cl, b);
    return res(p, r, "no current context at unregister");
}

Outcome c_reg_get_flags(P& p, bool registered, size_t at, bool want_value) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    if (registered) reg(p, cl, b, 4 * page_size(), CU_MEMHOSTREGISTER_DEVICEMAP);
    unsigned flags = 0;
    CUresult r = p.d.cuMemHostGetFlags(&flags, b + at);
    if (want_value) {
        if (r != CUDA_SUCCESS) throw SetupFailed{r, "cuMemHostGetFlags"};
        return value(flags, "registered with CU_MEMHOSTREGISTER_DEVICEMAP");
    }
    return res(p, r);
}

// cuPointerGetAttribute on registered / unregistered host memory.
Outcome c_ptr_attr(P& p, bool registered, CUpointer_attribute attr, int what) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    if (registered) reg(p, cl, b, 4 * page_size());
    unsigned long long v = 0;  // large enough for every attribute used here
    CUresult r = p.d.cuPointerGetAttribute(&v, attr, reinterpret_cast<CUdeviceptr>(b));
    if (what == 0) return res(p, r);
    if (r != CUDA_SUCCESS) throw SetupFailed{r, "cuPointerGetAttribute"};
    if (what == 1) return value(static_cast<int64_t>(v), "CU_MEMORYTYPE: 1 host, 2 device");
    return identity(v == reinterpret_cast<uintptr_t>(b),
                    "host " + hex(reinterpret_cast<uintptr_t>(b)) + " device " + hex(v));
}
Outcome c_ptr_attr_memory_type_device_value(P& p) {
    Cleanup cl;
    CUdeviceptr a = dalloc(p, cl, 1 << 20);
    unsigned v = 0;
    TRY(p.d.cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a));
    return value(v, "CU_MEMORYTYPE of a cuMemAlloc pointer");
}

// cuMemHostGetDevicePointer on registered memory.
Outcome c_get_dev_ptr(P& p, bool registered, size_t at, unsigned flags, bool want_identity) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    if (registered) reg(p, cl, b, 4 * page_size(), CU_MEMHOSTREGISTER_DEVICEMAP);
    CUdeviceptr dp = 0;
    CUresult r = p.d.cuMemHostGetDevicePointer(&dp, b + at, flags);
    if (!want_identity) return res(p, r);
    if (r != CUDA_SUCCESS) throw SetupFailed{r, "cuMemHostGetDevicePointer"};
    return identity(dp == reinterpret_cast<uintptr_t>(b + at),
                    "host " + hex(reinterpret_cast<uintptr_t>(b + at)) + " device " + hex(dp));
}

// -- registration across two devices' contexts
Outcome c_reg2_same_range_other_context(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    reg(p, cl, b, 4 * page_size());
    TRY(p.d.cuCtxSetCurrent(p.ctx[1]));
    CUresult r = p.d.cuMemHostRegister(b, 4 * page_size(), 0);
    if (r == CUDA_SUCCESS) p.d.cuMemHostUnregister(b);
    TRY(p.d.cuCtxSetCurrent(p.ctx[0]));
    return res(p, r, "registered in device 0's context, again in device 1's");
}

Outcome c_reg2_get_dev_ptr_other_context(P& p, unsigned flags) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    reg(p, cl, b, 4 * page_size(), flags);
    TRY(p.d.cuCtxSetCurrent(p.ctx[1]));
    CUdeviceptr dp = 0;
    CUresult r = p.d.cuMemHostGetDevicePointer(&dp, b, 0);
    TRY(p.d.cuCtxSetCurrent(p.ctx[0]));
    return res(p, r, "flags " + std::to_string(flags) + ", asked in device 1's context");
}

Outcome c_reg2_unregister_from_other_context(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    TRY(p.d.cuMemHostRegister(b, 4 * page_size(), 0));
    TRY(p.d.cuCtxSetCurrent(p.ctx[1]));
    CUresult r = p.d.cuMemHostUnregister(b);
    TRY(p.d.cuCtxSetCurrent(p.ctx[0]));
    if (r != CUDA_SUCCESS) unreg_later(p, cl, b);
    return res(p, r, "registered in device 0's context, unregistered in device 1's");
}

// -- calls that need a current context, made without one
Outcome c_no_ctx(P& p, int which) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    TRY(p.d.cuCtxSetCurrent(nullptr));
    CUresult r = CUDA_ERROR_UNKNOWN;
    CUdeviceptr dp = 0;
    size_t f = 0, t = 0;
    CUstream s = nullptr;
    switch (which) {
        case 0:
            r = p.d.cuMemHostRegister(b, 4 * page_size(), 0);
            if (r == CUDA_SUCCESS) p.d.cuMemHostUnregister(b);
            break;
        case 1: r = p.d.cuMemAlloc(&dp, 4096); if (r == CUDA_SUCCESS) p.d.cuMemFree(dp); break;
        case 2: r = p.d.cuMemGetInfo(&f, &t); break;
        case 3: r = p.d.cuStreamCreate(&s, 0); if (r == CUDA_SUCCESS) p.d.cuStreamDestroy(s); break;
        default: break;
    }
    p.d.cuCtxSetCurrent(p.ctx[0]);
    return res(p, r, "no current context");
}

Outcome c_no_ctx_get_device_pointer(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    reg(p, cl, b, 4 * page_size(), CU_MEMHOSTREGISTER_DEVICEMAP);
    TRY(p.d.cuCtxSetCurrent(nullptr));
    CUdeviceptr dp = 0;
    CUresult r = p.d.cuMemHostGetDevicePointer(&dp, b, 0);
    p.d.cuCtxSetCurrent(p.ctx[0]);
    return res(p, r, "no current context");
}

Outcome c_reg_readonly_memory_with_flag(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4, PROT_READ);
    return res(p, try_reg(p, cl, b, 4 * page_size(), CU_MEMHOSTREGISTER_READ_ONLY), "PROT_READ mapping, CU_MEMHOSTREGISTER_READ_ONLY");
}

Outcome c_reg_get_flags_value(P& p, unsigned flags) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    reg(p, cl, b, 4 * page_size(), flags);
    unsigned got = 0;
    TRY(p.d.cuMemHostGetFlags(&got, b));
    return value(got, "registered with flags " + std::to_string(flags));
}

}  // namespace xmc::probe::recorded
