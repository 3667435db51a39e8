// The PyTorch adapter: qualifies the pinned memory PyTorch users already run,
// the allocator behind tensor.pin_memory() and pin_memory=True, through the
// xmc ABI. Capabilities pin, pin_refs, pin_driver and pin_cache; no device
// to register with (pin_register is not declared: a device is refused as
// unsupported). Thin: everything below is PyTorch's, except what this list
// names.
//
//   allocate   at::getHostAllocator(at::kCUDA)->allocate(bytes): PyTorch's
//              CachingHostAllocator. It pins with cudaHostAlloc, or with
//              malloc + cudaHostRegister when PYTORCH_CUDA_ALLOC_CONF holds
//              pinned_use_cuda_host_register:True; both are pages pinned by
//              the driver (pin_driver).
//   free       dropping the DataPtr, whose deleter hands the block back to
//              the allocator's free list (pin_cache: pooled, still pinned).
//   release    ->empty_cache() (pin_pool_release).
//   pooled     ->get_stats(): the blocks and bytes the allocator holds less
//              those it counts handed out: allocations - active_requests and
//              allocated_bytes - active_bytes (PyTorch 2.9 on), or
//              segment - allocation and reserved_bytes - allocated_bytes
//              (before): what its free list keeps, as PyTorch counts it.
//   query      this adapter's table of the blocks it handed out and not yet
//              freed gives the owning base and size (PyTorch answers no such
//              question); the CUDA driver (cuMemHostGetFlags, device 0's
//              primary context current) then says whether the range is
//              page-locked, and a range it does not hold is not pinned.
//   refs       counted here (pin_ref/pin_unref); the DataPtr goes with the
//              last reference, as with pin_free.
//   size       the block's size is what the allocator pins for the request:
//              the bytes asked rounded up to a power of two (its
//              CachingHostAllocatorImpl::allocate rounds with
//              c10::llvm::PowerOf2Ceil and pins that much), so that the
//              suite's lock checks see every byte the block holds pinned;
//              bytes_now sums these sizes. (Above 2^63, where that rounding
//              wraps, the bytes asked.)
//   alignment  the allocator takes none, and documents none beyond malloc's:
//              pin_min_alignment is alignof(std::max_align_t), and a larger
//              alignment is refused as an invalid argument, never weakened.
//   arguments  checked here before PyTorch sees them, by the ABI's rules: a
//              NULL result, size 0, an alignment that is no power of two or
//              above the minimum, a size that overflows when rounded up to a
//              page (invalid argument). Every other size goes to PyTorch as
//              it is: a size PyTorch refuses, or mishandles, is its own.
//   errors     a c10::Error from PyTorch is refused out_of_memory when it is
//              a c10::OutOfMemoryError, carries cudaErrorMemoryAllocation
//              or its message says out of memory, driver_error otherwise,
//              with PyTorch's message. The native code is the cudaError_t a
//              c10::AcceleratorError carries (what C10_CUDA_CHECK throws,
//              where torch has it: XMC_TORCH_HAS_ACCELERATOR_ERROR), else 0.
//   close      the last open instance drops every block still handed out,
//              then empties the allocator's cache (PIN-CLOSE), and reports
//              how many blocks it dropped.
//   devices    from the CUDA driver (cuDeviceGetCount, cuDeviceGetUuid,
//              cuDeviceGetName, cuDeviceTotalMem), loaded as libcuda.so.1,
//              or $XMC_CUDA_DRIVER as the CUDA backend and the suite load it
//              (PyTorch itself always uses libcuda.so.1).
//   name       "pytorch", or "pytorch_host_register" in the cudaHostRegister
//              mode (a package and a waiver say which mode they are about).
//
// The allocator's own failures stay failures: this adapter neither retries
// nor filters them (hardware/waivers-pytorch.tsv names the known ones).
#include <xmc/backend.h>

#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/DeviceType.h>
#include <c10/util/Exception.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

struct xmc_instance {
    uint64_t id;
};

