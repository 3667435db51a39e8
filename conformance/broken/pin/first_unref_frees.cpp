// xmc-selftest: fails PIN-REFS
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 5
// Bug (seed 001): the block is released when the first reference is dropped
// instead of the last, so a live view outlives the freed block.
#include "broken.hpp"

namespace xmc::broken {
static xmc_status pin_unref(xmc_instance *inst, const void *p) {
    xmc_status st = host()->pin_unref(inst, p);
    if (st != XMC_OK) return st;
    xmc_pin_info q{};
    host()->pin_query(inst, p, 1, &q);
    if (!q.pinned) return st;
    while (host()->pin_unref(inst, q.base) == XMC_OK) {}  // drop every other reference
    host()->pin_free(inst, q.base);                        // and the owner's
    return st;
}
void plant(xmc_backend &t) { t.pin_unref = pin_unref; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_first_unref_frees")
