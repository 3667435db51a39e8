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

namespace xmc::broken {
void plant(xmc_backend &) { xmc::host::vmm_seams().work_on_callback_thread = true; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_driver_call_in_callback")
