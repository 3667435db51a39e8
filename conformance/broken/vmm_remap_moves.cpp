// xmc-selftest: fails VMM-STABLE,VMM-UNMAPPED-FAULTS,VMM-REMAP-COPY,VMM-DEFERRED,VMM-STATE,VMM-BATCH,VMM-CLOSE,VMM-ADOPT,VMM-SERIAL,VMM-ASYNC-ERROR,VMM-CALLBACK,VMM-EVENT-WAIT
// xmc-selftest: filter VMM-*
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 180
// Bug (issue 6): a remap maps the slot's fresh memory wherever the allocator
// puts it instead of at the slot's own address, so the address a captured
// graph holds points at a released range after the first release and remap.
// A slot that moves breaks every requirement whose test reads the slot at its
// address after a remap (only VMM-CREATE and VMM-RELEASE-ORDER never remap);
// VMM-STABLE is the one that names it.
#include "broken.hpp"

namespace xmc::broken {
void plant(xmc_backend &) { xmc::host::vmm_seams().remap_moves_slot = true; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_remap_moves")
