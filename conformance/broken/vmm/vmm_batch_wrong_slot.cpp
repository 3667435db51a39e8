// xmc-selftest: fails VMM-BATCH-PARTIAL
// xmc-selftest: filter VMM-*
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 240
// Bug (VMM-BATCH-PARTIAL): a batch whose driver work fails at slot K reports the failure at its
// first slot, whichever slot failed (the worker's loop index was lost on the way to the request).
#include "broken.hpp"
#include "vmm_track.hpp"

#include <string>

namespace xmc::broken {
namespace {
xmc_status name_first(xmc_instance *inst, const broken_vmm::Failed &f, xmc_status st) {
    if (f.index <= 0) return st;
    xmc_error_info e{};
    host()->last_error(inst, &e);
    std::string msg = e.message;
    const size_t at = msg.find("(batch index ");
    msg = msg.substr(0, at) + "(batch index 0)" + msg.substr(msg.find(')', at) + 1);
    return be::fail(inst, e.status, e.native_code, "request_wait", "%s", msg.c_str());
}
} // namespace

void plant(xmc_backend &t) { broken_vmm::on_failed_wait(t, host(), name_first); }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_batch_wrong_slot")
