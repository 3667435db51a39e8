// Registration over a platform's RegOps (registration.hpp).
//
// Alignment policy (REG-ALIGN): XMC_REG_ALIGN_REFUSE on every platform. An address or size that is
// not a multiple of the page size is refused, so a recorded range is exactly the range asked for
// and no two registrations ever share a page (releasing one can never unlock another's page). The
// CUDA driver would take unaligned ranges, Level Zero's extension would not: one rule every backend
// holds exactly.
#include "registration.hpp"

#include "memory_book.hpp"

#include "pin_registry.hpp"

#include <algorithm>

namespace xmc::be {

std::map<uintptr_t, RegEntry>::iterator Registrations::containing(uintptr_t addr) {
    auto it = ranges_.upper_bound(addr);
    if (it == ranges_.begin()) return ranges_.end();
    --it;
    return addr - it->first < it->second.size ? it : ranges_.end();
}

bool Registrations::overlaps(uintptr_t addr, size_t bytes) {
    auto it = ranges_.lower_bound(addr + bytes);  // the first range starting at or after the end
    if (it == ranges_.begin()) return false;
    --it;                                         // the last range starting before the end
    return it->first + it->second.size > addr;
}

size_t Registrations::chunk_bytes(size_t bytes) const {
    return ops.large.policy == XMC_REG_LARGE_SPLIT ? ops.large.limit : bytes;
}

int64_t Registrations::release_chunks(const char *call, void *ctx, uintptr_t a, uintptr_t end, uintptr_t *kept) {
    const size_t chunk = chunk_bytes(end - a);
    for (uintptr_t c = a; c < end; c += chunk) {
        *kept = c;
        const size_t n = std::min<size_t>(chunk, end - c);
        if (const int64_t res = ops.release(call, ctx, reinterpret_cast<void *>(a), reinterpret_cast<void *>(c), n); res != 0) return res;
    }
    *kept = end;
    return 0;
}

int64_t Registrations::release_entry(const char *call, std::map<uintptr_t, RegEntry>::iterator it, uintptr_t *kept) {
    const uintptr_t a = it->first;
    const RegEntry entry = it->second;
    const int64_t res = release_chunks(call, entry.ctx, a, a + entry.size, kept);
    ranges_.erase(a);  // by its base: `it` is not used across the driver's call
    book_remove(a, MemKind::Registered);  // what is left of it after a refusal is no longer the same
    // REG-UNREG-FAIL: what the driver kept stays registered, from the refused chunk on, so a retry
    // releases the rest (the chunks before it are gone from the driver).
    if (res != 0) {
        RegEntry rest = entry;
        rest.size = a + entry.size - *kept;
        ranges_[*kept] = rest;
    }
    return res;
}

xmc_status Registrations::reg_large_policy(xmc_instance *inst, xmc_reg_large_info *out) {
    if (!out)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_large_policy", "reg_large_policy: result pointer is NULL");
    *out = ops.large;
    return XMC_OK;
}

xmc_status Registrations::reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                                       xmc_reg_info *out) {
    const size_t page = PinRegistry::page_size();
    const auto a = reinterpret_cast<uintptr_t>(addr);
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: result pointer is NULL");
    if (!addr) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: address is NULL");
    if (bytes == 0) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: size is 0");
    if (flags & ~XMC_REG_PORTABLE)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register",
                    "reg_register: unknown flags 0x%x (XMC_REG_PORTABLE is the only one)", flags);
    // REG-UNAVAILABLE, REG-DEVICE, REG-PORTABLE: what the platform cannot serve.
    if (xmc_status st = ops.check(inst, device, flags); st != XMC_OK) return st;
    // REG-ALIGN: policy refuse, as reg_align_policy declares.
    if (a % page != 0 || bytes % page != 0)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register",
                    "reg_register: [%p, +%zu) is not page-aligned (%zu); the alignment policy is refuse", addr, bytes,
                    page);
    if (a > UINTPTR_MAX - bytes)
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: [%p, +%zu) wraps the address space",
                    addr, bytes);
    // REG-LARGE: policy refuse above the declared limit, the driver not asked.
    if (ops.large.policy == XMC_REG_LARGE_REFUSE && bytes > ops.large.limit)
        return fail(inst, XMC_ERR_TOO_LARGE, 0, "reg_register",
                    "reg_register: %zu bytes is above the %llu bytes one registration may hold (reg_large_policy: "
                    "refuse)", bytes, static_cast<unsigned long long>(ops.large.limit));
    Guard lock(*this, "reg_register");
    // REG-DOUBLE: overlapping a registered range (or a pinned block registered with a device) is
    // refused before the driver sees it.
    if (overlaps(a, bytes))
        return fail(inst, XMC_ERR_ALREADY_REGISTERED, 0, "reg_register",
                    "reg_register: [%p, +%zu) overlaps a registered range", addr, bytes);
    void *ctx = nullptr;
    if (xmc_status st = ops.context(inst, "reg_register", device, &ctx); st != XMC_OK) return st;
    // REG-LARGE: chunk by chunk under policy split, all or nothing.
    const size_t chunk = chunk_bytes(bytes);
    for (uintptr_t c = a; c < a + bytes; c += chunk) {
        int64_t native = 0;
        const size_t n = std::min<size_t>(chunk, a + bytes - c);
        const xmc_status st = ops.make(inst, "reg_register", ctx, reinterpret_cast<void *>(c), n, device, flags, &native);
        if (st == XMC_OK) continue;
        if (c == a) return st;
        // Chunk k failed: chunks 1..k-1 are released and chunk k's error is reported.
        xmc_error_info why{};
        last_error(inst, &why);
        uintptr_t kept = a;
        const int64_t undo = release_chunks("reg_register", ctx, a, c, &kept);
        ops.idle();
        return fail(inst, why.status, why.native_code, "reg_register",
                    "reg_register: chunk %zu of [%p, +%zu) (chunks of %zu bytes) failed: %s; the chunks before it %s",
                    static_cast<size_t>((c - a) / chunk) + 1, addr, bytes, chunk, why.message,
                    undo == 0 ? "were released" : "could not all be released");
    }
    ranges_[a] = RegEntry{bytes, device, ctx, false};
    book_add(a, bytes, MemKind::Registered);
    // REG-IDENTITY: the device address is the host address itself (make checked it).
    *out = xmc_reg_info{1, addr, bytes, device};
    return XMC_OK;
}

