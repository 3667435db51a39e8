// Registration through Level Zero (capability `register`, REG-*): zeMemAllocHost
// with the external-memmap-sysmem descriptor chained on its host descriptor,
// in the context of the one device asked for, found by its UUID (REG-UUID,
// REG-DEVICE). The pointer it returns must be the host address itself
// (REG-IDENTITY). The checks, the index (with the context each range was made
// in, REG-SAME-CONTEXT), the close and the query are
// reference/common/registration.cpp's; this file is Level Zero's driver steps.
// Alignment (REG-ALIGN): refuse, as everywhere; the extension maps whole pages only.
//
// Large registrations (REG-LARGE): XMC_REG_LARGE_REFUSE above kRegLimitBytes
// (4 GiB), XMC_ERR_TOO_LARGE before the driver is asked. compute-runtime
// refuses one allocation above the device's maxMemAllocSize (4 GiB without its
// relaxed-limits flag), and splitting is no way out here: a copy that spans two
// registrations is refused by the driver (the fake answers INVALID_ARGUMENT),
// so chunks would not be one usable range.
//
// Flags: XMC_REG_PORTABLE is unsupported (capability register_portable not
// declared: a context of several devices maps the range for the first only, and
// the fake driver takes one registration of a range, so one per device context
// is not possible either); any other bit is refused.
#include "ze.hpp"

#include "ze_external_memmap.h"

namespace xmc::ze {

namespace {
constexpr size_t kRegLimitBytes = size_t{4} << 30;

xmc_status check(xmc_instance *inst, int32_t device, uint32_t flags) {
    if (flags & XMC_REG_PORTABLE)
        return be::fail(inst, XMC_ERR_UNSUPPORTED, 0, "reg_register",
                        "reg_register: XMC_REG_PORTABLE is not supported by backend 'level_zero' "
                        "(capability register_portable not declared)");
    Driver &d = Driver::get();
    // REG-UNAVAILABLE: no loader, device, entry point or extension: unsupported.
    if (xmc_status st = require(inst, "reg_register", d.missing_register); st != XMC_OK) return st;
    if (xmc_status st = check_device(inst, device, "reg_register"); st != XMC_OK) return st;
    if (!d.devices[static_cast<size_t>(device)].memmap)
        return be::fail(inst, XMC_ERR_UNSUPPORTED, 0, "reg_register",
                        "reg_register: the driver of device %d does not list %s (zeDriverGetExtensionProperties)",
                        device, XMC_ZE_EXTERNAL_MEMMAP_SYSMEM_EXT_NAME);
    return XMC_OK;
}

// REG-DEVICE, REG-UUID: the context of device `device` alone, found by its UUID (ze.hpp says why).
xmc_status context(xmc_instance *inst, const char *call, int32_t device, void **ctx) {
    ze_context_handle_t c = nullptr;
    if (xmc_status st = device_context(inst, call, device, &c); st != XMC_OK) return st;
    *ctx = c;
    return XMC_OK;
}

xmc_status make(xmc_instance *inst, const char *call, void *ctx, void *addr, size_t bytes, int32_t device, uint32_t,
                int64_t *native) {
    ze_result_t res = ZE_RESULT_SUCCESS;
    const xmc_status st =
        driver_register(inst, call, static_cast<ze_context_handle_t>(ctx), device, addr, bytes, &res);
    *native = static_cast<int64_t>(res);
    return st;
}

int64_t release(const char *, void *ctx, void *, void *addr, size_t) {
    Driver &d = Driver::get();
    const ze_result_t res = d.zeMemFree(static_cast<ze_context_handle_t>(ctx), addr);
    if (res == ZE_RESULT_SUCCESS) {
        std::lock_guard<std::mutex> dl(d.mu);
        --d.registrations;
    }
    return static_cast<int64_t>(res);
}

const char *native_name(int64_t r) { return result_name(static_cast<ze_result_t>(r)); }
void idle() { Driver::get().release_if_idle(); }
bool gone(int64_t) { return false; }

} // namespace

be::Registrations &registrations() {
    static be::Registrations r(be::RegOps{"zeMemFree", {XMC_REG_LARGE_REFUSE, kRegLimitBytes}, check, context, make,
                                          release, native_name, idle, gone, be::reg_lock, be::reg_unlock});
    return r;
}

XMC_REGISTRATION_ENTRIES(registrations)

xmc_status reg_release_all(xmc_instance *inst, uint64_t *released) {
    return registrations().release_all(inst, released);
}

xmc_status driver_register(xmc_instance *inst, const char *call, ze_context_handle_t ctx, int32_t device,
                           void *addr, size_t bytes, ze_result_t *native) {
    Driver &d = Driver::get();
    xmc_ze_external_memmap_sysmem_ext_desc_t ext{XMC_ZE_STRUCTURE_TYPE_EXTERNAL_MEMMAP_SYSMEM_EXT_DESC, nullptr,
                                                 addr, bytes};
    ze_host_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, &ext, 0};
    void *mapped = nullptr;
    // Alignment 0: the driver's choice; the descriptor names the pages.
    *native = d.zeMemAllocHost(ctx, &desc, bytes, 0, &mapped);
    // REG-FAIL: a refused zeMemAllocHost: the driver's code, nothing tracked.
    if (*native != ZE_RESULT_SUCCESS)
        return be::fail(inst, status_of(*native), *native, call,
                        "%s: zeMemAllocHost with %s refused [%p, +%zu) for device %d: %s (0x%x)", call,
                        XMC_ZE_EXTERNAL_MEMMAP_SYSMEM_EXT_NAME, addr, bytes, device, result_name(*native),
                        static_cast<unsigned>(*native));
    // REG-IDENTITY: the pointer must be the host address itself, else undone.
    if (mapped != addr) {
        // Nothing stays registered: undo before refusing.
        const ze_result_t undo = d.zeMemFree(ctx, mapped);
        *native = undo;
        return be::fail(inst, XMC_ERR_NON_IDENTITY, undo, call,
                        "%s: zeMemAllocHost mapped host %p at %p, not the same address%s", call, addr, mapped,
                        undo == ZE_RESULT_SUCCESS ? "; zeMemFree undid it" : "; undoing it with zeMemFree failed too (native code)");
    }
    std::lock_guard<std::mutex> lock(d.mu);
    ++d.registrations;  // keeps the context after the last close
    return XMC_OK;
}

} // namespace xmc::ze
