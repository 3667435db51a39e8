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
#include "reg_steps.hpp"

#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace xmc::broken_ze {
using namespace xmc::ze;
namespace {
std::mutex mu;
std::set<std::pair<std::thread::id, void *>> remembered;  // the contexts each thread registered in
std::map<void *, int32_t> device_of;                        // and whose device each one is
xmc_status context(xmc_instance *inst, const char *call, int32_t device, void **ctx) {
    const xmc_status st = broken_reg::real().context(inst, call, device, ctx);
    if (st == XMC_OK && broken_reg::is(call, "reg_register")) {
        std::lock_guard<std::mutex> lock(mu);
        remembered.insert({std::this_thread::get_id(), *ctx});
        device_of[*ctx] = device;
    }
    return st;
}
int64_t release(const char *call, void *ctx, void *base, void *chunk, size_t bytes) {
    if (!broken_reg::is(call, "reg_unregister")) return broken_reg::real().release(call, ctx, base, chunk, bytes);
    int32_t device = 0;
    {
        std::lock_guard<std::mutex> lock(mu);
        if (remembered.count({std::this_thread::get_id(), ctx}))
            return broken_reg::real().release(call, ctx, base, chunk, bytes);
        device = device_of[ctx];
    }
    // The bug: a thread that registered nothing for the device frees in a context of its own.
    Driver &d = Driver::get();
    const Device &dev = d.devices[static_cast<size_t>(device)];
    ze_context_desc_t desc{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    ze_device_handle_t one = dev.handle;
    ze_context_handle_t own = nullptr;
    if (ze_result_t res = d.zeContextCreateEx(dev.driver, &desc, 1, &one, &own); res != ZE_RESULT_SUCCESS) return res;
    const int64_t res = broken_reg::real().release(call, own, base, chunk, bytes);
    d.zeContextDestroy(own);  // not the bug: the extra context does not outlive the call
    return res;
}
} // namespace
void plant(xmc_backend &) {
    be::RegOps &ops = broken_reg::steps(xmc::ze::registrations());
    ops.context = context;
    ops.release = release;
}
} // namespace xmc::broken_ze
XMC_BROKEN_ZE_BACKEND("broken_ze_wrong_context_free")
