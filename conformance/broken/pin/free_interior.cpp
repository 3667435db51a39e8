// xmc-selftest: fails PIN-FREE
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 5
// xmc-selftest: quick
// Bug (seed 001): the free is tied to whatever pointer the caller holds, so a
// free through an interior pointer (a view) releases the whole allocation.
#include "broken.hpp"

namespace xmc::broken {
static xmc_status pin_free(xmc_instance *inst, void *p) {
    xmc_pin_info q{};
    host()->pin_query(inst, p, 1, &q);
    return host()->pin_free(inst, q.pinned ? q.base : p);
}
void plant(xmc_backend &t) { t.pin_free = pin_free; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_free_interior")
