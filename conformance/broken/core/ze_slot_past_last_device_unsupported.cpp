// xmc-selftest: fails CORE-INSTANCE
// xmc-selftest: base level_zero
// xmc-selftest: filter CORE-INSTANCE
// xmc-selftest: timeout 60
// Bug (on Level Zero): slot_create on a device past the last one the driver lists answers
// unsupported ("that device has no virtual memory") instead of no device: a caller that falls back
// to another path on unsupported hides its own off-by-one device index. Only where devices exist;
// with none at all, unsupported is the right answer.
#include "ze_broken.hpp"

namespace xmc::broken_ze {
static xmc_status slot_create(xmc_instance *inst, int32_t device, size_t bytes, xmc_slot **out, xmc_slot_info *info) {
    int32_t n = 0;
    reference()->device_count(inst, &n);
    if (n > 0 && device >= n)  // the bug
        return be::fail(inst, XMC_ERR_UNSUPPORTED, 0, "slot_create",
                        "slot_create: device %d has no virtual memory support", device);
    return reference()->slot_create(inst, device, bytes, out, info);
}
void plant(xmc_backend &t) { t.slot_create = slot_create; }
} // namespace xmc::broken_ze
XMC_BROKEN_ZE_BACKEND("broken_ze_slot_past_last_device_unsupported")
