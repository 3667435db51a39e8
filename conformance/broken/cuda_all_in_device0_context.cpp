// xmc-selftest: fails REG-DEVICE,REG-UUID
// xmc-selftest: base cuda
// xmc-selftest: filter [PR][IE][NG]-*
// xmc-selftest: timeout 10
// xmc-selftest: ctest-timeout 120
// Bug (on CUDA): every range is registered in the
// first device's context, whatever device it is for (one cached context for
// the process). The driver maps registrations for every context here, so
// copies still work; but the registration lives in device 0's context, not
// in one of device d (REG-DEVICE), and is served by the device with another
// UUID than device_info(d) gives (REG-UUID).
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {

static xmc_status reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                               xmc_reg_info *out) {
    return register_with(inst, addr, bytes, device, flags, out, [](int32_t) { return 0; });  // the bug: always 0
}

void plant(xmc_backend &t) {
    own_registrations(t);
    t.reg_register = reg_register;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_all_in_device0_context")
