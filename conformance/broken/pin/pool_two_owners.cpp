// xmc-selftest: fails PIN-POOL
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 60
// Bug: the pinned pool hands a large block (1 MiB and up) out of its free
// list without taking it off the list, so the next request of that size gets
// the same block while its first owner still uses it: one block, two owners,
// each writing over the other's data.
#include "broken.hpp"
#include "pool_broken.hpp"

namespace xmc::broken {
void plant(xmc_backend &t) {
    broken_pool::plant_bug(t, broken_pool::Method::Mlock, &broken_pool::Bugs::large_handout_stays_listed);
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_pool_two_owners")
