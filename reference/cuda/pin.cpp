// Pinning with the driver (PIN-*, PIN-DEVICE): posix_memalign + mlock in the
// process-wide registry, as on the host; an allocation that asks for a device
// is then registered with it through driver_register (register.cpp). If that
// fails, the block stays lock-only and the result says why with the driver's
// code (never silent). The registry's release hook unregisters a registered
// block before its pages are unlocked and freed.
#include "cuda.hpp"
#include "pin_entries.hpp"

#include <cstdio>

namespace xmc::cuda {

using be::PinRegistry;

// Runs when the block's last reference goes, before munlock and free. A
// failed unregister keeps the block pinned and is reported by the free: the
// device may still map the pages (REG-UNREG-FAIL's rule, for pinned blocks).
static xmc_status unregister_block(const be::PinBlock &block, int64_t *native, char *why, size_t why_len) {
    // PIN-AFTER-FREE: a registered block leaves the driver before munlock.
    if (block.device == XMC_NO_DEVICE) return XMC_OK;
    Driver &d = Driver::get();
    CUcontext ctx = nullptr;
    CUresult res = d.context_for(d.devices[static_cast<size_t>(block.device)].uuid, &ctx, nullptr);
    if (res == CUDA_SUCCESS) {
        CtxScope scope(d, ctx);
        res = scope.result();
        if (res == CUDA_SUCCESS) res = d.cuMemHostUnregister(reinterpret_cast<void *>(block.base));
    }
    if (res != CUDA_SUCCESS) {
        *native = res;
        std::snprintf(why, why_len, "cuMemHostUnregister failed with %d", static_cast<int>(res));
        return XMC_ERR_DRIVER;
    }
    std::lock_guard<std::mutex> lock(d.mu);
    --d.registrations;
    return XMC_OK;
}

void install_pin_hook() { PinRegistry::process().set_release_hook(unregister_block); }

// PIN-DEVICE: the block registered with `device` in its context, as reg_register does; no
// driver or no registration entry points: lock-only, unsupported.
static xmc_status register_block(xmc_instance *inst, uintptr_t base, size_t size, int32_t device, int64_t *native) {
    Driver &d = Driver::get();
    if (!d.usable || !d.missing_register.empty()) return XMC_ERR_UNSUPPORTED;
    CUcontext ctx = nullptr;
    CUresult res = CUDA_SUCCESS;
    const xmc_status st = driver_register(inst, "pin_alloc", reinterpret_cast<void *>(base), size, device, &ctx, &res);
    *native = res;
    return st;
}

XMC_PIN_DRIVER_ENTRIES(register_block)

} // namespace xmc::cuda
