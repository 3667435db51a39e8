// The probe's cases: each a short call sequence that records one answer of
// the driver and cleans up what it created. See cuda_probe.cpp for how they
// are run and probe_format.h for how the answers are recorded.
#include "probe_cases.h"
#include "probe_support.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
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

namespace {

// ---- the cases -------------------------------------------------------------
// Each returns one Outcome. Set-up calls use TRY; the call under test is
// recorded with res(). Everything created is undone by the Cleanup.


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
    CUresult r = p.d.cuMemHostRegister(b, 16 * page_size(), 0);
    if (r == CUDA_SUCCESS) unreg_later(p, cl, b);
    return res(p, r);
}

Outcome c_reg_double_same_range(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 16);
    reg(p, cl, b, 16 * page_size());
    CUresult r = p.d.cuMemHostRegister(b, 16 * page_size(), 0);
    if (r == CUDA_SUCCESS) unreg_later(p, cl, b);
    return res(p, r);
}

Outcome c_reg_overlap_partial(P& p) {
    Cleanup cl;
    size_t ps = page_size();
    char* b = host_pages(cl, 16);
    reg(p, cl, b, 8 * ps);
    CUresult r = p.d.cuMemHostRegister(b + 4 * ps, 8 * ps, 0);
    if (r == CUDA_SUCCESS) unreg_later(p, cl, b + 4 * ps);
    return res(p, r, "[p,p+8pg) registered, then [p+4pg,p+12pg)");
}

Outcome c_reg_overlap_contained(P& p) {
    Cleanup cl;
    size_t ps = page_size();
    char* b = host_pages(cl, 16);
    reg(p, cl, b, 8 * ps);
    CUresult r = p.d.cuMemHostRegister(b + 2 * ps, 2 * ps, 0);
    if (r == CUDA_SUCCESS) unreg_later(p, cl, b + 2 * ps);
    return res(p, r, "[p,p+8pg) registered, then [p+2pg,p+4pg)");
}

Outcome c_reg_overlap_containing(P& p) {
    Cleanup cl;
    size_t ps = page_size();
    char* b = host_pages(cl, 16);
    reg(p, cl, b + 4 * ps, 2 * ps);
    CUresult r = p.d.cuMemHostRegister(b, 12 * ps, 0);
    if (r == CUDA_SUCCESS) unreg_later(p, cl, b);
    return res(p, r, "[p+4pg,p+6pg) registered, then [p,p+12pg)");
}

Outcome c_reg_adjacent(P& p) {
    Cleanup cl;
    size_t ps = page_size();
    char* b = host_pages(cl, 16);
    reg(p, cl, b, 4 * ps);
    CUresult r = p.d.cuMemHostRegister(b + 4 * ps, 4 * ps, 0);
    if (r == CUDA_SUCCESS) unreg_later(p, cl, b + 4 * ps);
    return res(p, r, "[p,p+4pg) registered, then [p+4pg,p+8pg)");
}

Outcome c_reg_unaligned_address(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    CUresult r = p.d.cuMemHostRegister(b + 8, page_size(), 0);
    if (r == CUDA_SUCCESS) unreg_later(p, cl, b + 8);
    return res(p, r, "p+8, one page");
}

Outcome c_reg_unaligned_size(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    CUresult r = p.d.cuMemHostRegister(b, page_size() + 100, 0);
    if (r == CUDA_SUCCESS) unreg_later(p, cl, b);
    return res(p, r, "page-aligned p, one page + 100 bytes");
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
    CUresult r = p.d.cuMemHostRegister(b, 0, 0);
    if (r == CUDA_SUCCESS) unreg_later(p, cl, b);
    return res(p, r);
}

Outcome c_reg_null(P& p) {
    CUresult r = p.d.cuMemHostRegister(nullptr, page_size(), 0);
    if (r == CUDA_SUCCESS) p.d.cuMemHostUnregister(nullptr);
    return res(p, r);
}

Outcome c_reg_invalid_flags(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 1);
    CUresult r = p.d.cuMemHostRegister(b, page_size(), 0x80);
    if (r == CUDA_SUCCESS) unreg_later(p, cl, b);
    return res(p, r, "flags 0x80");
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
    CUresult r = p.d.cuMemHostRegister(b, 4 * page_size(), 0);
    if (r == CUDA_SUCCESS) unreg_later(p, cl, b);
    return res(p, r, "PROT_READ mapping, flags 0");
}

