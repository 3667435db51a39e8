// xmc-selftest: fails PIN-DEVICE,REG-DOUBLE,REG-FAIL,REG-UNAVAILABLE,REG-LARGE
// xmc-selftest: base cuda
// xmc-selftest: filter [PR][IE][NG]-*
// xmc-selftest: timeout 10
// xmc-selftest: ctest-timeout 120
// Bug (on CUDA): when cuMemHostRegister rejects a
// range, the registration silently degrades: reg_register answers success
// with nothing registered, and a pinned block asked to be registered comes
// back lock-only with no reason and no driver code. On CUDA the driver also
// answers "already registered" (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, for
// a range inside a pinned block registered with a device), and that refusal
// is pretended away too, so REG-DOUBLE catches it as well.
#include "cuda_broken.hpp"

namespace xmc::broken_cuda {

static xmc_status reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                               xmc_reg_info *out) {
    const xmc_status st = reference()->reg_register(inst, addr, bytes, device, flags, out);
    xmc_error_info e{};
    reference()->last_error(inst, &e);
    if (st != XMC_OK && e.native_code != 0 && out) {  // the driver said no: pretend all is well
        *out = xmc_reg_info{};
        return XMC_OK;
    }
    return st;
}

static xmc_status pin_alloc(xmc_instance *inst, size_t bytes, size_t alignment, int32_t device, xmc_pin_result *out) {
    const xmc_status st = reference()->pin_alloc(inst, bytes, alignment, device, out);
    if (st == XMC_OK && !out->registered && out->reg_native_code != 0) {
        out->reg_status = XMC_OK;  // lock-only, silently
        out->reg_native_code = 0;
    }
    return st;
}

void plant(xmc_backend &t) {
    t.reg_register = reg_register;
    t.pin_alloc = pin_alloc;
}
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_silent_lock_only")
