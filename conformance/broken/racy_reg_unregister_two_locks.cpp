// xmc-selftest: fails REG-THREADS
// xmc-selftest: filter REG-THREADS
// xmc-selftest: sanitize thread
// xmc-selftest: timeout 30
// Bug (race): unregister looks the range up under the index's lock, but releases
// the pages and erases the entry under the lock of the "driver" (a second mutex,
// the one the release call needs): the erase races registrations and lookups that
// hold the index's lock, and two unregisters of one range both find it and both
// succeed.
#include "reg_index.hpp"

namespace xmc::broken {
static std::mutex g_driver_mu;  // what the release "needs"; not the index's lock
static xmc_status reg_unregister(xmc_instance *inst, void *base) {
    RegIndex &x = RegIndex::get();
    size_t bytes = 0;
    {
        std::lock_guard<std::mutex> lock(x.mu);
        auto it = x.ranges.find(reinterpret_cast<uintptr_t>(base));
        if (it == x.ranges.end()) return not_registered(inst, base);
        bytes = it->second;
    }
    std::lock_guard<std::mutex> lock(g_driver_mu);
    munlock(base, bytes);
    x.ranges.erase(reinterpret_cast<uintptr_t>(base));  // the bug: under the driver's lock, not the index's
    return XMC_OK;
}
void plant(xmc_backend &t) {
    use_reg_index(t);
    t.reg_unregister = reg_unregister;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_racy_reg_unregister_two_locks")
