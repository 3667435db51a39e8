// Graphs through the driver (capability `graph`, GRAPH-CAPTURE): stream capture
// with cuStreamBeginCapture in thread-local mode, cuStreamEndCapture, and an
// executable graph (cuGraphInstantiate; the graph itself is destroyed at once,
// the exec does not need it) launched with cuGraphLaunch.
//
// Mode: thread-local. Global mode would make the driver refuse cuMemAlloc and
// cuMemHostRegister from EVERY thread while the capture runs (and end the
// capture), slot workers and other callers included (recorded on an H200,
// driver 580: probe cases capture_global_other_thread_*); thread-local refuses
// them on the capturing thread only, and relaxed would drop the driver's check
// that a capture is ended where it was begun.
//
// Destroy: cuGraphExecDestroy does not wait for a launch in flight (probe:
// graph_exec_destroy_while_running_waits is "no"), so every launch records an
// event on its stream (one per stream the graph was launched on, recorded
// again by each launch there) and destroy waits for each before the exec and
// the recorded callbacks go.
//
// A graph's copies read and write the device addresses they were captured
// with, so a graph over a slot reads the backing mapped at the slot's address
// when it runs (VMM-GRAPH; probe: graph_vmm_remap_reads_new_backing).
#include "cuda.hpp"
#include "handles.hpp"

#include <new>

