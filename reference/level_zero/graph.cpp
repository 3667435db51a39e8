// Graphs through Level Zero (capability `graph`, GRAPH-CAPTURE): a capture is
// a regular command list (zeCommandListCreate, not immediate) that the
// stream's copies and host callbacks are appended to instead of its immediate
// list; graph_end closes it; each launch executes it on the graph's own command
// queue (zeCommandQueueExecuteCommandLists). The list is recorded once:
//   wait(start) | the captured work | signal(end)
// and a launch on stream s appends to s's immediate list
//   signal(start) | wait(end) | signal(passed)
// so the graph runs after s's prior work and before its later work
// (VMM-GRAPH-ORDER: a release enqueued after a launch waits for it). The
// events are the graph's, reset by each launch once the previous launch has
// passed: one graph's launches run one after another, and a second launch
// waits on the host for the first to be passed. Destroy waits for `passed`
// before the list, queue and events go. The list's copies read and write the
// addresses they were recorded with, so a graph over a slot sees the slot's
// backing when it runs (VMM-GRAPH).
#include "handles.hpp"
#include "ze.hpp"

namespace xmc::ze {

namespace {

enum { kStart = 0, kEnd = 1, kPassed = 2 };

Instance *as_ze(xmc_instance *inst) { return static_cast<Instance *>(inst); }

using be::bad_graph;
using be::bad_stream;

std::shared_ptr<Graph> find_graph(xmc_instance *inst, xmc_graph *h) {
    return be::find_handle(as_ze(inst)->mu, as_ze(inst)->graphs, h);
}

// Frees what g holds (after its last launch has passed); the first failure.
ze_result_t free_graph(Graph &g) {
    Driver &d = Driver::get();
    ze_result_t first = ZE_RESULT_SUCCESS;
    auto keep = [&](ze_result_t r) {
        if (first == ZE_RESULT_SUCCESS) first = r;
    };
    if (g.queue) keep(d.zeCommandQueueDestroy(g.queue));
    if (g.list) keep(d.zeCommandListDestroy(g.list));
    g.queue = nullptr;
    g.list = nullptr;
    for (auto &cb : g.callbacks) {
        ze_event_handle_t ev[2] = {cb->reached, cb->done};
        keep(destroy_events(&cb->pool, ev, 2));
    }
    g.callbacks.clear();
    keep(destroy_events(&g.pool, g.events, 3));
    return first;
}

// GRAPH-CAPTURE: destroy waits for the latest launch to be passed.
ze_result_t wait_launch(Graph &g) {
    if (!g.launched) return ZE_RESULT_SUCCESS;
    const ze_result_t r = Driver::get().zeEventHostSynchronize(g.events[kPassed], UINT64_MAX);
    g.launched = false;
    return r;
}

} // namespace

xmc_status refuse_capturing(xmc_instance *inst, const char *call) {
    return be::fail(inst, XMC_ERR_CAPTURING, 0, call,
                    "%s: the stream is capturing a graph (graph_begin), which this call may not join", call);
}

namespace {

xmc_status ready(xmc_instance *inst, const char *call) { return require(inst, call, Driver::get().missing_graph); }

xmc_status begin(xmc_instance *inst, xmc_stream *sh) {
    const char *call = "graph_begin";
    Driver &d = Driver::get();
    std::shared_ptr<Stream> s = find_stream(inst, sh);
    if (!s) return bad_stream(inst, call, sh);
    // A remap whose copies are still to come on s is waited for (slot_book.hpp).
    return vmm_before_capture(inst, sh, [&]() -> xmc_status {
        std::lock_guard<std::mutex> lock(s->append_mu);
        if (s->capture) return be::fail(inst, XMC_ERR_CAPTURING, 0, call, "%s: the stream is capturing already", call);
        auto g = std::make_shared<Graph>();
        g->device = s->device;
        g->ctx = s->ctx;
        ze_command_list_desc_t ld{ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, nullptr, 0, 0};
        ze_result_t r = d.zeCommandListCreate(s->ctx, d.devices[static_cast<size_t>(s->device)].handle, &ld, &g->list);
        const char *what = "zeCommandListCreate";
        if (r == ZE_RESULT_SUCCESS) {
            what = "zeEventPoolCreate/zeEventCreate";
            r = make_events(s->ctx, 3, &g->pool, g->events);
        }
        if (r == ZE_RESULT_SUCCESS) {
            what = "zeCommandListAppendWaitOnEvents";
            r = d.zeCommandListAppendWaitOnEvents(g->list, 1, &g->events[kStart]);
        }
        if (r != ZE_RESULT_SUCCESS) {
            free_graph(*g);  // undone; the failure reported is the one that stopped it
            return driver_fail(inst, r, call, what);
        }
        s->capture = std::move(g);
        return XMC_OK;
    });
}

xmc_status end(xmc_instance *inst, xmc_stream *sh, xmc_graph **out) {
    const char *call = "graph_end";
    Driver &d = Driver::get();
    std::shared_ptr<Stream> s = find_stream(inst, sh);
    if (!s) return bad_stream(inst, call, sh);
    std::shared_ptr<Graph> g;
    {
        std::lock_guard<std::mutex> lock(s->append_mu);
        if (!s->capture)
            return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "graph_end: the stream is not capturing (no graph_begin)");
        g = std::move(s->capture);  // the capture ends here, whatever follows
    }
    ze_result_t r = d.zeCommandListAppendSignalEvent(g->list, g->events[kEnd]);
    const char *what = "zeCommandListAppendSignalEvent";
    if (r == ZE_RESULT_SUCCESS) {
        what = "zeCommandListClose";
        r = d.zeCommandListClose(g->list);
    }
    if (r == ZE_RESULT_SUCCESS) {
        what = "zeCommandQueueCreate";
        ze_command_queue_desc_t qd{ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0,
                                   ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS, ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
        r = d.zeCommandQueueCreate(g->ctx, d.devices[static_cast<size_t>(g->device)].handle, &qd, &g->queue);
    }
    if (r != ZE_RESULT_SUCCESS) {
        free_graph(*g);
        return driver_fail(inst, r, call, what);
    }
    auto *h = be::new_cookie<xmc_graph>();
    std::lock_guard<std::mutex> lock(as_ze(inst)->mu);
    as_ze(inst)->graphs[h] = std::move(g);
    *out = h;
    return XMC_OK;
}

xmc_status launch(xmc_instance *inst, xmc_graph *gh, xmc_stream *sh) {
    const char *call = "graph_launch";
    std::shared_ptr<Graph> g = find_graph(inst, gh);
    if (!g) return bad_graph(inst, call, gh);
    std::shared_ptr<Stream> s = find_stream(inst, sh);
    if (!s) return bad_stream(inst, call, sh);
    if (s->device != g->device)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: a graph of device %d launched on a stream of device %d",
                        call, g->device, s->device);
    if (capturing(*s)) return refuse_capturing(inst, call);
    Driver &d = Driver::get();
    std::lock_guard<std::mutex> launch(g->launch_mu);
    // The previous launch has passed: its events, and its callbacks', may be reset.
    if (ze_result_t r = wait_launch(*g); r != ZE_RESULT_SUCCESS)
        return driver_fail(inst, r, call, "zeEventHostSynchronize of the previous launch");
    ze_result_t r = ZE_RESULT_SUCCESS;
    for (ze_event_handle_t ev : g->events)
        if (r == ZE_RESULT_SUCCESS) r = d.zeEventHostReset(ev);
    for (auto &cb : g->callbacks)
        for (ze_event_handle_t ev : {cb->reached, cb->done})
            if (r == ZE_RESULT_SUCCESS) r = d.zeEventHostReset(ev);
    if (r != ZE_RESULT_SUCCESS) return driver_fail(inst, r, call, "zeEventHostReset");
    // Queued first: it waits for `start`, which nothing signals yet.
    if (r = d.zeCommandQueueExecuteCommandLists(g->queue, 1, &g->list, nullptr); r != ZE_RESULT_SUCCESS)
        return driver_fail(inst, r, call, "zeCommandQueueExecuteCommandLists");
    g->launched = true;
    std::lock_guard<std::mutex> append(s->append_mu);
    if (s->capture) {  // a capture begun meanwhile: the launch cannot join it
        d.zeEventHostSignal(g->events[kStart]);  // let the queued list finish, unordered, and pass
        d.zeEventHostSynchronize(g->events[kEnd], UINT64_MAX);
        d.zeEventHostSignal(g->events[kPassed]);
        return refuse_capturing(inst, call);
    }
    // GRAPH-CAPTURE: after the stream's prior work, before its later work.
    r = d.zeCommandListAppendSignalEvent(s->list, g->events[kStart]);
    const char *what = "zeCommandListAppendSignalEvent";
    if (r == ZE_RESULT_SUCCESS) {
        what = "zeCommandListAppendWaitOnEvents";
        r = d.zeCommandListAppendWaitOnEvents(s->list, 1, &g->events[kEnd]);
    }
    if (r == ZE_RESULT_SUCCESS) {
        what = "zeCommandListAppendSignalEvent";
        r = d.zeCommandListAppendSignalEvent(s->list, g->events[kPassed]);
    }
    if (r != ZE_RESULT_SUCCESS) {
        // The list is queued: it must not wait forever. It runs out of order
        // and the launch reports the failure.
        for (int k : {kStart, kEnd, kPassed}) d.zeEventHostSignal(g->events[k]);
        return driver_fail(inst, r, call, what);
    }
    // The recorded callbacks, in the order the list reaches them, to this
    // stream's callback thread: behind its earlier callbacks, ahead of later ones.
    {
        std::lock_guard<std::mutex> cl(s->cb_mu);
        for (auto &cb : g->callbacks) s->queue.push_back(cb.get());
    }
    s->cb_cv.notify_all();
    return XMC_OK;
}

xmc_status destroy(xmc_instance *inst, xmc_graph *gh) {
    std::shared_ptr<Graph> g = be::take_handle(as_ze(inst)->mu, as_ze(inst)->graphs, gh);
    if (!g) return bad_graph(inst, "graph_destroy", gh);
    be::free_cookie(gh);
    std::lock_guard<std::mutex> launch(g->launch_mu);
    const ze_result_t waited = wait_launch(*g);
    const ze_result_t freed = free_graph(*g);
    if (waited != ZE_RESULT_SUCCESS) return driver_fail(inst, waited, "graph_destroy", "zeEventHostSynchronize");
    if (freed != ZE_RESULT_SUCCESS)
        return driver_fail(inst, freed, "graph_destroy", "zeCommandQueueDestroy/zeCommandListDestroy/zeEventDestroy");
    return XMC_OK;
}

} // namespace

XMC_GRAPH_OPS(ready, begin, end, launch, destroy)

void graph_close(Instance *in) {
    std::vector<std::shared_ptr<Graph>> all;
    {
        std::lock_guard<std::mutex> lock(in->mu);
        for (auto &[h, g] : in->graphs) {
            all.push_back(g);
            be::free_cookie(h);
        }
        in->graphs.clear();
        for (auto &[h, s] : in->streams) {
            std::lock_guard<std::mutex> append(s->append_mu);
            if (s->capture) all.push_back(std::move(s->capture));  // a capture left open: never launched
        }
    }
    for (auto &g : all) {
        std::lock_guard<std::mutex> launch(g->launch_mu);
        wait_launch(*g);
        free_graph(*g);
    }
}

} // namespace xmc::ze
