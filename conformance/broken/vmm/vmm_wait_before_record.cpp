// xmc-selftest: fails VMM-EVENT-WAIT
// xmc-selftest: filter VMM-*
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 180
// Bug: a consumer stream is made to wait on the reload
// copy's event as it stands; before the worker has recorded it, waiting on
// an unrecorded event is a no-op, so the consumer does not wait at all.
#include "broken.hpp"

#include <mutex>
#include <set>

namespace xmc::broken {
namespace {
std::mutex mu;
std::set<xmc_request *> remaps;
void remember(xmc_status st, xmc_request **out) {
    std::lock_guard<std::mutex> lock(mu);
    if (st == XMC_OK) remaps.insert(*out);
}
} // namespace

static xmc_status remap(xmc_instance *inst, xmc_slot *s, xmc_stream *on, const void *src, size_t n, uint32_t f,
                        xmc_request **out) {
    xmc_status st = host()->slot_remap(inst, s, on, src, n, f, out);
    remember(st, out);
    return st;
}
static xmc_status remap_batch(xmc_instance *inst, xmc_slot *const *s, size_t n, xmc_stream *on,
                              const void *const *src, const size_t *b, uint32_t f, xmc_request **out) {
    xmc_status st = host()->slot_remap_batch(inst, s, n, on, src, b, f, out);
    remember(st, out);
    return st;
}
static xmc_status stream_wait(xmc_instance *inst, xmc_request *r, xmc_stream *s) {
    xmc_request_info i{};
    bool remap_request = false;
    {
        std::lock_guard<std::mutex> lock(mu);
        remap_request = remaps.count(r) > 0;
    }
    // The worker records the copy's event when it has run the remap.
    if (remap_request && host()->request_query(inst, r, &i) == XMC_OK && !i.done) return XMC_OK;
    return host()->request_stream_wait(inst, r, s);
}
void plant(xmc_backend &t) {
    t.slot_remap = remap;
    t.slot_remap_batch = remap_batch;
    t.request_stream_wait = stream_wait;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_wait_before_record")
