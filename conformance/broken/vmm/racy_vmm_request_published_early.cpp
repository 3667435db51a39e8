// xmc-selftest: fails VMM-STATE
// xmc-selftest: filter VMM-STATE
// xmc-selftest: sanitize thread
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 240
// Bug (race): a remap publishes its request (its point on the stream, the slots'
// states, its handle) before the request is complete, and fills in its sources and
// copies after the lock went. A stream that reaches the point at once hands the
// request to a worker, which reads the sources while they are written (or before:
// no source, no copy), so the reload copies nothing or garbage, or the request
// never finishes.
#include "broken.hpp"
#include "vmm.hpp"

#include <thread>

namespace xmc::broken {
using namespace xmc::host;

static xmc_status slot_remap(xmc_instance *inst, xmc_slot *slot, xmc_stream *stream, const void *src,
                             size_t src_bytes, uint32_t flags, xmc_request **out) {
    const be::Batch b{"slot_remap", true, &slot, 1, stream, &src, &src_bytes, flags, out};
    if (xmc_status st = be::check_batch(inst, b); st != XMC_OK) return st;
    std::shared_ptr<Vmm> vp = static_cast<Instance *>(inst)->vmm;
    Vmm &v = *vp;
    std::shared_ptr<Request> r;
    std::vector<const void *> srcs;
    std::vector<CopyState> copies;
    {
        std::lock_guard<std::mutex> lock(v.mu);
        if (xmc_status st = be::make_request(inst, v, b, &r); st != XMC_OK) return st;
        srcs.swap(r->srcs);  // to be filled in "once the request is out"
        copies.swap(r->copies);
        if (xmc_status st = v.ops.enqueue_point(inst, "slot_remap", stream, vp, r); st != XMC_OK)
            return st;
        be::commit(v, r, out);
    }
    std::this_thread::yield();
    r->srcs = srcs;  // the bug: completed after it was published, without the lock
    r->copies = copies;
    return XMC_OK;
}
void plant(xmc_backend &t) { t.slot_remap = slot_remap; }
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_racy_vmm_request_published_early")