namespace {

// ---- errors -----------------------------------------------------------------

thread_local std::map<uint64_t, xmc_error_info> last_errors;  // per thread, per instance

xmc_status fail(xmc_instance *inst, xmc_status st, int64_t native, const char *call, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
xmc_status fail(xmc_instance *inst, xmc_status st, int64_t native, const char *call, const char *fmt, ...) {
    xmc_error_info e{};
    e.status = st;
    e.native_code = native;
    std::snprintf(e.call, sizeof e.call, "%s", call);
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    if (inst) last_errors[inst->id] = e;
    return st;
}

// ---- the CUDA driver: devices, and the lock state a query reports -----------

struct Driver {
    int (*init)(unsigned) = nullptr;
    int (*count)(int *) = nullptr;
    int (*get)(int *, int) = nullptr;
    int (*uuid)(unsigned char *, int) = nullptr;
    int (*name)(char *, int, int) = nullptr;
    int (*total)(size_t *, int) = nullptr;
    int (*retain)(void **, int) = nullptr;
    int (*release)(int) = nullptr;
    int (*push)(void *) = nullptr;
    int (*pop)(void **) = nullptr;
    int (*host_flags)(unsigned *, void *) = nullptr;
    std::string why;  // "" when usable

    static Driver &get_driver() {
        static Driver d = [] {
            Driver r;
            const char *env = std::getenv("XMC_CUDA_DRIVER");
            const std::string lib = env && *env ? env : "libcuda.so.1";
            void *h = dlopen(lib.c_str(), RTLD_NOW);
            if (!h) {
                r.why = lib + " cannot be loaded: " + dlerror();
                return r;
            }
            auto sym = [h](const char *a, const char *b) {
                void *f = dlsym(h, a);
                return f ? f : dlsym(h, b);
            };
            r.init = reinterpret_cast<int (*)(unsigned)>(sym("cuInit", "cuInit"));
            r.count = reinterpret_cast<int (*)(int *)>(sym("cuDeviceGetCount", "cuDeviceGetCount"));
            r.get = reinterpret_cast<int (*)(int *, int)>(sym("cuDeviceGet", "cuDeviceGet"));
            r.uuid = reinterpret_cast<int (*)(unsigned char *, int)>(sym("cuDeviceGetUuid_v2", "cuDeviceGetUuid"));
            r.name = reinterpret_cast<int (*)(char *, int, int)>(sym("cuDeviceGetName", "cuDeviceGetName"));
            r.total = reinterpret_cast<int (*)(size_t *, int)>(sym("cuDeviceTotalMem_v2", "cuDeviceTotalMem"));
            r.retain = reinterpret_cast<int (*)(void **, int)>(sym("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain"));
            r.release = reinterpret_cast<int (*)(int)>(sym("cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"));
            r.push = reinterpret_cast<int (*)(void *)>(sym("cuCtxPushCurrent_v2", "cuCtxPushCurrent"));
            r.pop = reinterpret_cast<int (*)(void **)>(sym("cuCtxPopCurrent_v2", "cuCtxPopCurrent"));
            r.host_flags = reinterpret_cast<int (*)(unsigned *, void *)>(sym("cuMemHostGetFlags", "cuMemHostGetFlags"));
            if (!r.init || !r.count || !r.get || !r.uuid || !r.name || !r.total || !r.retain || !r.release || !r.push ||
                !r.pop || !r.host_flags)
                r.why = lib + " lacks an entry point the adapter needs";
            else if (int rc = r.init(0); rc != 0)
                r.why = "cuInit failed with " + std::to_string(rc);
            return r;
        }();
        return d;
    }
    // Whether the driver holds the first and the last byte of [p, p+n) page-locked.
    bool page_locked(const void *p, size_t n) const {
        if (!why.empty()) return false;
        int dev = 0;
        void *ctx = nullptr, *popped = nullptr;
        if (get(&dev, 0) != 0 || retain(&ctx, dev) != 0) return false;
        bool held = false;
        if (push(ctx) == 0) {
            unsigned flags = 0;
            const char *b = static_cast<const char *>(p);
            held = host_flags(&flags, const_cast<char *>(b)) == 0 &&
                   host_flags(&flags, const_cast<char *>(b + (n ? n : 1) - 1)) == 0;
            pop(&popped);
        }
        release(dev);
        return held;
    }
};

// ---- the blocks handed out --------------------------------------------------

struct Block {
    c10::DataPtr data;  // dropped: the block goes back to PyTorch's free list
    size_t size = 0;    // the bytes asked for
    uint32_t refs = 0;  // pin_ref's
    bool owner = true;
};

struct State {
    std::mutex mu;
    std::map<uintptr_t, Block> live;
    uint64_t bytes_now = 0, bytes_peak = 0;
    std::set<const xmc_instance *> instances;
    uint64_t next_id = 1;
};
State &state() {
    static State *s = new State;  // outlives static destructors: a close at exit still finds it
    return *s;
}

bool host_register_mode() {
    const char *conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
    return conf && std::strstr(conf, "pinned_use_cuda_host_register:True") != nullptr;
}

at::HostAllocator *allocator(xmc_instance *inst, const char *call, xmc_status *st) {
    try {
        at::HostAllocator *a = at::getHostAllocator(c10::DeviceType::CUDA);
        if (a) return a;
        *st = fail(inst, XMC_ERR_UNSUPPORTED, 0, call, "%s: PyTorch has no host allocator for CUDA", call);
    } catch (const c10::Error &e) {
        *st = fail(inst, XMC_ERR_UNSUPPORTED, 0, call, "%s: at::getHostAllocator(kCUDA) threw: %s", call,
                   e.what_without_backtrace());
    }
    return nullptr;
}

// What PyTorch's allocator pins for `bytes`: the next power of two (its
// PowerOf2Ceil), or `bytes` where that does not fit in a size_t.
size_t pinned_size(size_t bytes) {
    if (bytes > (SIZE_MAX >> 1) + 1) return bytes;
    size_t p = 1;
    while (p < bytes) p <<= 1;
    return p;
}

std::map<uintptr_t, Block>::iterator containing(State &s, uintptr_t a) {
    auto it = s.live.upper_bound(a);
    if (it == s.live.begin()) return s.live.end();
    --it;
    return a - it->first < it->second.size ? it : s.live.end();
}

bool live_instance(const xmc_instance *inst) {
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    return s.instances.count(inst) != 0;
}

#define XMC_PT_GUARD(inst)                                    \
    do {                                                      \
        if (!live_instance(inst)) return XMC_ERR_INVALID_HANDLE; \
    } while (0)

// ---- always -------------------------------------------------------------------

xmc_status open(const xmc_open_params *params, xmc_instance **out) {
    if (!out) return XMC_ERR_INVALID_ARGUMENT;
    if (params && params->struct_size < offsetof(xmc_open_params, options) + sizeof params->options)
        return XMC_ERR_INVALID_ARGUMENT;
    if (params && params->options && params->options[0]) return XMC_ERR_INVALID_ARGUMENT;  // it has none
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    auto *inst = new xmc_instance{s.next_id++};
    s.instances.insert(inst);
    *out = inst;
    return XMC_OK;
}

xmc_status close_report(xmc_instance *inst, xmc_close_report *out) {
    State &s = state();
    xmc_close_report r{};
    {
        std::lock_guard<std::mutex> lock(s.mu);
        if (!s.instances.erase(inst)) return XMC_ERR_INVALID_HANDLE;
        delete inst;
        if (s.instances.empty()) {
            r.last_instance = 1;
            r.pinned_blocks = s.live.size();
            r.pinned_bytes = s.bytes_now;
            s.live.clear();  // every DataPtr dropped: the blocks go to the free list
            s.bytes_now = 0;
        }
    }
    if (r.last_instance) {
        xmc_status st = XMC_OK;
        if (at::HostAllocator *a = allocator(nullptr, "close", &st)) {
            try {
                a->empty_cache();
            } catch (const c10::Error &) {
                return XMC_ERR_DRIVER;  // no instance is left to record the detail on
            }
        }
    }
    if (out) *out = r;
    return XMC_OK;
}

xmc_status close(xmc_instance *inst) { return close_report(inst, nullptr); }

xmc_status device_count(xmc_instance *inst, int32_t *n) {
    XMC_PT_GUARD(inst);
    if (!n) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "device_count", "device_count: NULL result");
    const Driver &d = Driver::get_driver();
    int c = 0;
    *n = d.why.empty() && d.count(&c) == 0 ? c : 0;
    return XMC_OK;
}

xmc_status device_info(xmc_instance *inst, int32_t index, xmc_device_info *out) {
    XMC_PT_GUARD(inst);
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "device_info", "device_info: NULL result");
    const Driver &d = Driver::get_driver();
    int count = 0, dev = 0;
    if (!d.why.empty() || d.count(&count) != 0 || index < 0 || index >= count || d.get(&dev, index) != 0)
        return fail(inst, XMC_ERR_NO_DEVICE, 0, "device_info", "device_info: no device %d (%s)", index,
                    d.why.empty() ? "out of range" : d.why.c_str());
    *out = xmc_device_info{};
    out->index = index;
    d.uuid(out->uuid, dev);
    d.name(out->name, sizeof out->name, dev);
    size_t total = 0;
    d.total(&total, dev);
    out->total_memory = total;
    return XMC_OK;
}