Outcome c_reg_device_memory(P& p) {
    Cleanup cl;
    CUdeviceptr a = dalloc(p, cl, 1 << 20);
    void* v = reinterpret_cast<void*>(a);
    CUresult r = p.d.cuMemHostRegister(v, 1 << 20, 0);
    if (r == CUDA_SUCCESS) unreg_later(p, cl, v);
    return res(p, r, "a cuMemAlloc pointer");
}

Outcome c_reg_after_unregister(P& p) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    TRY(p.d.cuMemHostRegister(b, 4 * page_size(), 0));
    TRY(p.d.cuMemHostUnregister(b));
    CUresult r = p.d.cuMemHostRegister(b, 4 * page_size(), 0);
    if (r == CUDA_SUCCESS) unreg_later(p, cl, b);
    return res(p, r);
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
Outcome c_reg_get_flags_registered(P& p) { return c_reg_get_flags(p, true, 0, false); }
Outcome c_reg_get_flags_registered_value(P& p) { return c_reg_get_flags(p, true, 0, true); }
Outcome c_reg_get_flags_interior(P& p) { return c_reg_get_flags(p, true, 64, false); }
Outcome c_reg_get_flags_unregistered(P& p) { return c_reg_get_flags(p, false, 0, false); }

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
Outcome c_ptr_attr_device_pointer_registered(P& p) {
    return c_ptr_attr(p, true, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, 0);
}
Outcome c_ptr_attr_device_pointer_registered_identity(P& p) {
    return c_ptr_attr(p, true, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, 2);
}
Outcome c_ptr_attr_memory_type_registered(P& p) {
    return c_ptr_attr(p, true, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 0);
}
Outcome c_ptr_attr_memory_type_registered_value(P& p) {
    return c_ptr_attr(p, true, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 1);
}
Outcome c_ptr_attr_device_pointer_unregistered(P& p) {
    return c_ptr_attr(p, false, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, 0);
}
Outcome c_ptr_attr_memory_type_unregistered(P& p) {
    return c_ptr_attr(p, false, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 0);
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
Outcome c_get_dev_ptr_registered(P& p) { return c_get_dev_ptr(p, true, 0, 0, false); }
Outcome c_get_dev_ptr_identity(P& p) { return c_get_dev_ptr(p, true, 0, 0, true); }
Outcome c_get_dev_ptr_interior(P& p) { return c_get_dev_ptr(p, true, 100, 0, false); }
Outcome c_get_dev_ptr_interior_identity(P& p) { return c_get_dev_ptr(p, true, 100, 0, true); }
Outcome c_get_dev_ptr_unregistered(P& p) { return c_get_dev_ptr(p, false, 0, 0, false); }
Outcome c_get_dev_ptr_nonzero_flags(P& p) { return c_get_dev_ptr(p, true, 0, 1, false); }

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
Outcome c_reg2_get_dev_ptr_other_context_plain(P& p) {
    return c_reg2_get_dev_ptr_other_context(p, CU_MEMHOSTREGISTER_DEVICEMAP);
}
Outcome c_reg2_get_dev_ptr_other_context_portable(P& p) {
    return c_reg2_get_dev_ptr_other_context(p, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
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

// -- driver calls from inside a host callback (cuLaunchHostFunc)
struct CbData {
    P* p = nullptr;
    std::function<CUresult()> call;
    CUresult r = CUDA_ERROR_UNKNOWN;
    std::atomic<bool> ran{false};
};

void CUDA_CB host_fn(void* u) {
    auto* c = static_cast<CbData*>(u);
    c->r = c->call();
    c->ran.store(true);
}

// Runs `call` inside a host callback on a fresh stream and records its result.
Outcome in_callback(P& p, Cleanup& cl, std::function<CUresult()> call) {
    CUstream s = stream(p, cl);
    CbData data;
    data.p = &p;
    data.call = std::move(call);
    TRY(p.d.cuLaunchHostFunc(s, host_fn, &data));
    TRY(p.d.cuStreamSynchronize(s));
    if (!data.ran.load()) return word("NO_RESULT", -1, "callback did not run");
    return res(p, data.r);
}

Outcome c_callback_mem_alloc(P& p) {
    Cleanup cl;
    CUdeviceptr a = 0;
    Outcome o = in_callback(p, cl, [&] { return p.d.cuMemAlloc(&a, 1 << 20); });
    if (a != 0) p.d.cuMemFree(a);
    return o;
}

Outcome c_callback_mem_get_info(P& p) {
    Cleanup cl;
    size_t f = 0, t = 0;
    return in_callback(p, cl, [&] { return p.d.cuMemGetInfo(&f, &t); });
}

Outcome c_callback_event_record_other_stream(P& p) {
    Cleanup cl;
    CUstream other = stream(p, cl);
    CUevent e = event(p, cl);
    return in_callback(p, cl, [&] { return p.d.cuEventRecord(e, other); });
}

Outcome c_callback_stream_query_other_stream(P& p) {
    Cleanup cl;
    CUstream other = stream(p, cl);
    return in_callback(p, cl, [&] { return p.d.cuStreamQuery(other); });
}

Outcome c_callback_ctx_get_current(P& p) {
    Cleanup cl;
    CUcontext c = nullptr;
    return in_callback(p, cl, [&] { return p.d.cuCtxGetCurrent(&c); });
}

Outcome c_callback_mem_unmap(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    CUmemGenericAllocationHandle h = create(p, cl, g);
    TRY(p.d.cuMemMap(va, g, 0, h, 0));
    grant(p, va, g);
    Outcome o = in_callback(p, cl, [&] { return p.d.cuMemUnmap(va, g); });
    if (o.code != CUDA_SUCCESS) p.d.cuMemUnmap(va, g);
    return o;
}

// -- VMM
Outcome c_vmm_granularity(P& p, CUmemAllocationGranularity_flags which) {
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    size_t g = 0;
    TRY(p.d.cuMemGetAllocationGranularity(&g, &prop, which));
    return value(static_cast<int64_t>(g), "bytes");
}
Outcome c_vmm_granularity_minimum(P& p) { return c_vmm_granularity(p, CU_MEM_ALLOC_GRANULARITY_MINIMUM); }
Outcome c_vmm_granularity_recommended(P& p) {
    return c_vmm_granularity(p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
}

Outcome c_vmm_basic_cycle(P& p) {
    // reserve, create, map, grant, use (memset + copy back), unmap, release, free
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    CUmemGenericAllocationHandle h = create(p, cl, g);
    map(p, cl, va, g, h);
    grant(p, va, g);
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
Outcome c_vmm_map_unaligned_offset(P& p) { return c_vmm_map_unaligned(p, 0); }
Outcome c_vmm_map_unaligned_size(P& p) { return c_vmm_map_unaligned(p, 1); }
Outcome c_vmm_map_unaligned_address(P& p) { return c_vmm_map_unaligned(p, 2); }

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
    CUdeviceptr va = reserve(p, cl, g);
    CUmemGenericAllocationHandle h = create(p, cl, g);
    TRY(p.d.cuMemMap(va, g, 0, h, 0));
    grant(p, va, g);
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
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    CUmemGenericAllocationHandle h = 0;
    TRY(p.d.cuMemCreate(&h, g, &prop, 0));
    CUresult m = p.d.cuMemMap(va, g, 0, h, 0);
    if (m != CUDA_SUCCESS) {
        p.d.cuMemRelease(h);
        throw SetupFailed{m, "cuMemMap"};
    }
    Driver* d = &p.d;
    cl.add([d, va, g] { d->cuMemUnmap(va, g); });
    CUresult r = p.d.cuMemRelease(h);
    if (r != CUDA_SUCCESS) cl.add([d, h] { d->cuMemRelease(h); });  // runs after the unmap
    return res(p, r, "release of a handle that is still mapped");
}

Outcome c_vmm_release_while_mapped_still_usable(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    CUmemGenericAllocationHandle h = 0;
    TRY(p.d.cuMemCreate(&h, g, &prop, 0));
    CUresult m = p.d.cuMemMap(va, g, 0, h, 0);
    if (m != CUDA_SUCCESS) {
        p.d.cuMemRelease(h);
        throw SetupFailed{m, "cuMemMap"};
    }
    Driver* d = &p.d;
    cl.add([d, va, g] { d->cuMemUnmap(va, g); });
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

// -- memory, streams, events, copies
Outcome c_mem_alloc_zero(P& p) {
    CUdeviceptr a = 0;
    CUresult r = p.d.cuMemAlloc(&a, 0);
    if (r == CUDA_SUCCESS && a != 0) p.d.cuMemFree(a);
    return res(p, r);
}

Outcome c_mem_free_interior(P& p) {
    Cleanup cl;
    CUdeviceptr a = dalloc(p, cl, 1 << 20);
    return res(p, p.d.cuMemFree(a + 4096));
}

Outcome c_mem_free_twice(P& p) {
    CUdeviceptr a = 0;
    TRY(p.d.cuMemAlloc(&a, 1 << 20));
    TRY(p.d.cuMemFree(a));
    return res(p, p.d.cuMemFree(a));
}

Outcome c_mem_free_null(P& p) { return res(p, p.d.cuMemFree(0)); }

Outcome c_event_query_unrecorded(P& p) {
    Cleanup cl;
    return res(p, p.d.cuEventQuery(event(p, cl)));
}

Outcome c_event_synchronize_unrecorded(P& p) {
    Cleanup cl;
    return res(p, p.d.cuEventSynchronize(event(p, cl)));
}

Outcome c_event_elapsed_unrecorded(P& p) {
    Cleanup cl;
    CUevent a = event(p, cl), b = event(p, cl);
    float ms = 0;
    return res(p, p.d.cuEventElapsedTime(&ms, a, b));
}

Outcome c_event_elapsed_disable_timing(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUevent a = event(p, cl, CU_EVENT_DISABLE_TIMING), b = event(p, cl, CU_EVENT_DISABLE_TIMING);
    TRY(p.d.cuEventRecord(a, s));
    TRY(p.d.cuEventRecord(b, s));
    TRY(p.d.cuStreamSynchronize(s));
    float ms = 0;
    return res(p, p.d.cuEventElapsedTime(&ms, a, b));
}

Outcome c_stream_wait_event_unrecorded(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUevent e = event(p, cl);
    CUresult r = p.d.cuStreamWaitEvent(s, e, 0);
    TRY(p.d.cuStreamSynchronize(s));
    return res(p, r);
}

Outcome c_copy_2d_pitch_smaller_than_width(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 1 << 16);
    std::vector<char> host(1 << 16, 0);
    CUDA_MEMCPY2D c;
    std::memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host.data();
    c.srcPitch = 64;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = a;
    c.dstPitch = 256;
    c.WidthInBytes = 128;
    c.Height = 4;
    CUresult r = p.d.cuMemcpy2DAsync(&c, s);
    TRY(p.d.cuStreamSynchronize(s));
    return res(p, r, "srcPitch 64 < WidthInBytes 128");
}

Outcome c_copy_htod_to_host_pointer(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    char* b = host_pages(cl, 4);
    std::vector<char> src(4096, 1);
    CUresult r = p.d.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(b), src.data(), src.size(), s);
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, "destination is unregistered host memory; stream sync " + result_name(p.d, sr));
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
Outcome c_no_ctx_register(P& p) { return c_no_ctx(p, 0); }
Outcome c_no_ctx_mem_alloc(P& p) { return c_no_ctx(p, 1); }
Outcome c_no_ctx_mem_get_info(P& p) { return c_no_ctx(p, 2); }
Outcome c_no_ctx_stream_create(P& p) { return c_no_ctx(p, 3); }

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
    CUresult r = p.d.cuMemHostRegister(b, 4 * page_size(), CU_MEMHOSTREGISTER_READ_ONLY);
    if (r == CUDA_SUCCESS) unreg_later(p, cl, b);
    return res(p, r, "PROT_READ mapping, CU_MEMHOSTREGISTER_READ_ONLY");
}

Outcome c_reg_get_flags_value(P& p, unsigned flags) {
    Cleanup cl;
    char* b = host_pages(cl, 4);
    reg(p, cl, b, 4 * page_size(), flags);
    unsigned got = 0;
    TRY(p.d.cuMemHostGetFlags(&got, b));
    return value(got, "registered with flags " + std::to_string(flags));
}
Outcome c_reg_get_flags_plain_value(P& p) { return c_reg_get_flags_value(p, 0); }
Outcome c_reg_get_flags_portable_value(P& p) {
    return c_reg_get_flags_value(p, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
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
Outcome c_vmm_get_access_granted_value(P& p) { return c_vmm_get_access_value(p, true); }
Outcome c_vmm_get_access_not_granted_value(P& p) { return c_vmm_get_access_value(p, false); }

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
Outcome c_vmm_memset_unmapped_enqueue(P& p) { return c_vmm_device_work(p, 0, false, false); }
Outcome c_vmm_memset_unmapped_sync(P& p) { return c_vmm_device_work(p, 0, true, false); }
Outcome c_vmm_memset_no_access_enqueue(P& p) { return c_vmm_device_work(p, 1, false, false); }
Outcome c_vmm_memset_no_access_sync(P& p) { return c_vmm_device_work(p, 1, true, false); }
Outcome c_vmm_htod_after_unmap_enqueue(P& p) { return c_vmm_device_work(p, 2, false, true); }
Outcome c_vmm_htod_after_unmap_sync(P& p) { return c_vmm_device_work(p, 2, true, true); }

Outcome c_copy_zero_bytes(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 4096);
    char h[16] = {0};
    return res(p, p.d.cuMemcpyHtoDAsync(a, h, 0, s));
}

Outcome c_memset_past_allocation_end(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 4096);
    CUresult r = p.d.cuMemsetD8Async(a, 0, 4097, s);
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, "4097 bytes into a 4096-byte allocation; stream sync " + result_name(p.d, sr));
}

Outcome c_stream_destroy_twice(P& p) {
    CUstream s = nullptr;
    TRY(p.d.cuStreamCreate(&s, 0));
    TRY(p.d.cuStreamDestroy(s));
    return res(p, p.d.cuStreamDestroy(s), "a destroyed handle: may crash a real driver");
}

Outcome c_event_record_other_context(P& p) {
    Cleanup cl;
    CUevent e = event(p, cl);  // device 0's context
    TRY(p.d.cuCtxSetCurrent(p.ctx[1]));
    CUstream s = nullptr;
    CUresult cr = p.d.cuStreamCreate(&s, 0);
    TRY(p.d.cuCtxSetCurrent(p.ctx[0]));
    if (cr != CUDA_SUCCESS) throw SetupFailed{cr, "cuStreamCreate(device 1)"};
    Driver* d = &p.d;
    cl.add([d, s] { d->cuStreamSynchronize(s); d->cuStreamDestroy(s); });
    return res(p, p.d.cuEventRecord(e, s), "event of device 0's context, stream of device 1's");
}

Outcome c_stream_wait_event_other_context(P& p) {
    Cleanup cl;
    CUevent e = event(p, cl);
    CUstream s0 = stream(p, cl);
    TRY(p.d.cuEventRecord(e, s0));
    TRY(p.d.cuCtxSetCurrent(p.ctx[1]));
    CUstream s = nullptr;
    CUresult cr = p.d.cuStreamCreate(&s, 0);
    TRY(p.d.cuCtxSetCurrent(p.ctx[0]));
    if (cr != CUDA_SUCCESS) throw SetupFailed{cr, "cuStreamCreate(device 1)"};
    Driver* d = &p.d;
    cl.add([d, s] { d->cuStreamSynchronize(s); d->cuStreamDestroy(s); });
    return res(p, p.d.cuStreamWaitEvent(s, e, 0), "event of device 0's context, stream of device 1's");
}

Outcome c_copy_dtod_between_devices(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a0 = dalloc(p, cl, 1 << 16);
    TRY(p.d.cuCtxSetCurrent(p.ctx[1]));
    CUdeviceptr a1 = 0;
    CUresult ar = p.d.cuMemAlloc(&a1, 1 << 16);
    TRY(p.d.cuCtxSetCurrent(p.ctx[0]));
    if (ar != CUDA_SUCCESS) throw SetupFailed{ar, "cuMemAlloc(device 1)"};
    Driver* d = &p.d;
    cl.add([d, p_ctx = p.ctx[1], a1] {
        d->cuCtxPushCurrent(p_ctx);
        d->cuMemFree(a1);
        CUcontext x = nullptr;
        d->cuCtxPopCurrent(&x);
    });
    CUresult r = p.d.cuMemcpyDtoDAsync(a1, a0, 1 << 16, s);
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, "device 0 to device 1 on a device-0 stream, no peer access; sync " + result_name(p.d, sr));
}

}  // namespace

