// xmc-selftest: fails REG-UNREG-FAIL,REG-REUSE
// xmc-selftest: base level_zero
// xmc-selftest: filter [PR][IE][NG]-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 120
// Bug: unregister discards zeMemFree's result and
// reports success, so the caller frees pages the driver still maps.
#include "ze_broken.hpp"

namespace xmc::broken_ze {
using namespace xmc::ze;

static xmc_status reg_unregister(xmc_instance *inst, void *base) {
    RegRegistry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.ranges.find(reinterpret_cast<uintptr_t>(base));
    if (it == r.ranges.end() || it->second.pinned)
        return be::fail(inst, XMC_ERR_NOT_REGISTERED, 0, "reg_unregister", "reg_unregister: %p is not a registered base", base);
    Driver &d = Driver::get();
    d.zeMemFree(it->second.ctx, base);  // the bug: the result is ignored
    r.ranges.erase(it);
    {
        std::lock_guard<std::mutex> dl(d.mu);
        --d.registrations;
    }
    d.release_if_idle();
    return XMC_OK;
}

void plant(xmc_backend &t) { t.reg_unregister = reg_unregister; }
} // namespace xmc::broken_ze
XMC_BROKEN_ZE_BACKEND("broken_ze_unreg_ignores_free_failure")
