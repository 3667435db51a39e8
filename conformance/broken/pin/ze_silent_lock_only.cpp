// xmc-selftest: fails PIN-DEVICE,REG-FAIL,REG-UNAVAILABLE
// xmc-selftest: base level_zero
// xmc-selftest: filter [PR][IE][NG]-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 120
// Bug: when zeMemAllocHost rejects a range, the
// registration silently degrades: reg_register answers success with nothing
// registered, and a pinned block asked to be registered comes back lock-only
// with no reason and no driver code.
#include "ze_broken.hpp"
#include "silent_lock_only.hpp"

namespace xmc::broken_ze {
void plant(xmc_backend &t) { broken_silent::plant<reference>(t); }
} // namespace xmc::broken_ze
XMC_BROKEN_ZE_BACKEND("broken_ze_silent_lock_only")
