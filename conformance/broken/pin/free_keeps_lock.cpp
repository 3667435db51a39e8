// xmc-selftest: fails PIN-AFTER-FREE
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 5
// xmc-selftest: needs-mlock
// Bug: free forgets munlock, so the pages of a freed block stay locked.
#include "broken.hpp"

#include <sys/mman.h>

namespace xmc::broken {
static xmc_status pin_free(xmc_instance *inst, void *p) {
    xmc_pin_info q{};
    host()->pin_query(inst, p, 1, &q);
    xmc_status st = host()->pin_free(inst, p);
    if (st == XMC_OK && q.pinned) mlock(q.base, q.size);  // what a free without munlock leaves
    return st;
}
void plant(xmc_backend &t) { t.pin_free = pin_free; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_free_keeps_lock")
