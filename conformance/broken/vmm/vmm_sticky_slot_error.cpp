// xmc-selftest: fails VMM-ASYNC-ERROR,VMM-BATCH-PARTIAL,VMM-ERROR-CLEAR
// xmc-selftest: filter VMM-*
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 240
// Bug (VMM-ERROR-CLEAR): a request whose driver work failed leaves an error flag on each of its
// slots, and the next release or remap of such a slot is refused with the old failure.
#include "broken.hpp"
#include "vmm_track.hpp"

namespace xmc::broken {
namespace {
std::mutex mu;
std::set<xmc_slot *> flagged;

// True (and the flags cleared) when one of the n slots still carries an old failure.
bool sticky(xmc_slot *const *s, size_t n) {
    std::lock_guard<std::mutex> lock(mu);
    bool hit = false;
    for (size_t i = 0; i < n; ++i) hit |= flagged.erase(s[i]) != 0;
    return hit;
}
xmc_status refuse(xmc_instance *inst, const char *call) {
    return be::fail(inst, XMC_ERR_DRIVER, 0, call, "%s: the slot's last request failed", call);
}

xmc_status flag(xmc_instance *, const broken_vmm::Failed &f, xmc_status st) {
    std::lock_guard<std::mutex> lock(mu);
    flagged.insert(f.handles.begin(), f.handles.end());
    return st;
}
xmc_status release(xmc_instance *inst, xmc_slot *s, xmc_stream *on, xmc_request **out) {
    return sticky(&s, 1) ? refuse(inst, "slot_release") : broken_vmm::rec_release(inst, s, on, out);
}
xmc_status release_batch(xmc_instance *inst, xmc_slot *const *s, size_t n, xmc_stream *on, xmc_request **out) {
    return sticky(s, n) ? refuse(inst, "slot_release_batch") : broken_vmm::rec_release_batch(inst, s, n, on, out);
}
xmc_status remap(xmc_instance *inst, xmc_slot *s, xmc_stream *on, const void *src, size_t n, uint32_t f,
                 xmc_request **out) {
    return sticky(&s, 1) ? refuse(inst, "slot_remap") : broken_vmm::rec_remap(inst, s, on, src, n, f, out);
}
xmc_status remap_batch(xmc_instance *inst, xmc_slot *const *s, size_t n, xmc_stream *on, const void *const *src,
                       const size_t *b, uint32_t f, xmc_request **out) {
    return sticky(s, n) ? refuse(inst, "slot_remap_batch")
                        : broken_vmm::rec_remap_batch(inst, s, n, on, src, b, f, out);
}
} // namespace

void plant(xmc_backend &t) {
    broken_vmm::on_failed_wait(t, host(), flag);
    t.slot_release = release;
    t.slot_release_batch = release_batch;
    t.slot_remap = remap;
    t.slot_remap_batch = remap_batch;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_vmm_sticky_slot_error")
