// Pinning on the host: posix_memalign + mlock, tracked in the process-wide
// registry (PIN-ALLOC .. PIN-REFS). The host has no device to register with,
// so the capability pin_register is not declared and a device is refused.
#include "host.hpp"
#include "pin_entries.hpp"

namespace xmc::host {

using be::PinRegistry;

xmc_status pin_alloc(xmc_instance *inst, size_t bytes, size_t alignment, int32_t device,
                     xmc_pin_result *out) {
    // Before anything is allocated: a block whose base cannot be returned would leak.
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "pin_alloc", "pin_alloc: result pointer is NULL");
    // PIN-DEVICE is not declared: a device is refused, never silently ignored.
    if (device != XMC_NO_DEVICE)
        return be::fail(inst, XMC_ERR_UNSUPPORTED, 0, "pin_alloc",
                        "pin_alloc: the host backend cannot register with device %d "
                        "(capability pin_register not declared)", device);
    // PIN-ALLOC, PIN-MEMLOCK, PIN-ACCOUNT: the shared registry's (pin_registry.cpp).
    be::PinBlock block;
    xmc_status st = PinRegistry::process().alloc(inst, bytes, alignment, &block);
    if (st != XMC_OK) return st;
    *out = xmc_pin_result{};
    out->base = reinterpret_cast<void *>(block.base);
    out->size = block.size;
    return XMC_OK;
}

XMC_PIN_REGISTRY_ENTRIES

} // namespace xmc::host
