// xmc-selftest: fails VMM-ASYNC-ERROR,VMM-BATCH-PARTIAL
// xmc-selftest: filter VMM-*
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 240
// Bug (VMM-BATCH-PARTIAL): a batch remap that fails at slot K undoes only slot K: the memory the
// worker mapped for the slots before it is never given back (leaked: the device's free memory
// stays lower), though those slots answer as released.
#include "broken.hpp"
#include "vmm_steps.hpp"
#include "vmm_track.hpp"

namespace xmc::broken {
namespace {
std::mutex mu;
std::set<xmc_request *> leaked;

xmc_status wait(xmc_instance *inst, xmc_request *r, uint32_t ms) {
    const xmc_status st = broken_vmm::rec_wait(inst, r, ms);
    if (st == XMC_OK || st == XMC_ERR_TIMEOUT) return st;
    bool remap = false;
    const std::vector<xmc_slot_info> slots = broken_vmm::slots_of(r, &remap);
    const long k = broken_vmm::failed_index(host(), inst);
    std::lock_guard<std::mutex> lock(mu);
    if (!remap || k <= 0 || !leaked.insert(r).second) return st;
    for (long i = 0; i < k && i < static_cast<long>(slots.size()); ++i) xmc::host::take_device_memory(slots[i].size);
    return st;
}
} // namespace

void plant(xmc_backend &t) {
    broken_vmm::record_calls(t, host());
    t.request_wait = wait;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_batch_leaks_before_failure")