xmc_status Registrations::reg_unregister(xmc_instance *inst, void *base) {
    Guard lock(*this, "reg_unregister");
    const auto a = reinterpret_cast<uintptr_t>(base);
    // REG-UNREG-BASE: exactly a recorded base; anything else changes nothing.
    auto it = ranges_.find(a);
    if (it == ranges_.end() || it->second.pinned) {
        auto holder = containing(a);
        const char *why = holder == ranges_.end()  ? "is not inside any registered range"
                          : holder->second.pinned ? "belongs to a pinned block (pin_free releases it)"
                                                  : "is interior to a registered range (give its recorded base)";
        return fail(inst, XMC_ERR_NOT_REGISTERED, 0, "reg_unregister", "reg_unregister: %p %s", base, why);
    }
    const size_t size = it->second.size;
    uintptr_t kept = a;
    // REG-SAME-CONTEXT: in the context that made it; REG-LARGE: every chunk.
    const int64_t res = release_entry("reg_unregister", it, &kept);
    // REG-UNREG-FAIL: never success over a driver failure (the caller would free pages the device
    // still maps); the entry stays, so a retry can remove it.
    if (res != 0)
        return fail(inst, XMC_ERR_DRIVER, res, "reg_unregister",
                    "reg_unregister: %s(%p) of [%p, +%zu) failed with %s (%lld); [%p, +%zu) still registered",
                    ops.release_call, reinterpret_cast<void *>(kept), base, size, ops.native_name(res),
                    static_cast<long long>(res), reinterpret_cast<void *>(kept), static_cast<size_t>(a + size - kept));
    ops.idle();
    return XMC_OK;
}

xmc_status Registrations::release_all(xmc_instance *inst, uint64_t *released) {
    Guard lock(*this, "close");
    // REG-CLOSE: each one as reg_unregister releases it, every chunk, in its own context.
    for (auto it = ranges_.begin(); it != ranges_.end();) {
        if (it->second.pinned) {  // the pin registry's release hook frees it with its block
            ++it;
            continue;
        }
        const uintptr_t a = it->first;
        const size_t size = it->second.size;
        uintptr_t kept = a;
        const int64_t res = release_entry("close", it, &kept);
        if (res != 0 && !ops.gone(res))
            return fail(inst, XMC_ERR_DRIVER, res, "close",
                        "close: %s(%p) of a registration still held ([%p, +%zu)) failed with %s (%lld); [%p, +%zu) "
                        "still registered", ops.release_call, reinterpret_cast<void *>(kept),
                        reinterpret_cast<void *>(a), size, ops.native_name(res), static_cast<long long>(res),
                        reinterpret_cast<void *>(kept), static_cast<size_t>(a + size - kept));
        if (res != 0) ranges_.erase(kept);  // gone: nothing is left to release
        ++*released;
        it = ranges_.upper_bound(a);
    }
    return XMC_OK;
}

xmc_status Registrations::reg_query(xmc_instance *inst, const void *addr, xmc_reg_info *out) {
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_query", "reg_query: result pointer is NULL");
    *out = xmc_reg_info{};
    out->device = XMC_NO_DEVICE;
    Guard lock(*this, "reg_query");
    auto it = containing(reinterpret_cast<uintptr_t>(addr));
    if (it != ranges_.end() && !it->second.pinned)
        *out = xmc_reg_info{1, reinterpret_cast<void *>(it->first), it->second.size, it->second.device};
    return XMC_OK;
}

xmc_status Registrations::add_pinned(xmc_instance *inst, uintptr_t base, size_t size, int32_t device,
                                     int64_t *native) {
    Guard lock(*this, "pin_alloc");
    if (overlaps(base, size))  // memory registered by the caller, freed, and reused by the allocator
        return fail(inst, XMC_ERR_ALREADY_REGISTERED, 0, "pin_alloc",
                    "pin_alloc: the new block [0x%llx, +%zu) overlaps a registered range",
                    static_cast<unsigned long long>(base), size);
    void *ctx = nullptr;
    if (xmc_status st = ops.context(inst, "pin_alloc", device, &ctx); st != XMC_OK) {
        xmc_error_info why{};
        last_error(inst, &why);
        *native = why.native_code;  // the driver's code goes with the lock-only result
        return st;
    }
    if (xmc_status st = ops.make(inst, "pin_alloc", ctx, reinterpret_cast<void *>(base), size, device, 0, native);
        st != XMC_OK)
        return st;
    ranges_[base] = RegEntry{size, device, ctx, true};
    return XMC_OK;
}

int64_t Registrations::release_pinned(uintptr_t base) {
    {
        Guard lock(*this, "pin_free");
        auto it = ranges_.find(base);
        if (it == ranges_.end() || !it->second.pinned) return 0;
        if (const int64_t res = ops.release("pin_free", it->second.ctx, reinterpret_cast<void *>(base), reinterpret_cast<void *>(base), it->second.size); res != 0)
            return res;
        ranges_.erase(it);
    }
    ops.idle();
    return 0;
}

} // namespace xmc::be
