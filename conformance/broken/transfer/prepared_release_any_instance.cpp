// xmc-selftest: fails AFF-PREPARED-RELEASE
// xmc-selftest: filter AFF-PREPARED-*
// xmc-selftest: timeout 60
// Bug: release takes any live prepared transfer of the library, whichever instance prepared it,
// so a caller holding another instance (a second framework in one process) frees a transfer
// that its owner still runs. Here the release step never looks at the instance.
#include "broken.hpp"
#include "transfer_steps.hpp"

namespace xmc::broken {
namespace {
bool any_instance(xmc_instance *, transfer::Prepared *p) {
    xmc_instance *owner = transfer::prepared_owner(p);  // (NULL unless p is live)
    return owner && broken_transfer::real().release(owner, p);
}
} // namespace
void plant(xmc_backend &) { broken_transfer::steps().release = any_instance; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_prepared_release_any_instance")
