// xmc-selftest: fails VMM-ASYNC-ERROR,VMM-BATCH-PARTIAL
// xmc-selftest: filter VMM-*
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 240
// Bug (VMM-BATCH-PARTIAL): a batch whose driver work fails past its first slot reports a driver
// error without the driver's code (native code 0), in the wait and in the query alike.
#include "broken.hpp"
#include "vmm_track.hpp"

namespace xmc::broken {
namespace {
std::mutex mu;
std::set<xmc_request *> coded_out;

xmc_status drop_code(xmc_instance *inst, const broken_vmm::Failed &f, xmc_status st) {
    if (f.index <= 0) return st;
    {
        std::lock_guard<std::mutex> lock(mu);
        coded_out.insert(f.r);
    }
    xmc_error_info e{};
    host()->last_error(inst, &e);
    return be::fail(inst, e.status, 0, "request_wait", "%s", e.message);
}

xmc_status query(xmc_instance *inst, xmc_request *r, xmc_request_info *out) {
    const xmc_status st = host()->request_query(inst, r, out);
    std::lock_guard<std::mutex> lock(mu);
    if (st == XMC_OK && coded_out.count(r)) out->native_code = 0;
    return st;
}
} // namespace

void plant(xmc_backend &t) {
    broken_vmm::on_failed_wait(t, host(), drop_code);
    t.request_query = query;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_batch_no_code")
