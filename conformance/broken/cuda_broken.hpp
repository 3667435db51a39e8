// Broken CUDA backends for the self-test (SPEC 6): each is the reference CUDA
// backend with one real bug planted, run over the fake CUDA driver, so the
// suite must fail it on exactly the requirements that bug breaks.
// `XMC_BROKEN_CUDA_BACKEND(name)` defines the entry symbol; the file defines
// `void plant(xmc_backend &t)`, which overrides the entries that carry the bug.
//
// reference/cuda/register.cpp keeps its registrations private, so a bug that
// sits inside registration gets the reference's registration path again here,
// step by step as there (own_registrations() installs it), with the two places
// the seeds' bugs sit made parameters: the device whose context a range is
// registered in, and what unregister does with the driver's answer.
#pragma once
#include "cuda.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>

namespace xmc::broken_cuda {

void plant(xmc_backend &t);

// The correct table, for the entries a bug wraps.
inline const xmc_backend *reference() {
    static const xmc_backend t = [] { xmc_backend r{}; xmc::cuda::fill_table(r); return r; }();
    return &t;
}

// Puts `fn` in place of the driver's cuPointerGetAttribute, once, keeping the real one in *real:
// for the path IPC bugs that lie in how a source's memory is described to its readers.
using PointerAttribute = decltype(xmc::cuda::Driver::cuPointerGetAttribute);
inline void interpose_pointer_attribute(PointerAttribute fn, PointerAttribute *real) {
    static std::once_flag once;
    std::call_once(once, [&] {
        xmc::cuda::Driver &d = xmc::cuda::Driver::get();
        *real = d.cuPointerGetAttribute;
        d.cuPointerGetAttribute = fn;
    });
}

// ---- registration, as reference/cuda/register.cpp does it ----------------

struct Registration {
    size_t size = 0;
    int32_t device = 0;       // the device asked for (what reg_query reports)
    CUcontext ctx = nullptr;  // where it was made, and where it is released
};

struct Registry {
    std::mutex mu;
    std::map<uintptr_t, Registration> ranges;  // by base

    std::map<uintptr_t, Registration>::iterator containing(uintptr_t addr) {
        auto it = ranges.upper_bound(addr);
        if (it == ranges.begin()) return ranges.end();
        --it;
        return addr - it->first < it->second.size ? it : ranges.end();
    }
    bool overlaps(uintptr_t addr, size_t bytes) {
        auto it = ranges.lower_bound(addr + bytes);
        if (it == ranges.begin()) return false;
        --it;
        return it->first + it->second.size > addr;
    }
};

inline Registry &registry() {
    static Registry r;
    return r;
}

// Where the chunked path of REG-LARGE carries a bug (the reference: neither).
struct ChunkBugs {
    bool keep_earlier_chunks = false;       // a refused chunk k leaves chunks 1..k-1 registered
    bool release_first_chunk_only = false;  // unregister releases chunk 1 and forgets the rest
    bool close_first_chunk_only = false;    // the last close releases chunk 1 of each and forgets the rest
};
inline ChunkBugs &chunk_bugs() {
    static ChunkBugs b;
    return b;
}

// reg_register of the reference, except that the range is registered with the
// driver device `pick(device)` (the reference: `device` itself). Chunks of
// kRegChunkBytes, all or nothing (REG-LARGE), and XMC_REG_PORTABLE, as there.
template <class Pick>
xmc_status register_with(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                         xmc_reg_info *out, Pick pick) {
    using namespace xmc::cuda;
    const size_t page = be::PinRegistry::page_size();
    const auto a = reinterpret_cast<uintptr_t>(addr);
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: result pointer is NULL");
    if (!addr) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: address is NULL");
    if (bytes == 0) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: size is 0");
    if (flags & ~XMC_REG_PORTABLE)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: unknown flags 0x%x", flags);
    Driver &d = Driver::get();
    if (xmc_status st = require(inst, "reg_register", d.missing_register); st != XMC_OK) return st;
    if (xmc_status st = check_device(inst, device, "reg_register"); st != XMC_OK) return st;
    if (a % page != 0 || bytes % page != 0)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: [%p, +%zu) is not page-aligned",
                        addr, bytes);
    if (a > UINTPTR_MAX - bytes)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: [%p, +%zu) wraps", addr, bytes);
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.overlaps(a, bytes))
        return be::fail(inst, XMC_ERR_ALREADY_REGISTERED, 0, "reg_register",
                        "reg_register: [%p, +%zu) overlaps a registered range", addr, bytes);
    CUcontext ctx = nullptr;
    CUresult native = CUDA_SUCCESS;
    const unsigned extra = (flags & XMC_REG_PORTABLE) ? CU_MEMHOSTREGISTER_PORTABLE : 0u;
    for (uintptr_t c = a; c < a + bytes; c += kRegChunkBytes) {
        const size_t n = std::min<size_t>(kRegChunkBytes, a + bytes - c);
        const xmc_status st =
            driver_register(inst, "reg_register", reinterpret_cast<void *>(c), n, pick(device), &ctx, &native, extra);
        if (st == XMC_OK) continue;
        if (c != a && !chunk_bugs().keep_earlier_chunks) {
            CtxScope scope(d, ctx);
            for (uintptr_t k = a; k < c && scope.result() == CUDA_SUCCESS; k += kRegChunkBytes)
                if (d.cuMemHostUnregister(reinterpret_cast<void *>(k)) == CUDA_SUCCESS) {
                    std::lock_guard<std::mutex> dl(d.mu);
                    --d.registrations;
                }
        }
        if (c != a) d.release_if_idle();
        return st;  // chunk k's error, as driver_register recorded it
    }
    r.ranges[a] = Registration{bytes, device, ctx};
    *out = xmc_reg_info{1, addr, bytes, device};
    return XMC_OK;
}

