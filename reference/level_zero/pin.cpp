// Pinning with Level Zero (PIN-*, PIN-DEVICE): posix_memalign + mlock in the
// process-wide registry, as on the host; an allocation that asks for a device
// is then registered with it exactly as reg_register does (driver_register in
// the device's own context). If that fails, the block stays lock-only and the
// result says why with the driver's code: degradation is never silent (a
// registration bug the suite was built from). The registration is tracked in the registration map too,
// so no other registration may overlap it (REG-DOUBLE), and the registry's
// release hook frees it in its context before the pages are unlocked.
#include "ze.hpp"

#include <cstdio>

namespace xmc::ze {

using be::PinRegistry;

// PIN-AFTER-FREE: the registration leaves the driver before the pages unlock;
// REG-UNREG-FAIL (pinned blocks): a failed zeMemFree keeps both.
// Runs when the block's last reference goes, before munlock and free. A
// failed zeMemFree keeps the block pinned and registered, and the free
// reports it: success is never reported over a failed release (seed 000).
static xmc_status unregister_block(const be::PinBlock &block, int64_t *native, char *why, size_t why_len) {
    if (block.device == XMC_NO_DEVICE) return XMC_OK;
    if (const int64_t res = registrations().release_pinned(block.base); res != 0) {
        *native = res;
        std::snprintf(why, why_len, "zeMemFree failed with 0x%x", static_cast<unsigned>(res));
        return XMC_ERR_DRIVER;
    }
    return XMC_OK;
}

void install_pin_hook() { PinRegistry::process().set_release_hook(unregister_block); }

// Registers a fresh block with `device`; the status and native code say why not.
static xmc_status register_block(xmc_instance *inst, uintptr_t base, size_t size, int32_t device,
                                 ze_result_t *native) {
    Driver &d = Driver::get();
    if (xmc_status st = require(inst, "pin_alloc", d.missing_register); st != XMC_OK) return st;
    // PIN-DEVICE: no extension: lock-only, reported unsupported.
    if (!d.devices[static_cast<size_t>(device)].memmap)
        return be::fail(inst, XMC_ERR_UNSUPPORTED, 0, "pin_alloc",
                        "pin_alloc: the driver of device %d does not list the external-memmap extension", device);
    int64_t code = 0;
    const xmc_status st = registrations().add_pinned(inst, base, size, device, &code);
    *native = static_cast<ze_result_t>(code);
    return st;
}

xmc_status pin_alloc(xmc_instance *inst, size_t bytes, size_t alignment, int32_t device, xmc_pin_result *out) {
    // Before anything is allocated: a block whose base cannot be returned would leak.
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc", "pin_alloc: result pointer is NULL");
    Driver &d = Driver::get();
    // A device index that cannot exist is bad input, refused before anything
    // is allocated; a device the driver cannot serve degrades (below).
    if (device != XMC_NO_DEVICE && (device < 0 || (d.usable && static_cast<size_t>(device) >= d.devices.size())))
        return be::fail(inst, XMC_ERR_NO_DEVICE, 0, "pin_alloc", "pin_alloc: no device %d (the driver has %zu)",
                        device, d.devices.size());
    // PIN-ALLOC, PIN-MEMLOCK, PIN-ACCOUNT: the shared registry's (pin_registry.cpp).
    be::PinBlock block;
    xmc_status st = PinRegistry::process().alloc(inst, bytes, alignment, &block);
    if (st != XMC_OK) return st;
    *out = xmc_pin_result{};
    out->base = reinterpret_cast<void *>(block.base);
    out->size = block.size;
    if (device == XMC_NO_DEVICE) return XMC_OK;
    ze_result_t native = ZE_RESULT_SUCCESS;
    // PIN-DEVICE: a failed registration: lock-only, with its status and code.
    const xmc_status reg = register_block(inst, block.base, block.size, device, &native);
    if (reg != XMC_OK) {
        out->reg_status = reg;  // lock-only, and it says so
        out->reg_native_code = native;
        return XMC_OK;
    }
    // After the registration map's lock is released: the hook takes it under
    // the pin registry's lock, so the two are never taken in the other order.
    PinRegistry::process().set_device(block.base, device);
    out->registered = 1;
    return XMC_OK;
}

// PIN-FREE, PIN-AFTER-FREE, PIN-QUERY, PIN-REFS: the shared registry's rules;
// PIN-SHARED, PIN-THREADS: one registry for every instance, under one lock.
xmc_status pin_free(xmc_instance *inst, void *base) { return PinRegistry::process().free(inst, base); }

xmc_status pin_query(xmc_instance *inst, const void *addr, size_t len, xmc_pin_info *out) {
    return PinRegistry::process().query(inst, addr, len, out);
}

xmc_status pin_stats(xmc_instance *inst, xmc_pin_stats *out) { return PinRegistry::process().stats(inst, out); }

// PIN-KINDS: mlock pinning of whole pages, as on the host (pin_registry.cpp).
size_t pin_min_alignment(xmc_instance *) { return PinRegistry::min_alignment(); }

xmc_status pin_ref(xmc_instance *inst, const void *addr) { return PinRegistry::process().ref(inst, addr); }

xmc_status pin_unref(xmc_instance *inst, const void *addr) { return PinRegistry::process().unref(inst, addr); }

} // namespace xmc::ze
