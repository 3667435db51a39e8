// xmc-selftest: fails PIN-DEVICE
// xmc-selftest: base cuda
// xmc-selftest: filter PIN-DEVICE
// xmc-selftest: timeout 60
// Bug (on CUDA): with no driver, a pinned block asked to be registered comes back lock-only with
// an invented driver error (XMC_ERR_DRIVER, native CUDA_ERROR_NOT_INITIALIZED) instead of
// unsupported: a caller that retries on driver errors retries forever, and a report blames a
// driver that was never there.
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {
static xmc_status pin_alloc(xmc_instance *inst, size_t bytes, size_t alignment, int32_t device, xmc_pin_result *out) {
    const xmc_status st = reference()->pin_alloc(inst, bytes, alignment, device, out);
    if (st == XMC_OK && out->reg_status == XMC_ERR_UNSUPPORTED && !xmc::cuda::Driver::get().usable) {
        out->reg_status = XMC_ERR_DRIVER;  // the bug: a driver error nobody answered
        out->reg_native_code = CUDA_ERROR_NOT_INITIALIZED;
    }
    return st;
}
void plant(xmc_backend &t) { t.pin_alloc = pin_alloc; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_no_driver_invented_code")
