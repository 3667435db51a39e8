// xmc-selftest: fails PIN-FAIL-CLEAN
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 60
// Bug: an out-of-memory refusal is recorded as the pool's pending error and
// never cleared until reported: the next allocation, on whichever thread,
// answers that stale error instead of its own success (an error that sticks
// to the next request).
#include "broken.hpp"
#include "pool_broken.hpp"

namespace xmc::broken {
void plant(xmc_backend &t) {
    broken_pool::plant_bug(t, broken_pool::Method::Mlock, &broken_pool::Bugs::refusal_sticks);
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_pool_refusal_sticks")
