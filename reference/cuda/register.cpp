// Registration through the driver (capability `register`, REG-*):
// cuMemHostRegister in the primary context of the device asked for, found by
// its UUID (REG-UUID), then cuMemHostGetDevicePointer must give back the host
// address (REG-IDENTITY). Ranges are tracked in a process-wide ordered map
// shared by every instance, together with the context that registered them,
// so unregister releases in that context (REG-SAME-CONTEXT) and a failed
// release keeps the entry (REG-UNREG-FAIL).
//
// Flags: CU_MEMHOSTREGISTER_DEVICEMAP, not PORTABLE, unless the caller asks
// for XMC_REG_PORTABLE (REG-PORTABLE: usable by every device; then
// CU_MEMHOSTREGISTER_PORTABLE too). SPEC REG-DEVICE says a plain registration
// lives in a context of device d only; a portable one would be visible from
// every context and hide a registration made in the wrong one.
//
// Large registrations (REG-LARGE): XMC_REG_LARGE_SPLIT in chunks of
// kRegChunkBytes (1 GiB). The driver documents no per-call limit, but a large
// range can be refused whole (hardware/probe: reg_huge_prot_none answered
// CUDA_ERROR_OUT_OF_MEMORY); chunks keep each call bounded. All or nothing: a
// chunk the driver refuses releases the chunks before it and reports the
// driver's code; the chunks are one registration to query and unregister,
// and unregister releases every chunk.
//
// Alignment policy (REG-ALIGN): XMC_REG_ALIGN_REFUSE, as on the host. The
// driver would take unaligned ranges (hardware/probe: reg_unaligned_*), but a
// refused range is one rule that every backend can hold exactly, and it keeps
// two registrations from ever sharing a page.
#include "cuda.hpp"

#include <cstring>

