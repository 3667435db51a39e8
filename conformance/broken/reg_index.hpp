// The registration index of the racy self-test backends (racy_reg_*.cpp): the host's
// registration (mlock of existing pages, device 0, alignment policy refuse), kept the
// plain way, every change and every read under one lock. Each racy_reg_*.cpp puts
// back one entry of its own that breaks the locking: a race that REG-THREADS must
// catch without ThreadSanitizer (in at least 19 of 20 runs) and with it (every run).
#pragma once
#include "broken.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <thread>

namespace xmc::broken {

struct RegIndex {
    std::mutex mu;
    std::map<uintptr_t, size_t> ranges;  // base -> bytes

    static RegIndex &get() {
        static RegIndex index;
        return index;
    }
    // True when [a, a+n) overlaps a recorded range. Caller holds mu.
    bool overlaps(uintptr_t a, size_t n) {
        auto it = ranges.lower_bound(a + n);
        if (it == ranges.begin()) return false;
        --it;
        return it->first + it->second > a;
    }
};

// The refusals that need no index (REG-ALIGN, REG-DEVICE), as the host's.
inline xmc_status check_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                                 xmc_reg_info *out) {
    const size_t page = be::PinRegistry::page_size();
    const auto a = reinterpret_cast<uintptr_t>(addr);
    if (!out || !addr || bytes == 0 || flags != 0 || a % page != 0 || bytes % page != 0 || a > UINTPTR_MAX - bytes)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: invalid range or arguments");
    if (device != 0)
        return be::fail(inst, XMC_ERR_NO_DEVICE, 0, "reg_register", "reg_register: no device %d", device);
    return XMC_OK;
}

inline xmc_status lock_pages(xmc_instance *inst, void *addr, size_t bytes) {
    if (mlock(addr, bytes) == 0) return XMC_OK;
    const int err = errno;
    return be::fail(inst, err == ENOMEM || err == EPERM ? XMC_ERR_MEMLOCK : XMC_ERR_DRIVER, err, "reg_register",
                    "reg_register: mlock failed");
}

inline xmc_status already(xmc_instance *inst, void *addr) {
    return be::fail(inst, XMC_ERR_ALREADY_REGISTERED, 0, "reg_register", "reg_register: %p overlaps a registered range",
                    addr);
}

inline xmc_status not_registered(xmc_instance *inst, void *base) {
    return be::fail(inst, XMC_ERR_NOT_REGISTERED, 0, "reg_unregister", "reg_unregister: %p is not a registered base",
                    base);
}

inline xmc_status index_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                                 xmc_reg_info *out) {
    if (xmc_status st = check_register(inst, addr, bytes, device, flags, out); st != XMC_OK) return st;
    const auto a = reinterpret_cast<uintptr_t>(addr);
    RegIndex &x = RegIndex::get();
    std::lock_guard<std::mutex> lock(x.mu);  // over the check and the insert
    if (x.overlaps(a, bytes)) return already(inst, addr);
    if (xmc_status st = lock_pages(inst, addr, bytes); st != XMC_OK) return st;
    x.ranges[a] = bytes;
    *out = xmc_reg_info{1, addr, bytes, device};
    return XMC_OK;
}

inline xmc_status index_unregister(xmc_instance *inst, void *base) {
    RegIndex &x = RegIndex::get();
    std::lock_guard<std::mutex> lock(x.mu);
    auto it = x.ranges.find(reinterpret_cast<uintptr_t>(base));
    if (it == x.ranges.end()) return not_registered(inst, base);
    munlock(base, it->second);
    x.ranges.erase(it);
    return XMC_OK;
}

inline xmc_status index_reg_query(xmc_instance *inst, const void *addr, xmc_reg_info *out) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_query", "reg_query: result pointer is NULL");
    *out = xmc_reg_info{};
    out->device = XMC_NO_DEVICE;
    const auto a = reinterpret_cast<uintptr_t>(addr);
    RegIndex &x = RegIndex::get();
    std::lock_guard<std::mutex> lock(x.mu);
    auto it = x.ranges.upper_bound(a);
    if (it == x.ranges.begin()) return XMC_OK;
    --it;
    if (a - it->first < it->second) *out = xmc_reg_info{1, reinterpret_cast<void *>(it->first), it->second, 0};
    return XMC_OK;
}

// The table with the index's registration; the racy file then replaces one entry.
inline void use_reg_index(xmc_backend &t) {
    t.reg_register = index_register;
    t.reg_unregister = index_unregister;
    t.reg_query = index_reg_query;
}

} // namespace xmc::broken
