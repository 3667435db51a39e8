// xmc-selftest: fails VMM-GRAPH-ORDER
// xmc-selftest: filter VMM-*
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 240
// Bug (VMM-GRAPH-ORDER): a remap asked on a capturing stream is accepted: the
// capture check guards release only, and the remap's stream point goes to the
// backend's own idle stream, so the slot is remapped behind the capture's back
// (the graph being recorded never waits for it) instead of being refused.
#include "broken.hpp"
#include "vmm_track.hpp"

#include <map>
#include <mutex>

namespace xmc::broken {
namespace {

std::mutex mu;
std::map<xmc_instance *, xmc_stream *> own;
using broken_vmm::is_capturing;

xmc_stream *own_stream(xmc_instance *inst) {
    std::lock_guard<std::mutex> lock(mu);
    xmc_stream *&s = own[inst];
    if (!s) host()->stream_create(inst, 0, &s);
    return s;
}

xmc_status remap(xmc_instance *inst, xmc_slot *slot, xmc_stream *s, const void *src, size_t n, uint32_t flags,
                 xmc_request **out) {
    return host()->slot_remap(inst, slot, is_capturing(inst, s) ? own_stream(inst) : s, src, n, flags, out);
}

xmc_status remap_batch(xmc_instance *inst, xmc_slot *const *slots, size_t n, xmc_stream *s, const void *const *srcs,
                       const size_t *bytes, uint32_t flags, xmc_request **out) {
    return host()->slot_remap_batch(inst, slots, n, is_capturing(inst, s) ? own_stream(inst) : s, srcs, bytes, flags,
                                    out);
}

xmc_status close(xmc_instance *inst) {
    {
        std::lock_guard<std::mutex> lock(mu);
        own.erase(inst);  // the instance's streams go with it
    }
    broken_vmm::forget_captures(inst);
    return host()->close(inst);
}

} // namespace

void plant(xmc_backend &t) {
    broken_vmm::track_captures(t, host());
    t.slot_remap = remap;
    t.slot_remap_batch = remap_batch;
    t.close = close;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_graph_remap_during_capture")
