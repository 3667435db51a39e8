// xmc-selftest: fails REG-UUID
// xmc-selftest: base cuda
// xmc-selftest: filter [PR][IE][NG]-*
// xmc-selftest: timeout 10
// xmc-selftest: ctest-timeout 120
// xmc-selftest: env XMC_FAKE_CUDA_ORDER=1,0
// Bug (on CUDA): the backend names its devices in
// UUID order (stable whatever order the driver enumerates them in, as the
// Level Zero reference does), but everything it does for device d goes to the
// driver's ordinal d: the device asked for is matched by its position in the
// enumeration, not by its UUID. Invisible while the driver enumerates in UUID
// order; with XMC_FAKE_CUDA_ORDER=1,0, device 0's range is registered with
// the device whose UUID device_info gives for device 1.
#include "cuda_broken.hpp"

#include <algorithm>
#include <vector>

namespace xmc::broken_cuda {

// device_info by UUID order: the d-th device when sorted by UUID.
static xmc_status device_info(xmc_instance *inst, int32_t index, xmc_device_info *out) {
    int32_t n = 0;
    if (xmc_status st = reference()->device_count(inst, &n); st != XMC_OK) return st;
    if (!out || index < 0 || index >= n) return reference()->device_info(inst, index, out);  // its refusals
    std::vector<xmc_device_info> all(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i)
        if (xmc_status st = reference()->device_info(inst, i, &all[static_cast<size_t>(i)]); st != XMC_OK) return st;
    std::sort(all.begin(), all.end(), [](const xmc_device_info &a, const xmc_device_info &b) {
        return std::memcmp(a.uuid, b.uuid, sizeof a.uuid) < 0;
    });
    *out = all[static_cast<size_t>(index)];
    out->index = index;
    return XMC_OK;
}

void plant(xmc_backend &t) { t.device_info = device_info; }
} // namespace xmc::broken_cuda
XMC_BROKEN_CUDA_BACKEND("broken_cuda_ordinal_not_uuid")