void last_error(xmc_instance *inst, xmc_error_info *out) {
    if (!out) return;
    *out = xmc_error_info{};
    if (!live_instance(inst)) return;
    auto it = last_errors.find(inst->id);
    if (it != last_errors.end()) *out = it->second;
}

const char *status_name(xmc_status s) { return xmc_status_string(s); }

size_t pin_min_alignment(xmc_instance *) { return alignof(std::max_align_t); }

// ---- pin ----------------------------------------------------------------------

xmc_status pin_alloc(xmc_instance *inst, size_t bytes, size_t alignment, int32_t device, xmc_pin_result *out) {
    XMC_PT_GUARD(inst);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc", "pin_alloc: result pointer is NULL");
    if (device != XMC_NO_DEVICE)
        return fail(inst, XMC_ERR_UNSUPPORTED, 0, "pin_alloc",
                    "pin_alloc: PyTorch's pinned allocator registers with no device (pin_register not declared)");
    if (bytes == 0) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc", "pin_alloc: size is 0");
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc", "pin_alloc: alignment %zu is not a power of two",
                    alignment);
    if (alignment > alignof(std::max_align_t))
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc",
                    "pin_alloc: alignment %zu cannot be honoured: PyTorch's pinned allocator takes none and "
                    "guarantees %zu",
                    alignment, alignof(std::max_align_t));
    if (bytes > SIZE_MAX - page)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc",
                    "pin_alloc: size %zu overflows when rounded up to a page", bytes);
    xmc_status st = XMC_OK;
    at::HostAllocator *a = allocator(inst, "pin_alloc", &st);
    if (!a) return st;
    c10::DataPtr data;
    try {
        data = a->allocate(bytes);
    } catch (const c10::Error &e) {
        const char *msg = e.what_without_backtrace();
        int64_t native = 0;
#if XMC_TORCH_HAS_ACCELERATOR_ERROR
        if (const auto *acc = dynamic_cast<const c10::AcceleratorError *>(&e)) native = acc->get_error_code();
#endif
        constexpr int64_t kCudaErrorMemoryAllocation = 2;
        const bool oom = dynamic_cast<const c10::OutOfMemoryError *>(&e) != nullptr ||
                         native == kCudaErrorMemoryAllocation || std::strstr(msg, "out of memory") != nullptr;
        return fail(inst, oom ? XMC_ERR_OUT_OF_MEMORY : XMC_ERR_DRIVER, native, "pin_alloc",
                    "pin_alloc: at::getHostAllocator(kCUDA)->allocate(%zu) threw: %.300s", bytes, msg);
    }
    if (!data.get())
        return fail(inst, XMC_ERR_OUT_OF_MEMORY, 0, "pin_alloc",
                    "pin_alloc: at::getHostAllocator(kCUDA)->allocate(%zu) returned no memory", bytes);
    const auto base = reinterpret_cast<uintptr_t>(data.get());
    const size_t size = pinned_size(bytes);
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    // A base already handed out means PyTorch gave one block to two owners:
    // reported as it is (the suite's PIN-POOL check sees the two), the
    // earlier owner's entry kept.
    auto [it, fresh] = s.live.try_emplace(base);
    if (fresh) {
        it->second.data = std::move(data);
        it->second.size = size;
        s.bytes_now += size;
        if (s.bytes_now > s.bytes_peak) s.bytes_peak = s.bytes_now;
    } else {
        data.release_context();  // PyTorch's block is the earlier owner's; never freed twice from here
    }
    *out = xmc_pin_result{};
    out->base = reinterpret_cast<void *>(base);
    out->size = fresh ? size : it->second.size;
    return XMC_OK;
}

