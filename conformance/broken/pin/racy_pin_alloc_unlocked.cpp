// xmc-selftest: fails PIN-THREADS
// xmc-selftest: filter PIN-THREADS
// xmc-selftest: sanitize thread
// xmc-selftest: timeout 30
// Bug (race): an allocation inserts its block into the index and adds its bytes to the count
// without the registry's lock ("the insert is the cheap part"). Another thread's insert or erase
// in between moves the block's place: it lands out of order and binary searches miss it (a live
// block reported not pinned), or the index is reallocated under the insert; the count loses
// updates.
#include "broken.hpp"
#include "skip_lock.hpp"

namespace xmc::broken {
constexpr char kUnlocked[] = "pin_alloc";  // the bug: pin_alloc runs without the registry's lock
using Steps = broken_lock::SkipLock<kUnlocked>;
void plant(xmc_backend &) { be::PinRegistry::process().lock_steps = {Steps::lock, Steps::unlock}; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_racy_pin_alloc_unlocked")
