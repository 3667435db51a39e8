// xmc-selftest: fails REG-IDENTITY,REG-DEVICE,REG-UUID
// xmc-selftest: base level_zero
// xmc-selftest: filter [PR][IE][NG]-*
// xmc-selftest: timeout 60
// xmc-selftest: ctest-timeout 120
// xmc-selftest: env XMC_FAKE_ZE_ORDER=1,0
// Bug: the device of a registration is taken by its
// position in zeDeviceGet's order, not by UUID; when the driver enumerates
// devices in another order than the caller names them (XMC_FAKE_ZE_ORDER=1,0),
// device d's range is registered in another device's context.
#include "ze_broken.hpp"
#include "reg_steps.hpp"

namespace xmc::broken_ze {
using namespace xmc::ze;
static xmc_status by_position(xmc_instance *inst, const char *call, int32_t device, void **ctx) {
    if (!broken_reg::is(call, "reg_register")) return broken_reg::real().context(inst, call, device, ctx);
    Driver &d = Driver::get();
    for (const Device &dev : d.devices)
        if (dev.enum_position == static_cast<uint32_t>(device)) {  // the bug: position, not UUID
            ze_context_handle_t c = nullptr;
            if (ze_result_t r = d.context_for(dev.uuid, &c); r != ZE_RESULT_SUCCESS)
                return driver_fail(inst, r, call, "zeContextCreateEx");
            *ctx = c;
            return XMC_OK;
        }
    return check_device(inst, -1, call);
}
void plant(xmc_backend &) { broken_reg::steps(xmc::ze::registrations()).context = by_position; }
} // namespace xmc::broken_ze
XMC_BROKEN_ZE_BACKEND("broken_ze_enumeration_order")