xmc_status pin_free(xmc_instance *inst, void *base) {
    XMC_PT_GUARD(inst);
    State &s = state();
    c10::DataPtr dropped;  // dropped after the lock: PyTorch takes its own locks
    {
        std::lock_guard<std::mutex> lock(s.mu);
        const auto a = reinterpret_cast<uintptr_t>(base);
        auto it = containing(s, a);
        if (it == s.live.end() || it->first != a || !it->second.owner) {
            const char *why = it == s.live.end() ? "is not inside any block handed out"
                              : it->first != a   ? "is interior to a block"
                                                 : "was already freed (references still held)";
            return fail(inst, XMC_ERR_NOT_PINNED_BASE, 0, "pin_free", "pin_free: address %p %s", base, why);
        }
        if (it->second.refs > 0) {
            it->second.owner = false;
            return XMC_OK;
        }
        dropped = std::move(it->second.data);
        s.bytes_now -= it->second.size;
        s.live.erase(it);
    }
    return XMC_OK;
}

xmc_status pin_query(xmc_instance *inst, const void *addr, size_t len, xmc_pin_info *out) {
    XMC_PT_GUARD(inst);
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_query", "pin_query: result pointer is NULL");
    *out = xmc_pin_info{};
    const auto a = reinterpret_cast<uintptr_t>(addr);
    const size_t n = len == 0 ? 1 : len;
    if (a > UINTPTR_MAX - n) return XMC_OK;
    uintptr_t base = 0;
    size_t size = 0;
    {
        State &s = state();
        std::lock_guard<std::mutex> lock(s.mu);
        auto it = containing(s, a);
        if (it == s.live.end() || a + n > it->first + it->second.size) return XMC_OK;
        base = it->first;
        size = it->second.size;
    }
    if (!Driver::get_driver().page_locked(addr, n)) return XMC_OK;  // the driver's word on the lock
    *out = xmc_pin_info{1, reinterpret_cast<void *>(base), size};
    return XMC_OK;
}