// reg_unregister of the reference, except that `report(res)` decides what a
// driver release answering `res` means: true keeps the registration and
// reports the failure (the reference), false drops it and answers success.
// Every chunk is released (REG-LARGE); a chunk that fails keeps the entry
// from that chunk on, as the reference does.
template <class Report>
xmc_status unregister_with(xmc_instance *inst, void *base, Report report) {
    using namespace xmc::cuda;
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    const auto a = reinterpret_cast<uintptr_t>(base);
    auto it = r.ranges.find(a);
    if (it == r.ranges.end())
        return be::fail(inst, XMC_ERR_NOT_REGISTERED, 0, "reg_unregister", "reg_unregister: %p is not a registered base",
                        base);
    Driver &d = Driver::get();
    const size_t size = it->second.size;
    const uintptr_t end = chunk_bugs().release_first_chunk_only ? std::min<uintptr_t>(a + size, a + kRegChunkBytes)
                                                                : a + size;
    CUresult res = CUDA_SUCCESS;
    uintptr_t kept = a;
    {
        CtxScope scope(d, it->second.ctx);
        res = scope.result();
        for (uintptr_t c = a; res == CUDA_SUCCESS && c < end; c += kRegChunkBytes) {
            res = d.cuMemHostUnregister(reinterpret_cast<void *>(c));
            if (res != CUDA_SUCCESS) break;
            kept = std::min<uintptr_t>(c + kRegChunkBytes, a + size);
            std::lock_guard<std::mutex> dl(d.mu);
            --d.registrations;
        }
    }
    if (res != CUDA_SUCCESS && report(res)) {
        if (kept != a) {
            Registration rest = it->second;
            rest.size = a + size - kept;
            r.ranges.erase(it);
            r.ranges[kept] = rest;
        }
        return be::fail(inst, XMC_ERR_DRIVER, res, "reg_unregister",
                        "reg_unregister: cuMemHostUnregister(%p) failed with %s (%d); still registered",
                        reinterpret_cast<void *>(kept), d.result_name(res), static_cast<int>(res));
    }
    if (res != CUDA_SUCCESS) {
        // Dropped over a failure: the chunks not released are forgotten as well.
        std::lock_guard<std::mutex> dl(d.mu);
        d.registrations -= (a + size - kept + kRegChunkBytes - 1) / kRegChunkBytes;
    }
    r.ranges.erase(it);
    d.release_if_idle();
    return XMC_OK;
}

