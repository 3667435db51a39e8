// Registration through Level Zero (capability `register`, REG-*): zeMemAllocHost
// with the external-memmap-sysmem descriptor chained on its host descriptor,
// in the context of the one device asked for, found by its UUID (REG-UUID,
// REG-DEVICE). The pointer it returns must be the host address itself
// (REG-IDENTITY). Ranges are tracked in a process-wide ordered map shared by
// every instance, with the context that made them, so unregister frees in that
// context (REG-SAME-CONTEXT) and a failed zeMemFree keeps the entry
// (REG-UNREG-FAIL).
//
// Alignment policy (REG-ALIGN): XMC_REG_ALIGN_REFUSE. The extension maps whole
// pages only (the driver refuses an unaligned address or size), and a refused
// range is one rule every backend can hold exactly: no two registrations ever
// share a page.
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
} // namespace

std::map<uintptr_t, Registration>::iterator RegRegistry::containing(uintptr_t addr) {
    auto it = ranges.upper_bound(addr);
    if (it == ranges.begin()) return ranges.end();
    --it;
    return addr - it->first < it->second.size ? it : ranges.end();
}

bool RegRegistry::overlaps(uintptr_t addr, size_t bytes) {
    auto it = ranges.lower_bound(addr + bytes);
    if (it == ranges.begin()) return false;
    --it;
    return it->first + it->second.size > addr;
}

RegRegistry &registry() {
    static RegRegistry r;
    return r;
}

xmc_reg_align_policy reg_align_policy(xmc_instance *) { return XMC_REG_ALIGN_REFUSE; }

xmc_status reg_large_policy(xmc_instance *inst, xmc_reg_large_info *out) {
    if (!out)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_large_policy", "reg_large_policy: result pointer is NULL");
    *out = xmc_reg_large_info{XMC_REG_LARGE_REFUSE, kRegLimitBytes};
    return XMC_OK;
}

xmc_status check_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                          const xmc_reg_info *out) {
    const size_t page = be::PinRegistry::page_size();
    const auto a = reinterpret_cast<uintptr_t>(addr);
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: result pointer is NULL");
    if (!addr) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: address is NULL");
    if (bytes == 0) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register", "reg_register: size is 0");
    if (flags & ~XMC_REG_PORTABLE)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register",
                        "reg_register: unknown flags 0x%x (XMC_REG_PORTABLE is the only one)", flags);
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
    // REG-ALIGN: policy refuse, as reg_align_policy declares.
    if (a % page != 0 || bytes % page != 0)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register",
                        "reg_register: [%p, +%zu) is not page-aligned (%zu); the alignment policy is refuse", addr,
                        bytes, page);
    if (a > UINTPTR_MAX - bytes)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_register",
                        "reg_register: [%p, +%zu) wraps the address space", addr, bytes);
    // REG-LARGE: policy refuse above the declared limit, the driver not asked.
    if (bytes > kRegLimitBytes)
        return be::fail(inst, XMC_ERR_TOO_LARGE, 0, "reg_register",
                        "reg_register: %zu bytes is above the %zu bytes one zeMemAllocHost registers "
                        "(reg_large_policy: refuse)", bytes, kRegLimitBytes);
    return XMC_OK;
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

xmc_status reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                        xmc_reg_info *out) {
    if (xmc_status st = check_register(inst, addr, bytes, device, flags, out); st != XMC_OK) return st;
    const auto a = reinterpret_cast<uintptr_t>(addr);
    RegRegistry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);  // held across the driver calls: no two overlapping ranges pass
    // REG-DOUBLE: overlapping a range or a registered pinned block is refused;
    // REG-THREADS: check and record under one lock.
    if (r.overlaps(a, bytes))
        return be::fail(inst, XMC_ERR_ALREADY_REGISTERED, 0, "reg_register",
                        "reg_register: [%p, +%zu) overlaps a registered range or a pinned block registered with a device",
                        addr, bytes);
    // REG-DEVICE, REG-UUID: the context of this one device (ze.hpp says why).
    // The context of device `device` alone, found by its UUID.
    ze_context_handle_t ctx = nullptr;
    if (xmc_status st = device_context(inst, "reg_register", device, &ctx); st != XMC_OK) return st;
    ze_result_t native = ZE_RESULT_SUCCESS;
    if (xmc_status st = driver_register(inst, "reg_register", ctx, device, addr, bytes, &native); st != XMC_OK)
        return st;
    r.ranges[a] = Registration{bytes, device, ctx, false};
    *out = xmc_reg_info{1, addr, bytes, device};
    return XMC_OK;
}