xmc_status pin_stats(xmc_instance *inst, xmc_pin_stats *out) {
    XMC_PT_GUARD(inst);
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_stats", "pin_stats: result pointer is NULL");
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    *out = xmc_pin_stats{s.bytes_now, s.bytes_peak, s.live.size()};
    return XMC_OK;
}

// ---- pin_refs -----------------------------------------------------------------

xmc_status pin_ref(xmc_instance *inst, const void *addr) {
    XMC_PT_GUARD(inst);
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = containing(s, reinterpret_cast<uintptr_t>(addr));
    if (it == s.live.end())
        return fail(inst, XMC_ERR_NOT_PINNED_BASE, 0, "pin_ref", "pin_ref: %p is not inside any block handed out", addr);
    ++it->second.refs;
    return XMC_OK;
}

xmc_status pin_unref(xmc_instance *inst, const void *addr) {
    XMC_PT_GUARD(inst);
    State &s = state();
    c10::DataPtr dropped;
    {
        std::lock_guard<std::mutex> lock(s.mu);
        auto it = containing(s, reinterpret_cast<uintptr_t>(addr));
        if (it == s.live.end())
            return fail(inst, XMC_ERR_NOT_PINNED_BASE, 0, "pin_unref", "pin_unref: %p is not inside any block handed out",
                        addr);
        if (it->second.refs == 0)
            return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_unref",
                        "pin_unref: block %p holds no reference taken with pin_ref", reinterpret_cast<void *>(it->first));
        if (--it->second.refs == 0 && !it->second.owner) {
            dropped = std::move(it->second.data);
            s.bytes_now -= it->second.size;
            s.live.erase(it);
        }
    }
    return XMC_OK;
}

