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
                                 int64_t *native) {
    Driver &d = Driver::get();
    if (xmc_status st = require(inst, "pin_alloc", d.missing_register); st != XMC_OK) return st;
    // PIN-DEVICE: no extension: lock-only, reported unsupported.
    if (!d.devices[static_cast<size_t>(device)].memmap)
        return be::fail(inst, XMC_ERR_UNSUPPORTED, 0, "pin_alloc",
                        "pin_alloc: the driver of device %d does not list the external-memmap extension", device);
    return registrations().add_pinned(inst, base, size, device, native);
}

xmc_status pin_alloc(xmc_instance *inst, size_t bytes, size_t alignment, int32_t device, xmc_pin_result *out) {
    Driver &d = Driver::get();
    return PinRegistry::process().alloc_for_device(inst, bytes, alignment, device, d.usable, d.devices.size(),
                                                   register_block, out);
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
