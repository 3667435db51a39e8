// xmc-selftest: fails PIN-AFTER-FREE,PIN-POOL,PIN-REFS
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 60
// xmc-selftest: needs-mlock
// Bug: releasing the pool walks its free list one block short: the newest
// pooled block leaves the list and the pool's figures, but is never unlocked
// or freed, so its pages stay pinned for good. Every check of a freed block's
// pages after the release sees it: PIN-AFTER-FREE's and PIN-REFS' (their lock rule after the
// release) as well as PIN-POOL's. (The last close empties the
// pool by another, correct walk.)
#include "broken.hpp"
#include "pool_broken.hpp"

namespace xmc::broken {
void plant(xmc_backend &t) {
    broken_pool::plant_bug(t, broken_pool::Method::Mlock, &broken_pool::Bugs::release_misses_newest);
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_pool_release_keeps_pinned")
