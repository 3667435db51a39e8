// Graphs on the host (capability `graph`, GRAPH-CAPTURE): a graph is the list
// of ops a stream recorded between graph_begin and graph_end (stream.cpp: the
// ops of its copies and host callbacks). A launch enqueues one op on the
// launch stream that runs the recorded ops in order, so the graph's work comes
// after the stream's prior work and before its later work (VMM-GRAPH-ORDER: a
// release enqueued after a launch waits for it). The ops read and write the
// addresses they were recorded with, so a graph over a slot sees the slot's
// backing of the moment it runs (VMM-GRAPH).
#include "handles.hpp"
#include "host.hpp"

#include <condition_variable>

namespace xmc::host {

struct Graph {
    std::shared_ptr<const Recording> ops;
    std::mutex mu;
    std::condition_variable cv;
    int running = 0;  // launches enqueued and not finished: destroy waits for them
};

namespace {

Instance *as_host(xmc_instance *inst) { return static_cast<Instance *>(inst); }

std::shared_ptr<Graph> find_graph(xmc_instance *inst, xmc_graph *h) {
    return be::find_handle(as_host(inst)->mu, as_host(inst)->graphs, h);
}

using be::bad_graph;

// GRAPH-CAPTURE: destroy never frees what a launch still runs.
void wait_launches(Graph &g) {
    std::unique_lock<std::mutex> lock(g.mu);
    g.cv.wait(lock, [&] { return g.running == 0; });
}

xmc_status ready(xmc_instance *, const char *) { return XMC_OK; }  // no driver: always there

xmc_status begin(xmc_instance *inst, xmc_stream *s) {
    // A remap's reload copies still to come on s would be recorded, not run (slot_book.hpp).
    return vmm_before_capture(inst, s, [&] { return begin_capture(inst, s, "graph_begin"); });
}

xmc_status end(xmc_instance *inst, xmc_stream *s, xmc_graph **out) {
    Recording ops;
    if (xmc_status st = end_capture(inst, s, "graph_end", &ops); st != XMC_OK) return st;
    auto g = std::make_shared<Graph>();
    g->ops = std::make_shared<const Recording>(std::move(ops));
    auto *h = reinterpret_cast<xmc_graph *>(g.get());
    std::lock_guard<std::mutex> lock(as_host(inst)->mu);
    as_host(inst)->graphs[h] = std::move(g);
    *out = h;
    return XMC_OK;
}

xmc_status launch(xmc_instance *inst, xmc_graph *h, xmc_stream *s) {
    std::shared_ptr<Graph> g = find_graph(inst, h);
    if (!g) return bad_graph(inst, "graph_launch", h);
    {
        std::lock_guard<std::mutex> lock(g->mu);
        ++g->running;
    }
    // GRAPH-CAPTURE: the recorded ops in order, as one op of the launch stream
    // (refused, like every op but a copy or callback, on a capturing stream).
    const xmc_status st = enqueue(inst, s, "graph_launch", [g] {
        for (const auto &op : *g->ops) op();
        std::lock_guard<std::mutex> lock(g->mu);
        --g->running;
        g->cv.notify_all();
    });
    if (st != XMC_OK) {
        std::lock_guard<std::mutex> lock(g->mu);
        --g->running;
        g->cv.notify_all();
    }
    return st;
}

xmc_status destroy(xmc_instance *inst, xmc_graph *h) {
    std::shared_ptr<Graph> g = be::take_handle(as_host(inst)->mu, as_host(inst)->graphs, h);
    if (!g) return bad_graph(inst, "graph_destroy", h);
    wait_launches(*g);
    return XMC_OK;
}

} // namespace

XMC_GRAPH_OPS(ready, begin, end, launch, destroy)

void graph_close(Instance *in) {
    std::map<xmc_graph *, std::shared_ptr<Graph>> graphs;
    {
        std::lock_guard<std::mutex> lock(in->mu);
        graphs.swap(in->graphs);
    }
    for (auto &[h, g] : graphs) wait_launches(*g);
}

} // namespace xmc::host
