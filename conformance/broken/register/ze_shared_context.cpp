// xmc-selftest: fails REG-IDENTITY,REG-DEVICE,REG-UUID
// xmc-selftest: base level_zero
// xmc-selftest: filter [PR][IE][NG]-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 120
// Bug: registrations are made in one context that
// holds every device. Level Zero maps such a range for the context's first
// device only, so every other device fails its first copy from it with
// ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY ("every rank but the first").
#include "ze_broken.hpp"
#include "reg_steps.hpp"

#include <mutex>
#include <vector>

namespace xmc::broken_ze {
using namespace xmc::ze;
namespace {
std::mutex mu;
ze_context_handle_t shared = nullptr;  // every device's; destroyed with the last instance
xmc_status all_devices(xmc_instance *inst, const char *call, int32_t device, void **ctx) {
    if (!broken_reg::is(call, "reg_register")) return broken_reg::real().context(inst, call, device, ctx);
    Driver &d = Driver::get();
    std::lock_guard<std::mutex> lock(mu);
    if (!shared) {
        std::vector<ze_device_handle_t> all;
        for (const Device &dev : d.devices) all.push_back(dev.handle);
        ze_context_desc_t desc{ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
        if (ze_result_t r = d.zeContextCreateEx(d.devices[0].driver, &desc, static_cast<uint32_t>(all.size()),
                                                all.data(), &shared);
            r != ZE_RESULT_SUCCESS) {
            shared = nullptr;
            return driver_fail(inst, r, call, "zeContextCreateEx");
        }
    }
    *ctx = shared;  // the bug: one context for every device
    return XMC_OK;
}
} // namespace
// Not the bug: the shared context goes when nothing needs it, so the suite's
// leak checks see only what the bug itself breaks.
static xmc_status close_report(xmc_instance *inst, xmc_close_report *out) {
    const xmc_status st = reference()->close_report(inst, out);
    Driver &d = Driver::get();
    std::lock_guard<std::mutex> dl(d.mu);
    std::lock_guard<std::mutex> lock(mu);
    if (shared && d.instances == 0 && d.registrations == 0 && d.zeContextDestroy(shared) == ZE_RESULT_SUCCESS)
        shared = nullptr;
    return st;
}
static xmc_status close(xmc_instance *inst) { return close_report(inst, nullptr); }
void plant(xmc_backend &t) {
    broken_reg::steps(xmc::ze::registrations()).context = all_devices;
    t.close = close;
    t.close_report = close_report;
}
} // namespace xmc::broken_ze
XMC_BROKEN_ZE_BACKEND("broken_ze_shared_context")
