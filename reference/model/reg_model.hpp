// The registration oracle (SPEC 5, REG-DOUBLE, REG-UNREG-BASE, REG-ALIGN,
// REG-DEVICE's device range, and 0.2's REG-REUSE, REG-LARGE and REG-ARGS): a pure state machine over byte offsets into one
// arena of pageable memory. For any operation it says the status the backend
// must answer and the next state. It never touches memory.
#pragma once
#include <xmc/backend.h>

#include <cstddef>
#include <cstdint>
#include <map>

namespace xmc::model {

// REG-THREADS: each thread's disjoint ranges follow this machine alone (the test
// gives each thread its own model).
struct RegModel {
    struct Range {
        size_t size = 0;
        int32_t device = 0;
    };
    xmc_reg_align_policy policy = XMC_REG_ALIGN_REFUSE;
    xmc_reg_large_policy large = XMC_REG_LARGE_NO_LIMIT;  // REG-LARGE, as reg_large_policy declares
    size_t limit = 0;                                      // its limit (0: none)
    size_t page = 4096;
    int32_t devices = 1;
    std::map<size_t, Range> live;  // by recorded base offset

    // The range [off, off+n) would be recorded as; false under REFUSE when unaligned.
    bool recorded(size_t off, size_t n, size_t *base, size_t *size) const;
    // Register [off, off+n) for `device` (flags 0).
    xmc_status reg(size_t off, size_t n, int32_t device);
    // Unregister: exactly a recorded base.
    xmc_status unreg(size_t off);
    // The recorded base of the range holding off, or -1.
    long long holder(size_t off) const;
    // REG-REUSE: the caller frees [off, off+n) and maps it again at the same
    // address. Allowed only where nothing is registered (freeing registered
    // memory is the caller's error, which the suite never makes); nothing
    // recorded changes, and the range registers again like any fresh memory.
    bool reuse(size_t off, size_t n) const;
    // REG-LARGE: the driver registrations a recorded range of `size` bytes is
    // made of (split: one per chunk; else one). They are one registration to
    // reg, unreg and holder.
    size_t driver_calls(size_t size) const;
};

} // namespace xmc::model
