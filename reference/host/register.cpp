// Registration on the host (capability `register`, REG-*): page-locking of
// existing memory with mlock. The host's one device (0) sees host memory at
// the same address, so registration is an identity mapping by construction
// (REG-IDENTITY). Registered ranges live in a process-wide ordered map shared
// by every instance of this library, as pinned blocks do.
//
// Alignment policy (REG-ALIGN): XMC_REG_ALIGN_REFUSE. An address or size that
// is not a multiple of the page size is refused, so a recorded range is
// exactly the range asked for and no two registrations ever share a page
// (munlock of one can then never unlock another's page).
//
// Large registrations (REG-LARGE): XMC_REG_LARGE_NO_LIMIT. mlock takes any
// size in one call; a range it cannot lock is the memlock refusal.
//
// XMC_REG_PORTABLE (REG-PORTABLE): accepted; the one device is every device.
#include "host.hpp"

#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace xmc::host {
namespace {

struct Registration {
    size_t size = 0;
    int32_t device = 0;
};

struct RegRegistry {
    std::mutex mu;
    std::map<uintptr_t, Registration> ranges;  // by base

    // The range containing addr, or ranges.end(). Caller holds mu.
    std::map<uintptr_t, Registration>::iterator containing(uintptr_t addr) {
        auto it = ranges.upper_bound(addr);
        if (it == ranges.begin()) return ranges.end();
        --it;
        return addr - it->first < it->second.size ? it : ranges.end();
    }
    // True when [addr, addr+bytes) overlaps a recorded range. Caller holds mu.
    bool overlaps(uintptr_t addr, size_t bytes) {
        auto it = ranges.lower_bound(addr + bytes);  // first range starting at or after the end
        if (it == ranges.begin()) return false;
        --it;                                        // last range starting before the end
        return it->first + it->second.size > addr;
    }
};

RegRegistry &registry() {
    static RegRegistry r;  // one per library, whatever the instances
    return r;
}

// munlock [base, base+size) except the pages of live pinned blocks: mlock does
// not nest, so unlocking a registered range must not unlock a pinned block
// that lies in it (PIN-ALLOC: a pinned block's pages stay locked).
int unlock_outside_pins(uintptr_t base, size_t size) {
    const uintptr_t end = base + size;
    be::PinRegistry &pins = be::PinRegistry::process();
    xmc_pin_stats st{};
    pins.stats(nullptr, &st);
    if (st.blocks_now == 0) return munlock(reinterpret_cast<void *>(base), size);
    const size_t page = be::PinRegistry::page_size();
    int rc = 0;
    uintptr_t run = base;  // start of the current run of pages to unlock
    for (uintptr_t p = base; p < end;) {
        xmc_pin_info q{};
        pins.query(nullptr, reinterpret_cast<void *>(p), 1, &q);
        if (!q.pinned) {
            p += page;
            continue;
        }
        if (run < p && munlock(reinterpret_cast<void *>(run), p - run) != 0) rc = -1;
        p = std::min(end, reinterpret_cast<uintptr_t>(q.base) + q.size);
        run = p;
    }
    if (run < end && munlock(reinterpret_cast<void *>(run), end - run) != 0) rc = -1;
    return rc;
}

} // namespace

xmc_reg_align_policy reg_align_policy(xmc_instance *) { return XMC_REG_ALIGN_REFUSE; }

xmc_status reg_large_policy(xmc_instance *inst, xmc_reg_large_info *out) {
    if (!out)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_large_policy", "reg_large_policy: result pointer is NULL");
    *out = xmc_reg_large_info{XMC_REG_LARGE_NO_LIMIT, 0};
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
    // REG-DEVICE: the host's one device is 0; any other is no device.
    if (device != 0)
        return be::fail(inst, XMC_ERR_NO_DEVICE, 0, "reg_register",
                        "reg_register: no device %d (the host backend has device 0 only)", device);
    // REG-ALIGN: policy refuse: an unaligned address or size is invalid.
    if (a % page != 0 || bytes % page != 0)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register",
                        "reg_register: [%p, +%zu) is not page-aligned (%zu); the alignment policy is refuse",
                        addr, bytes, page);
    if (a > UINTPTR_MAX - bytes)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register",
                        "reg_register: [%p, +%zu) wraps the address space", addr, bytes);
    RegRegistry &r = registry();
    // REG-THREADS: one lock over the overlap check and the change.
    // Held across mlock: two overlapping registrations cannot both pass the check.
    std::lock_guard<std::mutex> lock(r.mu);
    // REG-DOUBLE: overlapping a registered range is refused, nothing locked.
    if (r.overlaps(a, bytes))
        return be::fail(inst, XMC_ERR_ALREADY_REGISTERED, 0, "reg_register",
                        "reg_register: [%p, +%zu) overlaps a registered range", addr, bytes);
    // msync answers ENOMEM when part of the range is not mapped: the kernel,
    // the host's "driver", rejects the range (REG-FAIL) before anything changes.
    if (msync(addr, bytes, MS_ASYNC) != 0) {
        const int err = errno;
        return be::fail(inst, XMC_ERR_DRIVER, err, "reg_register",
                        "reg_register: [%p, +%zu) is not wholly mapped memory (msync: %s)", addr, bytes,
                        std::strerror(err));
    }
    if (mlock(addr, bytes) != 0) {
        const int err = errno;
        // REG-FAIL: a refused mlock is undone and nothing is recorded.
        unlock_outside_pins(a, bytes);  // mlock may have locked a part before failing
        struct rlimit lim{};
        getrlimit(RLIMIT_MEMLOCK, &lim);
        if (err == ENOMEM || err == EPERM)
            return be::fail(inst, XMC_ERR_MEMLOCK, err, "reg_register",
                            "reg_register: mlock of %zu bytes refused (%s): RLIMIT_MEMLOCK is %llu bytes", bytes,
                            std::strerror(err), static_cast<unsigned long long>(lim.rlim_cur));
        return be::fail(inst, XMC_ERR_DRIVER, err, "reg_register", "reg_register: mlock failed: %s",
                        std::strerror(err));
    }
    r.ranges[a] = Registration{bytes, device};
    // REG-IDENTITY: the device address is the host address itself.
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
    // A failed unlock (the caller unmapped the range) is reported and the
    // registration kept, so a retry can remove it (REG-UNREG-FAIL).
    if (unlock_outside_pins(a, it->second.size) != 0) {
        const int err = errno;
        return be::fail(inst, XMC_ERR_DRIVER, err, "reg_unregister",
                        "reg_unregister: munlock of [%p, +%zu) failed: %s; still registered", base,
                        it->second.size, std::strerror(err));
    }
    r.ranges.erase(it);
    return XMC_OK;
}

xmc_status reg_release_all(xmc_instance *inst, uint64_t *released) {
    RegRegistry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    // REG-CLOSE: every registration still held, as reg_unregister would. A
    // range the caller unmapped since (munlock: ENOMEM) holds no lock any
    // more: it is dropped, not kept for a retry that could never succeed.
    while (!r.ranges.empty()) {
        auto it = r.ranges.begin();
        if (unlock_outside_pins(it->first, it->second.size) != 0 && errno != ENOMEM) {
            const int err = errno;
            return be::fail(inst, XMC_ERR_DRIVER, err, "close",
                            "close: munlock of the registration [%p, +%zu) failed: %s; still registered",
                            reinterpret_cast<void *>(it->first), it->second.size, std::strerror(err));
        }
        r.ranges.erase(it);
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

} // namespace xmc::host
