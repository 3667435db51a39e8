// The silent lock-only bug, one body for each reference it is planted in
// (cuda_silent_lock_only.cpp, ze_silent_lock_only.cpp): when the driver
// rejects a range, the registration silently degrades: reg_register answers
// success with nothing registered, and a pinned block asked to be registered
// comes back lock-only with no reason and no driver code. `Reference` is the
// base's correct table (broken_cuda::reference, broken_ze::reference).
#pragma once
#include "backend_table.hpp"

namespace xmc::broken_silent {

template <const xmc_backend *(*Reference)()>
xmc_status reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                        xmc_reg_info *out) {
    const xmc_status st = Reference()->reg_register(inst, addr, bytes, device, flags, out);
    xmc_error_info e{};
    Reference()->last_error(inst, &e);
    if (st != XMC_OK && e.native_code != 0 && out) {  // the driver said no: pretend all is well
        *out = xmc_reg_info{};
        return XMC_OK;
    }
    return st;
}

template <const xmc_backend *(*Reference)()>
xmc_status pin_alloc(xmc_instance *inst, size_t bytes, size_t alignment, int32_t device, xmc_pin_result *out) {
    const xmc_status st = Reference()->pin_alloc(inst, bytes, alignment, device, out);
    if (st == XMC_OK && !out->registered && out->reg_native_code != 0) {
        out->reg_status = XMC_OK;  // lock-only, silently
        out->reg_native_code = 0;
    }
    return st;
}

template <const xmc_backend *(*Reference)()> void plant(xmc_backend &t) {
    t.reg_register = reg_register<Reference>;
    t.pin_alloc = pin_alloc<Reference>;
}

} // namespace xmc::broken_silent
