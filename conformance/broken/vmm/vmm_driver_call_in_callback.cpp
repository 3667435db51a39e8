// xmc-selftest: fails VMM-CALLBACK
// xmc-selftest: filter VMM-*
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 180
// Bug: the stream's host callback does the release or remap itself (the
// driver calls, and the wait for a release the remap depends on) instead of
// handing it to a worker. A real driver may refuse those calls
// (CUDA_ERROR_NOT_PERMITTED); where it does not, the stream is held.
#include "broken.hpp"
#include "vmm_steps.hpp"

namespace xmc::broken {
using namespace xmc::host;
// On the stream's callback thread: waits until the request is ready and runs it there.
static void work_in_callback(xmc_instance *inst, const std::shared_ptr<Vmm> &vp, const std::shared_ptr<Request> &r) {
    Vmm &v = *vp;
    std::unique_lock<std::mutex> lock(v.mu);
    r->fired = true;
    v.cv.wait(lock, [&] { return be::ready(*r); });
    be::run_request(inst, v, r);
}
void plant(xmc_backend &) { broken_vmm::host_steps().point_reached = work_in_callback; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_driver_call_in_callback")