// ---- the case table ----------------------------------------------------------

namespace {

// The cases of the first two recordings, in their order.
std::vector<Case> recorded_cases() {
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
        {"reg_get_flags_registered", Setup::ctx, c_reg_get_flags_registered,
         "cuMemHostGetFlags of a registered base", nullptr},
        {"reg_get_flags_registered_value", Setup::ctx, c_reg_get_flags_registered_value,
         "the flags cuMemHostGetFlags reports for a DEVICEMAP registration", nullptr},
        {"reg_get_flags_interior", Setup::ctx, c_reg_get_flags_interior,
         "cuMemHostGetFlags of a registered interior address", nullptr},
        {"reg_get_flags_unregistered", Setup::ctx, c_reg_get_flags_unregistered,
         "cuMemHostGetFlags of unregistered memory", nullptr},
        {"ptr_attr_device_pointer_registered", Setup::ctx, c_ptr_attr_device_pointer_registered,
         "CU_POINTER_ATTRIBUTE_DEVICE_POINTER of registered memory", nullptr},
        {"ptr_attr_device_pointer_registered_identity", Setup::ctx,
         c_ptr_attr_device_pointer_registered_identity,
         "is that device pointer the host pointer", nullptr},
        {"ptr_attr_memory_type_registered", Setup::ctx, c_ptr_attr_memory_type_registered,
         "CU_POINTER_ATTRIBUTE_MEMORY_TYPE of registered memory", nullptr},
        {"ptr_attr_memory_type_registered_value", Setup::ctx, c_ptr_attr_memory_type_registered_value,
         "the memory type of registered memory", nullptr},
        {"ptr_attr_device_pointer_unregistered", Setup::ctx, c_ptr_attr_device_pointer_unregistered,
         "CU_POINTER_ATTRIBUTE_DEVICE_POINTER of unregistered memory", nullptr},
        {"ptr_attr_memory_type_unregistered", Setup::ctx, c_ptr_attr_memory_type_unregistered,
         "CU_POINTER_ATTRIBUTE_MEMORY_TYPE of unregistered memory", nullptr},
        {"ptr_attr_memory_type_device_value", Setup::ctx, c_ptr_attr_memory_type_device_value,
         "the memory type of cuMemAlloc memory", nullptr},
        {"host_get_device_pointer_registered", Setup::ctx, c_get_dev_ptr_registered,
         "cuMemHostGetDevicePointer of a registered base", nullptr},
        {"host_get_device_pointer_identity", Setup::ctx, c_get_dev_ptr_identity,
         "is that device pointer the host pointer", nullptr},
        {"host_get_device_pointer_interior", Setup::ctx, c_get_dev_ptr_interior,
         "cuMemHostGetDevicePointer of a registered interior address", nullptr},
        {"host_get_device_pointer_interior_identity", Setup::ctx, c_get_dev_ptr_interior_identity,
         "is the interior device pointer the host pointer", nullptr},
        {"host_get_device_pointer_unregistered", Setup::ctx, c_get_dev_ptr_unregistered,
         "cuMemHostGetDevicePointer of unregistered memory", nullptr},
        {"host_get_device_pointer_nonzero_flags", Setup::ctx, c_get_dev_ptr_nonzero_flags,
         "cuMemHostGetDevicePointer with flags 1", nullptr},
        {"reg2_same_range_other_context", Setup::ctx2, c_reg2_same_range_other_context,
         "register in device 0's context, then the same range in device 1's", nullptr},
        {"reg2_get_device_pointer_other_context", Setup::ctx2, c_reg2_get_dev_ptr_other_context_plain,
         "device pointer of a non-portable registration asked in another device's context", nullptr},
        {"reg2_get_device_pointer_other_context_portable", Setup::ctx2,
         c_reg2_get_dev_ptr_other_context_portable,
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

        {"vmm_granularity_minimum", Setup::ctx, c_vmm_granularity_minimum,
         "minimum allocation granularity of device 0", nullptr},
        {"vmm_granularity_recommended", Setup::ctx, c_vmm_granularity_recommended,
         "recommended allocation granularity of device 0", nullptr},
        {"vmm_basic_cycle", Setup::ctx, c_vmm_basic_cycle,
         "reserve, create, map, set access, memset, copy back, unmap, release, free", nullptr},
        {"vmm_reserve_unaligned_size", Setup::ctx, c_vmm_reserve_unaligned_size,
         "cuMemAddressReserve of a size that is not a granularity multiple", nullptr},
        {"vmm_create_unaligned_size", Setup::ctx, c_vmm_create_unaligned_size,
         "cuMemCreate of a size that is not a granularity multiple", nullptr},
        {"vmm_create_invalid_device", Setup::ctx, c_vmm_create_invalid_device,
         "cuMemCreate on a device that does not exist", nullptr},
        {"vmm_map_unaligned_offset", Setup::ctx, c_vmm_map_unaligned_offset,
         "cuMemMap with an unaligned offset", nullptr},
        {"vmm_map_unaligned_size", Setup::ctx, c_vmm_map_unaligned_size, "cuMemMap with an unaligned size",
         nullptr},
        {"vmm_map_unaligned_address", Setup::ctx, c_vmm_map_unaligned_address,
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
        {"no_ctx_register", Setup::ctx, c_no_ctx_register, "cuMemHostRegister with no current context",
         nullptr},
        {"no_ctx_mem_alloc", Setup::ctx, c_no_ctx_mem_alloc, "cuMemAlloc with no current context", nullptr},
        {"no_ctx_mem_get_info", Setup::ctx, c_no_ctx_mem_get_info, "cuMemGetInfo with no current context",
         nullptr},
        {"no_ctx_stream_create", Setup::ctx, c_no_ctx_stream_create, "cuStreamCreate with no current context",
         nullptr},
        {"no_ctx_host_get_device_pointer", Setup::ctx, c_no_ctx_get_device_pointer,
         "cuMemHostGetDevicePointer with no current context", nullptr},
        {"reg_readonly_memory_with_flag", Setup::ctx, c_reg_readonly_memory_with_flag,
         "register PROT_READ memory with CU_MEMHOSTREGISTER_READ_ONLY", nullptr},
        {"reg_get_flags_plain_value", Setup::ctx, c_reg_get_flags_plain_value,
         "the flags cuMemHostGetFlags reports for a flags-0 registration", nullptr},
        {"reg_get_flags_portable_value", Setup::ctx, c_reg_get_flags_portable_value,
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
        {"vmm_get_access_granted_value", Setup::ctx, c_vmm_get_access_granted_value,
         "cuMemGetAccess after READWRITE was set", nullptr},
        {"vmm_get_access_not_granted_value", Setup::ctx, c_vmm_get_access_not_granted_value,
         "cuMemGetAccess of a mapping whose access was never set", nullptr},
        {"vmm_get_access_unmapped", Setup::ctx, c_vmm_get_access_unmapped,
         "cuMemGetAccess of a reserved, unmapped address", nullptr},
        {"vmm_memset_unmapped_enqueue", Setup::ctx, c_vmm_memset_unmapped_enqueue,
         "cuMemsetD8Async into a reserved, never mapped range", nullptr},
        {"vmm_memset_unmapped_sync", Setup::ctx, c_vmm_memset_unmapped_sync,
         "then cuStreamSynchronize", nullptr},
        {"vmm_memset_no_access_enqueue", Setup::ctx, c_vmm_memset_no_access_enqueue,
         "cuMemsetD8Async into a mapping without access", nullptr},
        {"vmm_memset_no_access_sync", Setup::ctx, c_vmm_memset_no_access_sync, "then cuStreamSynchronize",
         nullptr},
        {"vmm_htod_after_unmap_enqueue", Setup::ctx, c_vmm_htod_after_unmap_enqueue,
         "cuMemcpyHtoDAsync into a range unmapped after use", nullptr},
        {"vmm_htod_after_unmap_sync", Setup::ctx, c_vmm_htod_after_unmap_sync, "then cuStreamSynchronize",
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
