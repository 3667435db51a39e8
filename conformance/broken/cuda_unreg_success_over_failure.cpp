// xmc-selftest: fails REG-UNREG-FAIL,REG-REUSE,REG-CLOSE
// xmc-selftest: base cuda
// xmc-selftest: filter [PR][IE][NG]-*
// xmc-selftest: timeout 10
// xmc-selftest: ctest-timeout 120
// Bug (on CUDA): unregister ignores a failed
// cuMemHostUnregister, drops the registration and reports success, so the
// caller frees pages the driver still maps, and the last close does not release what the driver
// kept (REG-CLOSE: the entry is gone).
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {

static xmc_status reg_unregister(xmc_instance *inst, void *base) {
    return unregister_with(inst, base, [](CUresult) { return false; });  // the bug: never reported
}

void plant(xmc_backend &t) {
    own_registrations(t);
    t.reg_unregister = reg_unregister;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_unreg_success_over_failure")
