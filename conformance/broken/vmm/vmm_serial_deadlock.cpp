// xmc-selftest: fails VMM-SERIAL
// xmc-selftest: filter VMM-*
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 180
// Bug: in serial-driver mode the one worker takes a remap whose
// release has not reached it yet and waits for that release, which only the
// same worker could run: deadlock.
#include "broken.hpp"
#include "vmm_steps.hpp"

namespace xmc::broken {
using namespace xmc::host;
// The worker loop, but in serial mode it takes the first request queued and
// waits for it to become ready, holding the queue, instead of passing over it
// to one that is ready.
static void serial_blocks(xmc_instance *inst, Vmm *v) {
    std::unique_lock<std::mutex> lock(v->mu);
    for (;;) {
        std::shared_ptr<Request> r;
        if (v->workers == 1 && !v->jobs.empty()) {
            r = v->jobs.front();
            v->jobs.pop_front();
            v->cv.wait(lock, [&] { return be::ready(*r); });
        } else if (!(r = be::take_ready(*v))) {
            if (v->stop && v->jobs.empty()) return;
            v->cv.wait(lock);
            continue;
        }
        be::run_request(inst, *v, r);
    }
}
void plant(xmc_backend &) { broken_vmm::host_steps().worker = serial_blocks; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_serial_deadlock")
