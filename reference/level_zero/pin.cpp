// Pinning with Level Zero (PIN-*, PIN-DEVICE): posix_memalign + mlock in the
// process-wide registry, as on the host; an allocation that asks for a device
// is then registered with it exactly as reg_register does (driver_register in
// the device's own context). If that fails, the block stays lock-only and the
// result says why with the driver's code: degradation is never silent (a
// registration bug the suite was built from). The registration is tracked in the registration map too,
// so no other registration may overlap it (REG-DOUBLE), and the registry's
// release hook frees it in its context before the pages are unlocked.
#include "ze.hpp"
#include "pin_entries.hpp"

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

XMC_PIN_DRIVER_ENTRIES(register_block)

} // namespace xmc::ze
