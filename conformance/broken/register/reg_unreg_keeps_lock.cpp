// xmc-selftest: fails REG-REUSE
// xmc-selftest: filter REG-*
// xmc-selftest: timeout 60
// xmc-selftest: needs-mlock
// Bug: unregister forgets the driver release. The registration is dropped
// from the backend's records, but the host's "driver mapping" (the pages'
// mlock) is left in place, so after the caller frees and reuses the memory
// the kernel still holds a lock nobody reports.
#include "broken.hpp"
#include "reg_steps.hpp"

namespace xmc::broken {
static int64_t release(const char *call, void *ctx, void *base, void *chunk, size_t bytes) {
    if (broken_reg::is(call, "reg_unregister")) return 0;  // the bug: munlock never called
    return broken_reg::real().release(call, ctx, base, chunk, bytes);
}
void plant(xmc_backend &) { broken_reg::steps(xmc::host::registrations()).release = release; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_reg_unreg_keeps_lock")
