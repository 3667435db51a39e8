// xmc-selftest: fails REG-REUSE
// xmc-selftest: filter REG-*
// xmc-selftest: timeout 60
// xmc-selftest: needs-mlock
// Bug: unregister forgets the driver release. The registration is dropped
// from the backend's records, but the host's "driver mapping" (the pages'
// mlock) is left in place, so after the caller frees and reuses the memory
// the kernel still holds a lock nobody reports.
#include "broken.hpp"

#include <sys/mman.h>

namespace xmc::broken {
static xmc_status reg_unregister(xmc_instance *inst, void *base) {
    xmc_reg_info q{};
    host()->reg_query(inst, base, &q);
    const xmc_status st = host()->reg_unregister(inst, base);
    // The bug: the release is undone (as if never made) for what was a registration.
    if (st == XMC_OK && q.registered && q.base == base) mlock(q.base, q.size);
    return st;
}
void plant(xmc_backend &t) { t.reg_unregister = reg_unregister; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_reg_unreg_keeps_lock")
