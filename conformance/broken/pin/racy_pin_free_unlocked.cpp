// xmc-selftest: fails PIN-THREADS
// xmc-selftest: filter PIN-THREADS
// xmc-selftest: sanitize thread
// xmc-selftest: timeout 30
// Bug (race): free checks that the address is a live base and takes the block out of the index
// and the count without the registry's lock. Two threads freeing one block both pass the check
// (a double free reported as two successes), and the erase races every other thread's use of the
// index.
#include "broken.hpp"
#include "skip_lock.hpp"

namespace xmc::broken {
constexpr char kUnlocked[] = "pin_free";  // the bug: pin_free runs without the registry's lock
using Steps = broken_lock::SkipLock<kUnlocked>;
void plant(xmc_backend &) { be::PinRegistry::process().lock_steps = {Steps::lock, Steps::unlock}; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_racy_pin_free_unlocked")