namespace xmc::cuda {
namespace {

struct Registration {
    size_t size = 0;          // the whole range, chunks of kRegChunkBytes from the base
    int32_t device = 0;
    CUuuid uuid{};            // of the device that serves it
    CUcontext ctx = nullptr;  // where it was made, and where it is released
};

struct RegRegistry {
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

RegRegistry &registry() {
    static RegRegistry r;
    return r;
}

// The number of chunks that start in [a, end).
size_t chunks_in(uintptr_t a, uintptr_t end) { return (end - a + kRegChunkBytes - 1) / kRegChunkBytes; }

// Releases the chunks starting at a, a + kRegChunkBytes, ... below `end`, in
// order, in the current context; the first failure's code, or CUDA_SUCCESS.
// *kept is the base of the first chunk still registered (`end` when none):
// on a failure the chunks from there on stay registered.
CUresult release_chunks(Driver &d, uintptr_t a, uintptr_t end, uintptr_t *kept) {
    *kept = a;
    for (uintptr_t c = a; c < end; c += kRegChunkBytes) {
        const CUresult res = d.cuMemHostUnregister(reinterpret_cast<void *>(c));
        if (res != CUDA_SUCCESS) {
            *kept = c;
            return res;
        }
    }
    *kept = end;
    return CUDA_SUCCESS;
}

// Releases registration `it` whole, in the context that made it (REG-SAME-CONTEXT), every chunk
// (REG-LARGE), and uncounts what went. A chunk the driver refuses stops the release: the chunks
// from it on stay registered, and so does the entry, from that chunk's base (a retry releases the
// rest). *kept is that base (the end when every chunk went); the driver's code comes back.
CUresult release_registration(Driver &d, RegRegistry &r, std::map<uintptr_t, Registration>::iterator it,
                              uintptr_t *kept) {
    const uintptr_t a = it->first;
    const size_t size = it->second.size;
    CUresult res = CUDA_SUCCESS;
    *kept = a;
    {
        CtxScope scope(d, it->second.ctx);
        res = scope.result();
        if (res == CUDA_SUCCESS) res = release_chunks(d, a, a + size, kept);
    }
    {
        std::lock_guard<std::mutex> dl(d.mu);
        d.registrations -= chunks_in(a, *kept);
    }
    if (res == CUDA_SUCCESS) {
        r.ranges.erase(it);
    } else if (*kept != a) {
        Registration rest = it->second;
        rest.size = a + size - *kept;
        r.ranges.erase(it);
        r.ranges[*kept] = rest;
    }
    return res;
}

} // namespace

xmc_reg_align_policy reg_align_policy(xmc_instance *) { return XMC_REG_ALIGN_REFUSE; }

xmc_status reg_large_policy(xmc_instance *inst, xmc_reg_large_info *out) {
    if (!out)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_large_policy", "reg_large_policy: result pointer is NULL");
    *out = xmc_reg_large_info{XMC_REG_LARGE_SPLIT, kRegChunkBytes};
    return XMC_OK;
}

xmc_status driver_register(xmc_instance *inst, const char *call, void *addr, size_t bytes, int32_t index,
                           CUcontext *ctx_out, CUresult *native, unsigned extra_flags) {
    Driver &d = Driver::get();
    CUcontext ctx = nullptr;
    // REG-DEVICE, REG-UUID: device `index`'s own primary context, by UUID.
    *native = d.context_for(d.devices[static_cast<size_t>(index)].uuid, &ctx, nullptr);
    if (*native != CUDA_SUCCESS) return driver_fail(inst, *native, call, "cuDevicePrimaryCtxRetain");
    CtxScope scope(d, ctx);
    if ((*native = scope.result()) != CUDA_SUCCESS) return driver_fail(inst, *native, call, "cuCtxPushCurrent");
    // REG-FAIL: a refused registration fails with the driver's code, untracked.
    if ((*native = d.cuMemHostRegister(addr, bytes, CU_MEMHOSTREGISTER_DEVICEMAP | extra_flags)) != CUDA_SUCCESS)
        return driver_fail(inst, *native, call, "cuMemHostRegister");
    CUdeviceptr dptr = 0;
    const CUresult got = d.cuMemHostGetDevicePointer(&dptr, addr, 0);
    // REG-IDENTITY: the device pointer must be the host address, else undone.
    if (got != CUDA_SUCCESS || dptr != reinterpret_cast<CUdeviceptr>(addr)) {
        // Nothing stays registered: undo before refusing.
        const CUresult undo = d.cuMemHostUnregister(addr);
        *native = got != CUDA_SUCCESS ? got : undo;
        if (got != CUDA_SUCCESS) return driver_fail(inst, got, call, "cuMemHostGetDevicePointer");
        return be::fail(inst, XMC_ERR_NON_IDENTITY, undo, call,
                        "%s: the driver mapped host %p at device address 0x%llx, not the same address%s", call, addr,
                        static_cast<unsigned long long>(dptr),
                        undo == CUDA_SUCCESS ? "; registration undone" : "; undoing it failed too (native code)");
    }
    *ctx_out = ctx;
    std::lock_guard<std::mutex> lock(d.mu);
    ++d.registrations;  // keeps the context retained after the last close
    return XMC_OK;
}

xmc_status reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                        xmc_reg_info *out) {
    const size_t page = be::PinRegistry::page_size();
    const auto a = reinterpret_cast<uintptr_t>(addr);
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: result pointer is NULL");
    if (!addr) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: address is NULL");
    if (bytes == 0) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: size is 0");
    if (flags & ~XMC_REG_PORTABLE)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register",
                        "reg_register: unknown flags 0x%x (XMC_REG_PORTABLE is the only one)", flags);
    Driver &d = Driver::get();
    // REG-UNAVAILABLE: no driver, device or entry point: unsupported, never a crash.
    if (xmc_status st = require(inst, "reg_register", d.missing_register); st != XMC_OK) return st;
    if (xmc_status st = check_device(inst, device, "reg_register"); st != XMC_OK) return st;
    // REG-ALIGN: policy refuse, as reg_align_policy declares.
    if (a % page != 0 || bytes % page != 0)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register",
                        "reg_register: [%p, +%zu) is not page-aligned (%zu); the alignment policy is refuse", addr,
                        bytes, page);
    if (a > UINTPTR_MAX - bytes)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register",
                        "reg_register: [%p, +%zu) wraps the address space", addr, bytes);
    RegRegistry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);  // held across the driver calls: no two overlapping ranges pass
    // REG-DOUBLE: overlapping a tracked range is refused before the driver sees it;
    // REG-THREADS: check and record under one lock.
    if (r.overlaps(a, bytes))
        return be::fail(inst, XMC_ERR_ALREADY_REGISTERED, 0, "reg_register",
                        "reg_register: [%p, +%zu) overlaps a registered range", addr, bytes);
    CUcontext ctx = nullptr;
    CUresult native = CUDA_SUCCESS;
    const unsigned extra = (flags & XMC_REG_PORTABLE) ? CU_MEMHOSTREGISTER_PORTABLE : 0u;
    // REG-LARGE: chunk by chunk, all or nothing. The driver's own "already
    // registered" (a pinned block registered with a device, or memory
    // registered outside xmc) arrives as XMC_ERR_ALREADY_REGISTERED.
    for (uintptr_t c = a; c < a + bytes; c += kRegChunkBytes) {
        const size_t n = std::min<size_t>(kRegChunkBytes, a + bytes - c);
        const xmc_status st =
            driver_register(inst, "reg_register", reinterpret_cast<void *>(c), n, device, &ctx, &native, extra);
        if (st == XMC_OK) continue;
        if (c == a) return st;
        // Chunk k failed: release chunks 1..k-1 (in their context) and report
        // chunk k's code; the error detail stays the failed chunk's.
        xmc_error_info why{};
        be::last_error(inst, &why);
        uintptr_t kept = a;
        CUresult undo = CUDA_SUCCESS;
        {
            CtxScope scope(d, ctx);
            undo = scope.result();
            if (undo == CUDA_SUCCESS) undo = release_chunks(d, a, c, &kept);
        }
        {
            std::lock_guard<std::mutex> dl(d.mu);
            d.registrations -= chunks_in(a, kept);
        }
        d.release_if_idle();
        return be::fail(inst, why.status, why.native_code, "reg_register",
                        "reg_register: chunk %zu of [%p, +%zu) (chunks of %zu bytes) failed: %s; the chunks before it %s",
                        static_cast<size_t>((c - a) / kRegChunkBytes) + 1, addr, bytes, kRegChunkBytes, why.message,
                        undo == CUDA_SUCCESS ? "were released" : "could not all be released (cuMemHostUnregister)");
    }
    Registration reg;
    reg.size = bytes;
    reg.device = device;
    reg.uuid = d.devices[static_cast<size_t>(device)].uuid;
    reg.ctx = ctx;
    r.ranges[a] = reg;
    *out = xmc_reg_info{1, addr, bytes, device};
    return XMC_OK;
}