xmc_status reg_unregister(xmc_instance *inst, void *base) {
    RegRegistry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    const auto a = reinterpret_cast<uintptr_t>(base);
    // REG-UNREG-BASE: exactly a recorded base; anything else changes nothing.
    auto it = r.ranges.find(a);
    if (it == r.ranges.end() || it->second.pinned) {
        auto holder = r.containing(a);
        const char *why = holder == r.ranges.end()  ? "is not inside any registered range"
                          : holder->second.pinned ? "belongs to a pinned block (pin_free releases it)"
                                                  : "is interior to a registered range (give its recorded base)";
        return be::fail(inst, XMC_ERR_NOT_REGISTERED, 0, "reg_unregister", "reg_unregister: %p %s", base, why);
    }
    Driver &d = Driver::get();
    // Released in the context that registered it (REG-SAME-CONTEXT).
    const ze_result_t res = d.zeMemFree(it->second.ctx, base);
    // REG-UNREG-FAIL: a failed zeMemFree is reported and the entry kept.
    // Never success over a driver failure: the caller would free pages the
    // device still maps. The entry stays, so a retry can remove it.
    if (res != ZE_RESULT_SUCCESS)
        return be::fail(inst, XMC_ERR_DRIVER, res, "reg_unregister",
                        "reg_unregister: zeMemFree(%p) failed with %s (0x%x); still registered", base,
                        result_name(res), static_cast<unsigned>(res));
    r.ranges.erase(it);
    {
        std::lock_guard<std::mutex> dl(d.mu);
        --d.registrations;
    }
    d.release_if_idle();
    return XMC_OK;
}

xmc_status reg_release_all(xmc_instance *inst, uint64_t *released) {
    RegRegistry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    Driver &d = Driver::get();
    // REG-CLOSE: each one as reg_unregister frees it, in its own context
    // (REG-SAME-CONTEXT); a refusal keeps it (REG-UNREG-FAIL's rule).
    for (auto it = r.ranges.begin(); it != r.ranges.end();) {
        if (it->second.pinned) {  // the pin registry's release hook frees it with its block
            ++it;
            continue;
        }
        const ze_result_t res = d.zeMemFree(it->second.ctx, reinterpret_cast<void *>(it->first));
        if (res != ZE_RESULT_SUCCESS)
            return be::fail(inst, XMC_ERR_DRIVER, res, "close",
                            "close: zeMemFree(%p) of a registration still held failed with %s (0x%x); still registered",
                            reinterpret_cast<void *>(it->first), result_name(res), static_cast<unsigned>(res));
        it = r.ranges.erase(it);
        {
            std::lock_guard<std::mutex> dl(d.mu);
            --d.registrations;
        }
        ++*released;
    }
    return XMC_OK;
}

xmc_status reg_query(xmc_instance *inst, const void *addr, xmc_reg_info *out) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "reg_query", "reg_query: result pointer is NULL");
    *out = xmc_reg_info{};
    out->device = XMC_NO_DEVICE;
    RegRegistry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.containing(reinterpret_cast<uintptr_t>(addr));
    if (it != r.ranges.end() && !it->second.pinned)
        *out = xmc_reg_info{1, reinterpret_cast<void *>(it->first), it->second.size, it->second.device};
    return XMC_OK;
}

} // namespace xmc::ze
