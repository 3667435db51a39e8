// xmc-selftest: fails VMM-CLOSE
// xmc-selftest: filter VMM-*
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 180
// Bug: close waits for the slot's requests to be handled but not
// for the copies into it to finish, and unmaps under a running copy.
#include "broken.hpp"
#include "vmm_steps.hpp"

namespace xmc::broken {
using namespace xmc::host;
static void wait_for_requests_only(Vmm &v, std::unique_lock<std::mutex> &lock, Slot &s) {
    v.cv.wait(lock, [&] { return s.jobs == 0; });  // s.copies is not waited for
}
void plant(xmc_backend &) { broken_vmm::host_steps().close_wait = wait_for_requests_only; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_close_during_copy")
