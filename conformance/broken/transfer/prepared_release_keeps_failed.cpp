// xmc-selftest: fails AFF-PREPARED-RELEASE
// xmc-selftest: filter AFF-PREPARED-*
// xmc-selftest: timeout 60
// Bug: release after a failed run reports success but keeps the prepared transfer and what it
// holds (the error path forgets to close it), so the handle still runs and the instance still
// holds it at close.
#include "broken.hpp"
#include "transfer_steps.hpp"

namespace xmc::broken {
namespace {
bool keeps_failed(xmc_instance *inst, transfer::Prepared *p) {
    if (transfer::prepared_live(inst, p) && p->failed_runs > 0) return true;
    return broken_transfer::real().release(inst, p);
}
} // namespace
void plant(xmc_backend &) { broken_transfer::steps().release = keeps_failed; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_prepared_release_keeps_failed")
