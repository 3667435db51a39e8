// xmc-selftest: fails PIN-FAIL-CLEAN
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 60
// Bug: when an allocation is refused for want of memory, the pinned pool's
// error path returns with the pool's (recursive) lock still held once: the
// failing thread goes on, every other thread's next call blocks for good.
#include "broken.hpp"
#include "pool_broken.hpp"

namespace xmc::broken {
void plant(xmc_backend &t) {
    broken_pool::plant_bug(t, broken_pool::Method::Mlock, &broken_pool::Bugs::refusal_keeps_lock);
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_pool_refusal_keeps_lock")
