// The PIN group's entries over the process-wide registry (pin_registry.hpp), the same on every
// platform: PIN-FREE, PIN-AFTER-FREE, PIN-QUERY, PIN-REFS, PIN-KINDS are the registry's rules;
// PIN-SHARED, PIN-THREADS: one registry for every instance, under one lock. A platform writes
// only pin_alloc (XMC_PIN_DRIVER_ALLOC where a driver registers the block with a device).
#pragma once
#include "pin_registry.hpp"

#define XMC_PIN_REGISTRY_ENTRIES                                                                    \
    xmc_status pin_free(xmc_instance *inst, void *base) {                                           \
        return ::xmc::be::PinRegistry::process().free(inst, base);                                  \
    }                                                                                               \
    xmc_status pin_query(xmc_instance *inst, const void *addr, size_t len, xmc_pin_info *out) {     \
        return ::xmc::be::PinRegistry::process().query(inst, addr, len, out);                       \
    }                                                                                               \
    xmc_status pin_stats(xmc_instance *inst, xmc_pin_stats *out) {                                  \
        return ::xmc::be::PinRegistry::process().stats(inst, out);                                  \
    }                                                                                               \
    /* PIN-KINDS: mlock pinning of whole pages (pin_registry.cpp). */                               \
    size_t pin_min_alignment(xmc_instance *) { return ::xmc::be::PinRegistry::min_alignment(); }   \
    xmc_status pin_ref(xmc_instance *inst, const void *addr) {                                      \
        return ::xmc::be::PinRegistry::process().ref(inst, addr);                                  \
    }                                                                                               \
    xmc_status pin_unref(xmc_instance *inst, const void *addr) {                                    \
        return ::xmc::be::PinRegistry::process().unref(inst, addr);                                 \
    }

// pin_alloc where the platform's Driver (`Driver::get()`: usable, devices) registers a block
// with its device by `register_block` (PIN-DEVICE), then the registry's entries.
#define XMC_PIN_DRIVER_ENTRIES(register_block)                                                      \
    xmc_status pin_alloc(xmc_instance *inst, size_t bytes, size_t alignment, int32_t device,        \
                         xmc_pin_result *out) {                                                     \
        Driver &d = Driver::get();                                                                  \
        return ::xmc::be::PinRegistry::process().alloc_for_device(inst, bytes, alignment, device,   \
                                                                  d.usable, d.devices.size(),       \
                                                                  register_block, out);             \
    }                                                                                               \
    XMC_PIN_REGISTRY_ENTRIES