inline xmc_status own_reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                               xmc_reg_info *out) {
    return register_with(inst, addr, bytes, device, flags, out, [](int32_t d) { return d; });
}

inline xmc_status own_reg_unregister(xmc_instance *inst, void *base) {
    return unregister_with(inst, base, [](CUresult) { return true; });
}

inline xmc_status own_reg_query(xmc_instance *inst, const void *addr, xmc_reg_info *out) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_query", "reg_query: result pointer is NULL");
    *out = xmc_reg_info{};
    out->device = XMC_NO_DEVICE;
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.containing(reinterpret_cast<uintptr_t>(addr));
    if (it != r.ranges.end())
        *out = xmc_reg_info{1, reinterpret_cast<void *>(it->first), it->second.size, it->second.device};
    return XMC_OK;
}

// REG-CLOSE: the reference's close, after (for the last open instance) the
// release of every registration this file's registry still holds, in its
// context, as reference/cuda/register.cpp's reg_release_all does for the
// reference's own; counted in the report.
inline xmc_status own_close_report(xmc_instance *inst, xmc_close_report *out) {
    using namespace xmc::cuda;
    Driver &d = Driver::get();
    bool last = false;
    {
        std::lock_guard<std::mutex> dl(d.mu);
        last = d.instances == 1;
    }
    uint64_t released = 0;
    if (last) {
        Registry &r = registry();
        std::lock_guard<std::mutex> lock(r.mu);
        while (!r.ranges.empty()) {
            auto it = r.ranges.begin();
            const uintptr_t a = it->first;
            const size_t size = it->second.size;
            // Every chunk (REG-LARGE), as the reference's close releases them.
            const uintptr_t end = chunk_bugs().close_first_chunk_only
                                      ? std::min<uintptr_t>(a + size, a + kRegChunkBytes)
                                      : a + size;
            CUresult res = CUDA_SUCCESS;
            {
                CtxScope scope(d, it->second.ctx);
                res = scope.result();
                for (uintptr_t c = a; res == CUDA_SUCCESS && c < end; c += kRegChunkBytes) {
                    res = d.cuMemHostUnregister(reinterpret_cast<void *>(c));
                    if (res != CUDA_SUCCESS) break;
                    std::lock_guard<std::mutex> dl(d.mu);
                    --d.registrations;
                }
            }
            if (res != CUDA_SUCCESS)
                return be::fail(inst, XMC_ERR_DRIVER, res, "close", "close: cuMemHostUnregister of [%p, +%zu) failed with %d",
                                reinterpret_cast<void *>(a), size, static_cast<int>(res));
            r.ranges.erase(it);
            ++released;
        }
    }
    xmc_close_report report{};
    const xmc_status st = reference()->close_report(inst, &report);
    report.registrations += released;
    if (st == XMC_OK && out) *out = report;
    return st;
}
inline xmc_status own_close(xmc_instance *inst) { return own_close_report(inst, nullptr); }

// The three registration entries from here instead of the reference's (a
// bug then replaces one of them), and the close that releases them.
inline void own_registrations(xmc_backend &t) {
    t.reg_register = own_reg_register;
    t.reg_unregister = own_reg_unregister;
    t.reg_query = own_reg_query;
    t.close_report = own_close_report;
    t.close = own_close;
}

} // namespace xmc::broken_cuda

#define XMC_BROKEN_CUDA_BACKEND(NAME)                                                           \
    extern "C" XMC_EXPORT const xmc_backend *xmc_backend_entry(uint32_t v) {                   \
        if (v != XMC_ABI_VERSION) return nullptr;                                               \
        static const xmc_backend table = [] {                                                   \
            xmc_backend t{};                                                                    \
            xmc::cuda::fill_table(t);                                                           \
            t.name = NAME;                                                                      \
            xmc::broken_cuda::plant(t);                                                         \
            xmc::be::guard_table(t);  /* as the real backends: dead instances refused */        \
            return t;                                                                           \
        }();                                                                                    \
        return &table;                                                                          \
    }
