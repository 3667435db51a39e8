// xmc-selftest: fails VMM-RELEASE-ORDER,VMM-GRAPH-ORDER
// xmc-selftest: may-fail VMM-EVENT-WAIT: its consumer reads the slot while the slot's release is meant to wait behind a gated stream; this release unmaps at once, so the read is refused whenever the release's worker gets there first
// xmc-selftest: filter VMM-*
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 180
// xmc-selftest: quick
// Bug: a release is enqueued on the backend's own idle stream instead of the
// caller's, so it takes effect at once, before the work the caller enqueued
// ahead of it (a graph launch too: VMM-GRAPH-ORDER), and a capturing caller's
// stream never refuses it.
#include "broken.hpp"

#include <map>
#include <mutex>

namespace xmc::broken {
namespace {
std::mutex mu;
std::map<xmc_instance *, xmc_stream *> own;
xmc_stream *own_stream(xmc_instance *inst) {
    std::lock_guard<std::mutex> lock(mu);
    xmc_stream *&s = own[inst];
    if (!s) host()->stream_create(inst, 0, &s);
    return s;
}
} // namespace

// The caller's stream is still checked (a NULL one goes to the host code,
// which refuses it); only the release is enqueued elsewhere.
static xmc_status release(xmc_instance *inst, xmc_slot *slot, xmc_stream *s, xmc_request **out) {
    return host()->slot_release(inst, slot, s ? own_stream(inst) : s, out);
}
static xmc_status release_batch(xmc_instance *inst, xmc_slot *const *slots, size_t n, xmc_stream *s,
                                xmc_request **out) {
    return host()->slot_release_batch(inst, slots, n, s ? own_stream(inst) : s, out);
}
static xmc_status close_report(xmc_instance *inst, xmc_close_report *out) {
    {
        std::lock_guard<std::mutex> lock(mu);
        own.erase(inst);  // the instance's streams go with it
    }
    return host()->close_report(inst, out);
}
static xmc_status close(xmc_instance *inst) { return close_report(inst, nullptr); }
void plant(xmc_backend &t) {
    t.slot_release = release;
    t.slot_release_batch = release_batch;
    t.close = close;
    t.close_report = close_report;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_release_ignores_stream")
