// xmc-selftest: fails REG-UNREG-FAIL,REG-REUSE
// xmc-selftest: base level_zero
// xmc-selftest: filter [PR][IE][NG]-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 120
// Bug: unregister discards zeMemFree's result and
// reports success, so the caller frees pages the driver still maps.
#include "ze_broken.hpp"
#include "reg_steps.hpp"

namespace xmc::broken_ze {
static int64_t release(const char *call, void *ctx, void *base, void *chunk, size_t bytes) {
    const int64_t res = broken_reg::real().release(call, ctx, base, chunk, bytes);
    return broken_reg::is(call, "reg_unregister") ? 0 : res;  // the bug: zeMemFree's result ignored
}
void plant(xmc_backend &) { broken_reg::steps(xmc::ze::registrations()).release = release; }
} // namespace xmc::broken_ze
XMC_BROKEN_ZE_BACKEND("broken_ze_unreg_ignores_free_failure")