xmc_status reg_unregister(xmc_instance *inst, void *base) {
    RegRegistry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    const auto a = reinterpret_cast<uintptr_t>(base);
    // REG-UNREG-BASE: exactly a recorded base; anything else changes nothing.
    auto it = r.ranges.find(a);
    if (it == r.ranges.end()) {
        const bool interior = r.containing(a) != r.ranges.end();
        return be::fail(inst, XMC_ERR_NOT_REGISTERED, 0, "reg_unregister", "reg_unregister: %p %s", base,
                        interior ? "is interior to a registered range (give its recorded base)"
                                 : "is not inside any registered range");
    }
    Driver &d = Driver::get();
    // Released in the context that registered it (REG-SAME-CONTEXT), every chunk (REG-LARGE); a
    // chunk that fails keeps the entry from that chunk on (a retry releases the rest).
    const size_t size = it->second.size;
    uintptr_t kept = a;
    const CUresult res = release_registration(d, r, it, &kept);
    if (res != CUDA_SUCCESS && kept != a) {
        return be::fail(inst, XMC_ERR_DRIVER, res, "reg_unregister",
                        "reg_unregister: cuMemHostUnregister(%p), chunk %zu of [%p, +%zu), failed with %s (%d); "
                        "[%p, +%zu) still registered", reinterpret_cast<void *>(kept),
                        static_cast<size_t>((kept - a) / kRegChunkBytes) + 1, base, size, d.result_name(res),
                        static_cast<int>(res), reinterpret_cast<void *>(kept), static_cast<size_t>(a + size - kept));
    }
    // REG-UNREG-FAIL: a failed release is reported and the entry kept.
    // Never success over a driver failure: the caller would free pages the
    // device still maps. The entry stays, so a retry can remove it.
    if (res != CUDA_SUCCESS)
        return be::fail(inst, XMC_ERR_DRIVER, res, "reg_unregister",
                        "reg_unregister: cuMemHostUnregister(%p) failed with %s (%d); still registered", base,
                        d.result_name(res), static_cast<int>(res));
    d.release_if_idle();
    return XMC_OK;
}

xmc_status reg_release_all(xmc_instance *inst, uint64_t *released) {
    RegRegistry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    Driver &d = Driver::get();
    // REG-CLOSE: each one as reg_unregister releases it, in its own context
    // (REG-SAME-CONTEXT); a refusal keeps it (REG-UNREG-FAIL's rule).
    // REG-LARGE: a split registration is every one of its chunks, each a driver registration, all
    // released here as reg_unregister releases them (the first chunk alone left the others
    // registered and the primary context retained). A refusal keeps the rest (REG-UNREG-FAIL).
    while (!r.ranges.empty()) {
        auto it = r.ranges.begin();
        const uintptr_t a = it->first;
        const size_t size = it->second.size;
        uintptr_t kept = a;
        const CUresult res = release_registration(d, r, it, &kept);
        if (res != CUDA_SUCCESS)
            return be::fail(inst, XMC_ERR_DRIVER, res, "close",
                            "close: cuMemHostUnregister(%p) of a registration still held ([%p, +%zu)) failed with "
                            "%s (%d); [%p, +%zu) still registered",
                            reinterpret_cast<void *>(kept), reinterpret_cast<void *>(a), size, d.result_name(res),
                            static_cast<int>(res), reinterpret_cast<void *>(kept), static_cast<size_t>(a + size - kept));
        ++*released;
    }
    return XMC_OK;
}

xmc_status reg_query(xmc_instance *inst, const void *addr, xmc_reg_info *out) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_query", "reg_query: result pointer is NULL");
    *out = xmc_reg_info{};
    out->device = XMC_NO_DEVICE;
    RegRegistry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.containing(reinterpret_cast<uintptr_t>(addr));
    if (it != r.ranges.end())
        *out = xmc_reg_info{1, reinterpret_cast<void *>(it->first), it->second.size, it->second.device};
    return XMC_OK;
}

} // namespace xmc::cuda
