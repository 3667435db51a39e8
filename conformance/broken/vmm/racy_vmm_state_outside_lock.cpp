// xmc-selftest: fails VMM-STATE
// xmc-selftest: filter VMM-STATE
// xmc-selftest: sanitize thread
// xmc-selftest: timeout 15
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 120
// Bug (race): a release or remap checks the slots' states under the book's lock,
// lets the lock go, and changes the states (and records the request's handle)
// without it. Two callers releasing one mapped slot at once both pass the check and
// both are accepted: the slot gets two releases (VMM-STATE: the second is busy), and
// the unlocked change races every other caller's and worker's use of the book.
// After a failed check the doubled release leaves a request no worker ever finishes, so the
// run then hangs until qualify's limit: a short limit (15 s) fails it as surely and sooner.
#include "broken.hpp"
#include "vmm.hpp"

#include <thread>

namespace xmc::broken {
using namespace xmc::host;

static xmc_status submit(xmc_instance *inst, const char *call, bool remap, xmc_slot *const *handles, size_t n,
                         xmc_stream *stream, const void *const *srcs, const size_t *src_bytes, uint32_t flags,
                         xmc_request **out) {
    const be::Batch b{call, remap, handles, n, stream, srcs, src_bytes, flags, out};
    if (xmc_status st = be::check_batch(inst, b); st != XMC_OK) return st;
    std::shared_ptr<Vmm> vp = static_cast<Instance *>(inst)->vmm;
    Vmm &v = *vp;
    std::shared_ptr<Request> r;
    {
        std::lock_guard<std::mutex> lock(v.mu);
        if (xmc_status st = be::make_request(inst, v, b, &r); st != XMC_OK) return st;
    }
    std::this_thread::yield();
    be::commit(v, r, out);  // the bug: the states change outside the lock that checked them
    std::lock_guard<std::mutex> lock(v.mu);
    return v.ops.enqueue_point(inst, call, stream, vp, r);
}

static xmc_status slot_release(xmc_instance *inst, xmc_slot *slot, xmc_stream *s, xmc_request **out) {
    return submit(inst, "slot_release", false, &slot, 1, s, nullptr, nullptr, 0, out);
}
static xmc_status slot_remap(xmc_instance *inst, xmc_slot *slot, xmc_stream *s, const void *src, size_t src_bytes,
                             uint32_t flags, xmc_request **out) {
    return submit(inst, "slot_remap", true, &slot, 1, s, &src, &src_bytes, flags, out);
}
void plant(xmc_backend &t) {
    t.slot_release = slot_release;
    t.slot_remap = slot_remap;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_racy_vmm_state_outside_lock")
