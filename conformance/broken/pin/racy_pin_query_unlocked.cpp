// xmc-selftest: fails PIN-THREADS
// xmc-selftest: filter PIN-THREADS
// xmc-selftest: sanitize thread
// xmc-selftest: timeout 30
// Bug (race): query searches the index without the registry's lock ("a read changes nothing"),
// while allocations and frees insert and erase: the search reads a vector being moved and
// answers from a block that is gone or misses one that is live.
#include "broken.hpp"

#include <cstring>

namespace xmc::broken {
// The bug: pin_query runs without the registry's lock.
static void lock(std::mutex &mu, const char *call) {
    if (std::strcmp(call, "pin_query") != 0) mu.lock();
}
static void unlock(std::mutex &mu, const char *call) {
    if (std::strcmp(call, "pin_query") != 0) mu.unlock();
}
void plant(xmc_backend &) { be::PinRegistry::process().lock_steps = {lock, unlock}; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_racy_pin_query_unlocked")
