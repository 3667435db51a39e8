// xmc-selftest: fails REG-SAME-CONTEXT,REG-THREADS
// xmc-selftest: base level_zero
// xmc-selftest: filter [PR][IE][NG]-*
// xmc-selftest: timeout 10
// xmc-selftest: ctest-timeout 120
// Bug: unregister frees in the context
// the calling thread last registered in for the range's device, not in the
// context the registration was made in (a per-thread "current context", the
// way CUDA code thinks). Right while one thread registers and releases;
// a release from another thread frees in a context of its own, which the
// driver refuses (zeMemFree in the wrong context: INVALID_ARGUMENT), so the
// range can never be released there (REG-SAME-CONTEXT), and a registration
// unregistered by another thread than its own fails (REG-THREADS).
#include "ze_broken.hpp"

#include <thread>

namespace xmc::broken_ze {
using namespace xmc::ze;

namespace {
std::mutex mu;
// (thread, device) -> the context that thread last registered in for that device
std::map<std::pair<std::thread::id, int32_t>, ze_context_handle_t> remembered;
} // namespace

static xmc_status reg_register(xmc_instance *inst, void *addr, size_t bytes, int32_t device, uint32_t flags,
                               xmc_reg_info *out) {
    const xmc_status st = reference()->reg_register(inst, addr, bytes, device, flags, out);
    if (st == XMC_OK) {
        RegRegistry &r = registry();
        std::lock_guard<std::mutex> rl(r.mu);
        std::lock_guard<std::mutex> lock(mu);
        remembered[{std::this_thread::get_id(), device}] = r.ranges.at(reinterpret_cast<uintptr_t>(addr)).ctx;
    }
    return st;
}

static xmc_status reg_unregister(xmc_instance *inst, void *base) {
    RegRegistry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.ranges.find(reinterpret_cast<uintptr_t>(base));
    if (it == r.ranges.end() || it->second.pinned)
        return be::fail(inst, XMC_ERR_NOT_REGISTERED, 0, "reg_unregister", "reg_unregister: %p is not a registered base", base);
    Driver &d = Driver::get();
    const Device &dev = d.devices[static_cast<size_t>(it->second.device)];
    // The bug: this thread's context for the device, not it->second.ctx. A
    // thread that registered nothing there gets a context of its own.
    ze_context_handle_t ctx = nullptr, own = nullptr;
    {
        std::lock_guard<std::mutex> l(mu);
        auto m = remembered.find({std::this_thread::get_id(), it->second.device});
        if (m != remembered.end()) ctx = m->second;
    }
    if (!ctx) {
        ze_context_desc_t desc{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
        ze_device_handle_t one = dev.handle;
        if (ze_result_t res = d.zeContextCreateEx(dev.driver, &desc, 1, &one, &own); res != ZE_RESULT_SUCCESS)
            return driver_fail(inst, res, "reg_unregister", "zeContextCreateEx");
        ctx = own;
    }
    const ze_result_t res = d.zeMemFree(ctx, base);
    if (own) d.zeContextDestroy(own);  // not the bug: the extra context does not outlive the call
    if (res != ZE_RESULT_SUCCESS)
        return be::fail(inst, XMC_ERR_DRIVER, res, "reg_unregister",
                        "reg_unregister: zeMemFree(%p) failed with %s (0x%x); still registered", base, result_name(res),
                        static_cast<unsigned>(res));
    r.ranges.erase(it);
    {
        std::lock_guard<std::mutex> dl(d.mu);
        --d.registrations;
    }
    d.release_if_idle();
    return XMC_OK;
}

void plant(xmc_backend &t) {
    t.reg_register = reg_register;
    t.reg_unregister = reg_unregister;
}
} // namespace xmc::broken_ze
XMC_BROKEN_ZE_BACKEND("broken_ze_wrong_context_free")
