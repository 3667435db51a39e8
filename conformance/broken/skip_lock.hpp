// The lock of the race bugs (pin/racy_pin_alloc_unlocked, pin/racy_pin_free_unlocked,
// register/racy_reg_register_unlocked): every entry point takes the lock as the reference does
// but `Call`, which runs without it. The pin registry's LockSteps and the registration index's
// RegOps lock/unlock both take these two.
#pragma once
#include <cstring>
#include <mutex>

namespace xmc::broken_lock {

template <const char *Call> struct SkipLock {
    static void lock(std::mutex &mu, const char *call) {
        if (std::strcmp(call, Call) != 0) mu.lock();
    }
    static void unlock(std::mutex &mu, const char *call) {
        if (std::strcmp(call, Call) != 0) mu.unlock();
    }
};

} // namespace xmc::broken_lock
