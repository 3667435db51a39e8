// xmc-selftest: fails VMM-BATCH
// xmc-selftest: filter VMM-*
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 180
// Bug: batch release does not refuse a slot named twice (batch
// remap does); it goes ahead with the slots it was given.
#include "broken.hpp"

#include <algorithm>
#include <vector>

namespace xmc::broken {
static xmc_status release_batch(xmc_instance *inst, xmc_slot *const *slots, size_t n, xmc_stream *s,
                                xmc_request **out) {
    std::vector<xmc_slot *> once;
    for (size_t i = 0; slots && i < n; ++i)
        if (std::find(once.begin(), once.end(), slots[i]) == once.end()) once.push_back(slots[i]);
    return host()->slot_release_batch(inst, slots ? once.data() : nullptr, slots ? once.size() : n, s, out);
}
void plant(xmc_backend &t) { t.slot_release_batch = release_batch; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_batch_accepts_duplicate")
