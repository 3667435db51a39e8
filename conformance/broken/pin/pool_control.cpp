// xmc-selftest: fails none
// xmc-selftest: filter PIN-*
// xmc-selftest: timeout 60
// The pinned pool of pool_broken.hpp over the host (mlock), with no bug
// planted: the base of the pool bugs, which the suite must pass (a check that
// fails a correct pool would be a defect of the suite, and would make the
// pool bugs' self-tests prove nothing).
#include "broken.hpp"
#include "pool_broken.hpp"

namespace xmc::broken {
void plant(xmc_backend &t) { broken_pool::use_pool(t, broken_pool::Method::Mlock, true); }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_pool_control")
