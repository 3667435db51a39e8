// xmc-selftest: fails COPY-REUSE
// xmc-selftest: filter COPY-*
// xmc-selftest: timeout 60
// xmc-selftest: quick
// Bug: a stream wait does not wait for an event recorded on a stream that is
// still busy reading a pinned buffer. The backend treats a copy out of pinned
// memory as done with the buffer once it is enqueued (as a caching allocator
// that hands a pinned block back when its copy is queued), so a wait for an
// event whose stream's last copy reads pinned memory is skipped, and the
// waiting stream may overwrite the buffer while it is still being read.
#include "broken.hpp"

#include <map>
#include <mutex>

namespace xmc::broken {
namespace {
struct Tags {
    std::mutex mu;
    std::map<xmc_stream *, bool> last_reads_pinned;  // by stream: its last copy's source is pinned
    std::map<xmc_event *, bool> skip;                // by event: recorded after such a copy
};
Tags &tags() {
    static Tags t;
    return t;
}
} // namespace

// The reference's answer `st`; on success, `tag` updates the tags under their lock.
template <class Tag> static xmc_status tag_if_ok(xmc_status st, Tag tag) {
    if (st == XMC_OK) {
        std::lock_guard<std::mutex> lock(tags().mu);
        tag(tags());
    }
    return st;
}

// Handles are reused by the allocator: a new stream or event starts untagged.
static xmc_status stream_create(xmc_instance *inst, int32_t device, xmc_stream **out) {
    return tag_if_ok(host()->stream_create(inst, device, out), [&](Tags &t) { t.last_reads_pinned[*out] = false; });
}

static xmc_status event_create(xmc_instance *inst, int32_t device, xmc_event **out) {
    return tag_if_ok(host()->event_create(inst, device, out), [&](Tags &t) { t.skip[*out] = false; });
}

static xmc_status copy(xmc_instance *inst, const xmc_copy_desc *desc, xmc_stream *s) {
    return tag_if_ok(host()->copy(inst, desc, s),
                     [&](Tags &t) { t.last_reads_pinned[s] = desc->src.kind == XMC_MEM_PINNED; });
}

static xmc_status event_record(xmc_instance *inst, xmc_event *e, xmc_stream *s) {
    return tag_if_ok(host()->event_record(inst, e, s), [&](Tags &t) { t.skip[e] = t.last_reads_pinned[s]; });
}

static xmc_status stream_wait_event(xmc_instance *inst, xmc_stream *s, xmc_event *e) {
    {
        std::lock_guard<std::mutex> lock(tags().mu);
        auto it = tags().skip.find(e);
        if (it != tags().skip.end() && it->second) return XMC_OK;  // the bug
    }
    return host()->stream_wait_event(inst, s, e);
}

void plant(xmc_backend &t) {
    t.stream_create = stream_create;
    t.event_create = event_create;
    t.copy = copy;
    t.event_record = event_record;
    t.stream_wait_event = stream_wait_event;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_reuse_wait_skips_pinned_reader")
