// Registration on the host (capability `register`, REG-*): page-locking of
// existing memory with mlock. The host's one device (0) sees host memory at
// the same address, so registration is an identity mapping by construction
// (REG-IDENTITY). The checks, the index and the close are
// reference/common/registration.cpp's; this file is the host's driver steps.
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

// REG-DEVICE: the host's one device is 0; any other is no device.
xmc_status check(xmc_instance *inst, int32_t device, uint32_t) {
    if (device != 0)
        return be::fail(inst, XMC_ERR_NO_DEVICE, 0, "reg_register",
                        "reg_register: no device %d (the host backend has device 0 only)", device);
    return XMC_OK;
}

xmc_status context(xmc_instance *, const char *, int32_t, void **ctx) {
    *ctx = nullptr;  // the host has no contexts
    return XMC_OK;
}

xmc_status make(xmc_instance *inst, const char *call, void *, void *addr, size_t bytes, int32_t, uint32_t,
                int64_t *native) {
    // msync answers ENOMEM when part of the range is not mapped: the kernel,
    // the host's "driver", rejects the range (REG-FAIL) before anything changes.
    if (msync(addr, bytes, MS_ASYNC) != 0) {
        const int err = *native = errno;
        return be::fail(inst, XMC_ERR_DRIVER, err, call, "%s: [%p, +%zu) is not wholly mapped memory (msync: %s)",
                        call, addr, bytes, std::strerror(err));
    }
    if (mlock(addr, bytes) == 0) return XMC_OK;
    const int err = *native = errno;
    // REG-FAIL: a refused mlock is undone and nothing is recorded.
    unlock_outside_pins(reinterpret_cast<uintptr_t>(addr), bytes);  // mlock may have locked a part before failing
    struct rlimit lim{};
    getrlimit(RLIMIT_MEMLOCK, &lim);
    if (err == ENOMEM || err == EPERM)
        return be::fail(inst, XMC_ERR_MEMLOCK, err, call,
                        "%s: mlock of %zu bytes refused (%s): RLIMIT_MEMLOCK is %llu bytes", call, bytes,
                        std::strerror(err), static_cast<unsigned long long>(lim.rlim_cur));
    return be::fail(inst, XMC_ERR_DRIVER, err, call, "%s: mlock failed: %s", call, std::strerror(err));
}

// A failed unlock (the caller unmapped the range) keeps the registration, so a
// retry can remove it (REG-UNREG-FAIL).
int64_t release(const char *, void *, void *, void *addr, size_t bytes) {
    return unlock_outside_pins(reinterpret_cast<uintptr_t>(addr), bytes) == 0 ? 0 : (errno ? errno : EINVAL);
}

const char *native_name(int64_t err) { return std::strerror(static_cast<int>(err)); }
void idle() {}
// The last close: a range the caller unmapped since (munlock: ENOMEM) holds no lock any more.
bool gone(int64_t err) { return err == ENOMEM; }

} // namespace

be::Registrations &registrations() {
    static be::Registrations r(be::RegOps{"munlock", {XMC_REG_LARGE_NO_LIMIT, 0}, check, context, make, release,
                                          native_name, idle, gone, be::reg_lock, be::reg_unlock});
    return r;  // one per library, whatever the instances
}

XMC_REGISTRATION_ENTRIES(registrations)

xmc_status reg_release_all(xmc_instance *inst, uint64_t *released) {
    return registrations().release_all(inst, released);
}

} // namespace xmc::host
