// xmc-selftest: fails VMM-SERIAL
// xmc-selftest: filter VMM-*
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 180
// Bug (seeds/004): in serial-driver mode the one worker takes a remap whose
// release has not reached it yet and waits for that release, which only the
// same worker could run: deadlock.
#include "broken.hpp"

namespace xmc::broken {
void plant(xmc_backend &) { xmc::host::vmm_seams().serial_remap_blocks_worker = true; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_serial_deadlock")