// ---- pin_cache ----------------------------------------------------------------

// The pool's figures from at::HostStats, whose members PyTorch renamed (the
// header says which version has which).
template <class Stats>
xmc_pin_pool_stats pooled_of(const Stats &h) {
    int64_t bytes = 0, blocks = 0;
    if constexpr (requires { h.active_requests.current; h.active_bytes.current; h.allocations.current; }) {
        bytes = h.allocated_bytes.current - h.active_bytes.current;
        blocks = h.allocations.current - h.active_requests.current;
    } else {
        bytes = h.reserved_bytes.current - h.allocated_bytes.current;
        blocks = h.segment.current - h.allocation.current;
    }
    return xmc_pin_pool_stats{static_cast<uint64_t>(bytes > 0 ? bytes : 0), static_cast<uint64_t>(blocks > 0 ? blocks : 0)};
}

xmc_status pin_pool_release(xmc_instance *inst) {
    XMC_PT_GUARD(inst);
    xmc_status st = XMC_OK;
    at::HostAllocator *a = allocator(inst, "pin_pool_release", &st);
    if (!a) return st;
    try {
        a->empty_cache();
    } catch (const c10::Error &e) {
        return fail(inst, XMC_ERR_DRIVER, 0, "pin_pool_release", "pin_pool_release: empty_cache() threw: %.300s",
                    e.what_without_backtrace());
    }
    return XMC_OK;
}

xmc_status pin_pool_stats(xmc_instance *inst, xmc_pin_pool_stats *out) {
    XMC_PT_GUARD(inst);
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_pool_stats", "pin_pool_stats: result pointer is NULL");
    xmc_status st = XMC_OK;
    at::HostAllocator *a = allocator(inst, "pin_pool_stats", &st);
    if (!a) return st;
    try {
        *out = pooled_of(a->get_stats());
    } catch (const c10::Error &e) {
        return fail(inst, XMC_ERR_DRIVER, 0, "pin_pool_stats", "pin_pool_stats: get_stats() threw: %.300s",
                    e.what_without_backtrace());
    }
    return XMC_OK;
}

} // namespace

extern "C" XMC_EXPORT const xmc_backend *xmc_backend_entry(uint32_t abi) {
    if (abi != XMC_ABI_VERSION) return nullptr;
    static const xmc_backend t = [] {
        xmc_backend b{};
        b.abi_version = XMC_ABI_VERSION;
        b.struct_size = sizeof b;
        b.name = host_register_mode() ? "pytorch_host_register" : "pytorch";
        b.version = "0.2.0";
        b.capabilities = XMC_CAP_PIN | XMC_CAP_PIN_REFS | XMC_CAP_PIN_DRIVER | XMC_CAP_PIN_CACHE;
        b.open = open;
        b.close = close;
        b.device_count = device_count;
        b.device_info = device_info;
        b.last_error = last_error;
        b.status_name = status_name;
        b.pin_alloc = pin_alloc;
        b.pin_free = pin_free;
        b.pin_query = pin_query;
        b.pin_stats = pin_stats;
        b.pin_ref = pin_ref;
        b.pin_unref = pin_unref;
        b.pin_min_alignment = pin_min_alignment;
        b.close_report = close_report;
        b.pin_pool_release = pin_pool_release;
        b.pin_pool_stats = pin_pool_stats;
        return b;
    }();
    return &t;
}