namespace xmc::cuda {

struct Graph {
    CUgraphExec exec = nullptr;
    int32_t device = 0;
    CUcontext ctx = nullptr;
    std::vector<std::unique_ptr<RecordedCallback>> callbacks;  // what its host nodes call
    std::mutex mu;
    std::map<CUstream, CUevent> launched;  // per stream: recorded after the latest launch there
};

namespace {

Instance *as_cuda(xmc_instance *inst) { return static_cast<Instance *>(inst); }

using be::bad_graph;
using be::bad_stream;

std::shared_ptr<Graph> find_graph(xmc_instance *inst, xmc_graph *h) {
    return be::find_handle(as_cuda(inst)->mu, as_cuda(inst)->graphs, h);
}

// GRAPH-CAPTURE: waits for every launch of g, then frees it; the first failure.
CUresult destroy_graph(Graph &g) {
    Driver &d = Driver::get();
    std::lock_guard<std::mutex> lock(g.mu);
    CtxScope scope(d, g.ctx);
    CUresult first = scope.result();
    if (first != CUDA_SUCCESS) return first;
    for (auto &[stream, ev] : g.launched) {
        // Waited for even when a launch failed on the device: nothing may
        // still run when the callbacks go.
        CUresult r = d.cuEventSynchronize(ev);
        if (first == CUDA_SUCCESS) first = r;
        r = d.cuEventDestroy(ev);
        if (first == CUDA_SUCCESS) first = r;
    }
    g.launched.clear();
    const CUresult r = d.cuGraphExecDestroy(g.exec);
    g.exec = nullptr;
    return first != CUDA_SUCCESS ? first : r;
}

// Ends the capture on `s` (its stream record under in->mu) whatever the
// driver says, destroying the graph it gives: for close.
void abandon_capture(Stream &s) {
    Driver &d = Driver::get();
    CtxScope scope(d, s.ctx);
    if (scope.result() != CUDA_SUCCESS) return;
    CUgraph g = nullptr;
    if (d.cuStreamEndCapture(s.stream, &g) == CUDA_SUCCESS && g) d.cuGraphDestroy(g);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (d.cuStreamIsCapturing(s.stream, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_NONE) s.capture.reset();
}

} // namespace

xmc_status refuse_capturing(xmc_instance *inst, const char *call, CUresult native) {
    return be::fail(inst, XMC_ERR_CAPTURING, native, call,
                    "%s: the stream is capturing a graph (graph_begin), which this call may not join; refused before "
                    "the driver, which answers %s (%d) during a capture",
                    call, Driver::get().result_name(native), static_cast<int>(native));
}

namespace {

xmc_status ready(xmc_instance *inst, const char *call) { return require(inst, call, Driver::get().missing_graph); }

xmc_status begin(xmc_instance *inst, xmc_stream *sh) {
    const char *call = "graph_begin";
    Stream probe;
    if (!find_stream(inst, sh, &probe)) return bad_stream(inst, call, sh);
    // A remap's reload copies still to come on the stream would be captured (slot_book.hpp).
    return vmm_before_capture(inst, sh, [&]() -> xmc_status {
        Instance *in = as_cuda(inst);
        std::lock_guard<std::mutex> lock(in->mu);
        auto it = in->streams.find(sh);
        if (it == in->streams.end()) return bad_stream(inst, call, sh);
        Stream &s = it->second;
        // The driver answers CUDA_ERROR_ILLEGAL_STATE (probe: capture_begin_twice).
        if (s.capture) return refuse_capturing(inst, call, CUDA_ERROR_ILLEGAL_STATE);
        Driver &d = Driver::get();
        CtxScope scope(d, s.ctx);
        CUresult r = scope.result();
        // Relaxed: in thread-local mode the H200's driver (580.159.04) refuses a
        // synchronize of any other stream or event from the capturing thread with
        // 900 and invalidates the capture, so GRAPH-CAPTURE's "other streams
        // work meanwhile" failed there; the capturing stream's own refusals are
        // the backend's (refuse_capturing) in every mode.
        if (r == CUDA_SUCCESS) r = d.cuStreamBeginCapture(s.stream, CU_STREAM_CAPTURE_MODE_RELAXED);
        if (r != CUDA_SUCCESS) return driver_fail(inst, r, call, "cuStreamBeginCapture");
        s.capture = std::make_shared<Capture>();
        return XMC_OK;
    });
}

xmc_status end(xmc_instance *inst, xmc_stream *sh, xmc_graph **out) {
    const char *call = "graph_end";
    Instance *in = as_cuda(inst);
    Driver &d = Driver::get();
    auto g = std::make_shared<Graph>();
    {
        std::lock_guard<std::mutex> lock(in->mu);
        auto it = in->streams.find(sh);
        if (it == in->streams.end()) return bad_stream(inst, call, sh);
        Stream &s = it->second;
        // The driver answers CUDA_ERROR_ILLEGAL_STATE (probe: capture_end_not_capturing).
        if (!s.capture)
            return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, CUDA_ERROR_ILLEGAL_STATE, call,
                            "graph_end: the stream is not capturing (no graph_begin)");
        CtxScope scope(d, s.ctx);
        CUresult r = scope.result();
        CUgraph graph = nullptr;
        if (r == CUDA_SUCCESS) r = d.cuStreamEndCapture(s.stream, &graph);
        if (r != CUDA_SUCCESS) {
            // Still capturing (another thread's end: CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
            // or ended by the driver (a capture it invalidated): the stream says which.
            CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_ACTIVE;
            if (scope.result() == CUDA_SUCCESS && d.cuStreamIsCapturing(s.stream, &cs) == CUDA_SUCCESS &&
                cs == CU_STREAM_CAPTURE_STATUS_NONE)
                s.capture.reset();
            if (graph) d.cuGraphDestroy(graph);
            return driver_fail(inst, r, call, "cuStreamEndCapture");
        }
        std::shared_ptr<Capture> cap = std::move(s.capture);
        r = d.cuGraphInstantiate(&g->exec, graph, 0);
        d.cuGraphDestroy(graph);  // the exec does not need it (probe: graph_launch_after_graph_destroyed)
        if (r != CUDA_SUCCESS) return driver_fail(inst, r, call, "cuGraphInstantiateWithFlags");
        std::lock_guard<std::mutex> cl(cap->mu);
        g->callbacks = std::move(cap->callbacks);
        g->device = s.device;
        g->ctx = s.ctx;
    }
    auto *h = be::new_cookie<xmc_graph>();
    std::lock_guard<std::mutex> lock(in->mu);
    in->graphs[h] = std::move(g);
    *out = h;
    return XMC_OK;
}

xmc_status launch(xmc_instance *inst, xmc_graph *gh, xmc_stream *sh) {
    const char *call = "graph_launch";
    std::shared_ptr<Graph> g = find_graph(inst, gh);
    if (!g) return bad_graph(inst, call, gh);
    Stream s;
    if (!find_stream(inst, sh, &s)) return bad_stream(inst, call, sh);
    if (s.capture) return refuse_capturing(inst, call);
    if (s.device != g->device)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: a graph of device %d launched on a stream of device %d",
                        call, g->device, s.device);
    Driver &d = Driver::get();
    std::lock_guard<std::mutex> lock(g->mu);
    CtxScope scope(d, s.ctx);
    CUresult r = scope.result();
    // The stream's launch event exists before the launch, so that a launch is never left untracked.
    CUevent &ev = g->launched[s.stream];
    if (r == CUDA_SUCCESS && !ev) r = d.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) {
        if (!ev) g->launched.erase(s.stream);
        return driver_fail(inst, r, call, "cuEventCreate");
    }
    // GRAPH-CAPTURE: after the stream's prior work, before its later work.
    if (r = d.cuGraphLaunch(g->exec, s.stream); r != CUDA_SUCCESS) return driver_fail(inst, r, call, "cuGraphLaunch");
    if (r = d.cuEventRecord(ev, s.stream); r != CUDA_SUCCESS) {
        d.cuStreamSynchronize(s.stream);  // untracked otherwise: let nothing of it run on
        return driver_fail(inst, r, call, "cuEventRecord after cuGraphLaunch");
    }
    return XMC_OK;
}

xmc_status destroy(xmc_instance *inst, xmc_graph *gh) {
    std::shared_ptr<Graph> g = be::take_handle(as_cuda(inst)->mu, as_cuda(inst)->graphs, gh);
    if (!g) return bad_graph(inst, "graph_destroy", gh);
    be::free_cookie(gh);
    if (CUresult r = destroy_graph(*g); r != CUDA_SUCCESS)
        return driver_fail(inst, r, "graph_destroy", "cuEventSynchronize/cuGraphExecDestroy");
    return XMC_OK;
}

} // namespace

XMC_GRAPH_OPS(ready, begin, end, launch, destroy)

void graph_close(Instance *in) {
    std::map<xmc_graph *, std::shared_ptr<Graph>> graphs;
    {
        std::lock_guard<std::mutex> lock(in->mu);
        for (auto &[h, s] : in->streams)
            if (s.capture) abandon_capture(s);
        graphs.swap(in->graphs);
    }
    for (auto &[h, g] : graphs) {
        destroy_graph(*g);
        be::free_cookie(h);
    }
}

} // namespace xmc::cuda
