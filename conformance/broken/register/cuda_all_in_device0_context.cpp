// xmc-selftest: fails REG-DEVICE,REG-UUID
// xmc-selftest: base cuda
// xmc-selftest: filter [PR][IE][NG]-*
// xmc-selftest: timeout 10
// xmc-selftest: devices 2
// xmc-selftest: ctest-timeout 120
// Bug (on CUDA): every range is registered in the
// first device's context, whatever device it is for (one cached context for
// the process). The driver maps registrations for every context here, so
// copies still work; but the registration lives in device 0's context, not
// in one of device d (REG-DEVICE), and is served by the device with another
// UUID than device_info(d) gives (REG-UUID).
#include "cuda_broken.hpp"
#include "reg_steps.hpp"

namespace xmc::broken_cuda {
static xmc_status device0_context(xmc_instance *inst, const char *call, int32_t, void **ctx) {
    return broken_reg::real().context(inst, call, 0, ctx);  // the bug: always device 0's
}
void plant(xmc_backend &) { broken_reg::steps(xmc::cuda::registrations()).context = device0_context; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_all_in_device0_context")
