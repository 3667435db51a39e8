// xmc-selftest: fails VMM-ASYNC-ERROR,VMM-BATCH-PARTIAL
// xmc-selftest: filter VMM-*
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 240
// Bug (VMM-BATCH-PARTIAL): a batch remap that fails at slot K undoes only slot K: the memory the
// worker mapped for the slots before it is never given back (leaked: the device's free memory
// stays lower), though those slots answer as released.
#include "broken.hpp"
#include "vmm.hpp"
#include "vmm_track.hpp"

namespace xmc::broken {
namespace {
std::mutex mu;
std::set<xmc_request *> leaked;

xmc_status leak(xmc_instance *, const broken_vmm::Failed &f, xmc_status st) {
    std::lock_guard<std::mutex> lock(mu);
    if (!f.remap || f.index <= 0 || !leaked.insert(f.r).second) return st;
    for (long i = 0; i < f.index && i < static_cast<long>(f.slots.size()); ++i)
        xmc::host::take_device_memory(f.slots[static_cast<size_t>(i)].size);
    return st;
}
} // namespace

void plant(xmc_backend &t) { broken_vmm::on_failed_wait(t, host(), leak); }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_batch_leaks_before_failure")
