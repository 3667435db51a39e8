// xmc-selftest: fails PIN-FAIL-CLEAN
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 60
// Bug: the pinned pool rounds a request up to its power-of-two size class;
// above 2^63 the rounding wraps to 0, the class index it gives (64) is past
// the last free list, and an assertion aborts the process instead of
// refusing the size.
#include "broken.hpp"
#include "pool_broken.hpp"

namespace xmc::broken {
void plant(xmc_backend &t) {
    broken_pool::plant_bug(t, broken_pool::Method::Mlock, &broken_pool::Bugs::abort_on_wrapped_size_class);
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_pool_aborts_on_huge")
