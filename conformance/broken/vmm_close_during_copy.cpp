// xmc-selftest: fails VMM-CLOSE
// xmc-selftest: filter VMM-*
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 180
// Bug (seeds/004): close waits for the slot's requests to be handled but not
// for the copies into it to finish, and unmaps under a running copy.
#include "broken.hpp"

namespace xmc::broken {
void plant(xmc_backend &) { xmc::host::vmm_seams().close_skips_copy_wait = true; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_close_during_copy")
