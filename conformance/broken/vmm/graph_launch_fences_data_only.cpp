// xmc-selftest: fails VMM-GRAPH-ORDER
// xmc-selftest: filter VMM-*
// xmc-selftest: timeout 60
// xmc-selftest: env RC_PARAMS=max_success=20
// xmc-selftest: ctest-timeout 240
// Bug (VMM-GRAPH-ORDER): a graph launch runs on a side stream of the
// backend's, after the launch stream's prior work; the launch stream's own
// later copies, callbacks, event records and synchronize wait for it, but a
// slot release's stream point does not (only data work was fenced), so a
// release enqueued after a launch unmaps the slot while the graph still reads it.
#include "broken.hpp"

#include <map>
#include <mutex>
#include <set>

namespace xmc::broken {
namespace {

struct PerInstance {
    xmc_stream *side = nullptr;
    std::map<xmc_stream *, xmc_event *> done;  // per launch stream: recorded on `side` after its latest launch
    std::set<xmc_stream *> pending;            // launch streams whose later data work must wait for `done`
};
std::mutex mu;
std::map<xmc_instance *, PerInstance> per;

// Makes s wait for the graphs launched from it (skipped where the wait is
// refused, as on a capturing stream: nothing to order there).
void fence(xmc_instance *inst, xmc_stream *s) {
    xmc_event *e = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu);
        PerInstance &p = per[inst];
        if (!p.pending.count(s)) return;
        e = p.done[s];
    }
    host()->stream_wait_event(inst, s, e);
}

xmc_status graph_launch(xmc_instance *inst, xmc_graph *g, xmc_stream *s) {
    xmc_event *start = nullptr, *done = nullptr;
    xmc_stream *side = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu);
        PerInstance &p = per[inst];
        if (!p.side) host()->stream_create(inst, 0, &p.side);
        side = p.side;
        done = p.done[s];
    }
    if (!done) host()->event_create(inst, 0, &done);
    host()->event_create(inst, 0, &start);
    // A stream that cannot take the record (not live, capturing): the reference refuses the launch itself.
    if (host()->event_record(inst, start, s) != XMC_OK) {
        host()->event_destroy(inst, start);
        return host()->graph_launch(inst, g, s);
    }
    host()->stream_wait_event(inst, side, start);
    host()->event_destroy(inst, start);  // the wait holds its own reference
    const xmc_status st = host()->graph_launch(inst, g, side);
    host()->event_record(inst, done, side);
    std::lock_guard<std::mutex> lock(mu);
    PerInstance &p = per[inst];
    p.done[s] = done;
    if (st == XMC_OK) p.pending.insert(s);
    return st;
}

xmc_status copy(xmc_instance *inst, const xmc_copy_desc *d, xmc_stream *s) {
    fence(inst, s);
    return host()->copy(inst, d, s);
}
xmc_status host_callback(xmc_instance *inst, xmc_stream *s, xmc_host_fn fn, void *user) {
    fence(inst, s);
    return host()->host_callback(inst, s, fn, user);
}
xmc_status event_record(xmc_instance *inst, xmc_event *e, xmc_stream *s) {
    fence(inst, s);
    return host()->event_record(inst, e, s);
}
xmc_status stream_synchronize(xmc_instance *inst, xmc_stream *s) {
    const xmc_status st = host()->stream_synchronize(inst, s);
    if (st != XMC_OK) return st;
    xmc_event *e = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu);
        PerInstance &p = per[inst];
        if (p.pending.count(s)) e = p.done[s];
    }
    return e ? host()->event_synchronize(inst, e) : XMC_OK;
}

xmc_status close(xmc_instance *inst) {
    {
        std::lock_guard<std::mutex> lock(mu);
        per.erase(inst);  // its side stream and events go with the instance
    }
    return host()->close(inst);
}

} // namespace

void plant(xmc_backend &t) {
    t.graph_launch = graph_launch;
    t.copy = copy;
    t.host_callback = host_callback;
    t.event_record = event_record;
    t.stream_synchronize = stream_synchronize;
    t.close = close;
}
} // namespace xmc::broken
XMC_BROKEN_BACKEND("broken_graph_launch_fences_data_only")
