// Stream capture and graphs, as the real driver answers them (recorded on one
// H200, driver 580, by hardware/probe: probe_cases_capture.cpp; replayed by the
// cuda_probe_replay_fake_capture test).
//
// A capture records the ops its streams enqueue (copies, memsets, host
// functions, stream memory operations, graph launches) instead of queueing
// them; records and waits of events inside it only mark dependencies. The ops
// are kept in the order they were enqueued, which respects every dependency of
// the captured graph, so a launch queues them in that order on its stream: a
// graph's copies resolve their device addresses when they run, so a graph over
// a VMM range reads and writes whatever is mapped there then (recorded:
// graph_vmm_remap_reads_new_backing), and one whose range is unmapped faults
// when it runs (the launch succeeds; the synchronize answers
// CUDA_ERROR_ILLEGAL_ADDRESS).
//
// Recorded answers (the probe's case names):
//   capture_legacy_stream      begin on the legacy stream: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
//   capture_begin_twice        CUDA_ERROR_ILLEGAL_STATE; capture_end_not_capturing, _other_stream too
//   capture_end_other_thread   global (or thread-local) mode: CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD
//   capture_bad_mode           CUDA_ERROR_INVALID_VALUE
//   capture_stream_synchronize / _query: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, the capture invalidated
//   capture_event_*_captured   CUDA_ERROR_CAPTURED_EVENT
//   capture_wait_event_outside CUDA_ERROR_STREAM_CAPTURE_ISOLATION
//   capture_fork_unjoined_end  CUDA_ERROR_STREAM_CAPTURE_UNJOINED
//   capture_*_mem_alloc, _register: refused (UNSUPPORTED) in global mode from any thread and in
//     thread-local mode from the capturing thread, invalidating the capture; relaxed: allowed
//   capture_global_legacy_stream_memset: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, invalidating
//   graph_launch_twice_at_once, graph_exec_destroy_while_running: succeed; destroy does not wait
// Assumed (not recorded; the documented behaviour, or the plainest reading of it):
//   - an invalidated capture refuses further work with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
//     and ends with it;
//   - the refusals of CUDA_ERROR_STREAM_CAPTURE_ISOLATION and _MERGE invalidate the capture;
//     CUDA_ERROR_CAPTURED_EVENT and CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD do not;
//   - waiting in a capture on an event never recorded adds no dependency (as outside one);
//   - cuStreamEndCapture on a stream forked into a capture (not its origin):
//     CUDA_ERROR_STREAM_CAPTURE_UNMATCHED; a fork is unjoined when the forked stream has work
//     the origin has not waited for;
//   - cuMemAlloc, cuMemHostRegister (recorded) and cuStreamSynchronize / cuEventSynchronize of
//     other streams and events (seen on the H200 with driver 580.159.04) are refused as unsafe;
//     cuMemCreate, cuMemMap, cuMemUnmap, cuMemSetAccess, cuMemRelease, event records and copies
//     of other streams pass in every mode (cuMemMap, cuMemUnmap and cuMemcpyHtoD were recorded);
//   - the per-thread default stream is treated as the legacy one for the implicit dependency;
//   - destroying a capturing stream removes it from the capture; its origin's destruction
//     invalidates the capture;
//   - cuGraphLaunch on a capturing stream records the graph's work into the capture;
//   - a second destroy, or a launch, of a destroyed graph or exec: CUDA_ERROR_INVALID_VALUE
//     (recorded on the H200; a real driver may crash instead).
#include <cinttypes>
#include <cstdio>

#include "fake_cuda_internal.h"

namespace xmc_fake {

namespace {

// Every member leaves the capture, and events recorded in it are ordinary again.
void finish_locked(const std::shared_ptr<Capture>& c) {
    State& g = state();
    for (uint64_t h : c->members) {
        auto it = g.streams.find(h);
        if (it != g.streams.end() && it->second->capture == c) it->second->capture.reset();
    }
    for (auto& [h, e] : g.events)
        if (e->captured_in == c->id) e->captured_in = 0;
    g.captures.erase(c->id);
}

}  // namespace

CUresult queue_op_locked(const std::shared_ptr<Stream>& s, Op op) {
    State& g = state();
    if (s->handle == 0) {
        // The legacy stream waits for the blocking streams of its context: one
        // that captures can give it nothing to wait for.
        for (auto& [id, c] : g.captures) {
            if (c->ctx != s->ctx) continue;
            for (uint64_t h : c->members) {
                auto it = g.streams.find(h);
                if (it != g.streams.end() && (it->second->flags & CU_STREAM_NON_BLOCKING) == 0) {
                    c->invalidated = true;
                    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
                }
            }
        }
    }
    if (s->capture) {
        Capture& c = *s->capture;
        if (c.invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        c.ops.push_back(std::move(op));
        c.last_op[s->handle] = c.ops.size();
        return CUDA_SUCCESS;
    }
    s->queue.push_back(std::move(op));
    g.cv.notify_all();
    return CUDA_SUCCESS;
}

// Recorded (legacy_is_capturing_*, legacy_get_info_*): asking the legacy stream
// about a capture while a blocking stream of its context captures, in any mode,
// is CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and, unlike work queued there, leaves
// that capture valid; with only non-blocking streams capturing it answers "none".
CUresult legacy_query_refused_locked(const Stream& s) {
    if (s.handle != 0) return CUDA_SUCCESS;
    State& g = state();
    for (auto& [id, c] : g.captures) {
        if (c->ctx != s.ctx) continue;
        for (uint64_t h : c->members) {
            auto it = g.streams.find(h);
            if (it != g.streams.end() && (it->second->flags & CU_STREAM_NON_BLOCKING) == 0)
                return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        }
    }
    return CUDA_SUCCESS;
}

CUresult refuse_in_capture_locked(Stream& s) {
    s.capture->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult capture_record_locked(Stream& s, Event& e) {
    Capture& c = *s.capture;
    if (c.invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    e.captured_in = c.id;
    e.captured_stream = s.handle;
    e.captured_at = c.last_op[s.handle];
    return CUDA_SUCCESS;
}

CUresult capture_wait_locked(const std::shared_ptr<Stream>& s, Event& e, bool* handled) {
    State& g = state();
    *handled = false;
    if (e.captured_in != 0) {
        auto it = g.captures.find(e.captured_in);
        if (it == g.captures.end()) return CUDA_SUCCESS;  // not in progress: an ordinary event
        const std::shared_ptr<Capture>& c = it->second;
        *handled = true;
        if (s->capture && s->capture != c) {  // two captures would merge
            s->capture->invalidated = true;
            return CUDA_ERROR_STREAM_CAPTURE_MERGE;
        }
        if (c->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        if (!s->capture) {  // a fork: the stream joins the capture
            s->capture = c;
            c->members.insert(s->handle);
            return CUDA_SUCCESS;
        }
        if (s->handle == c->origin && e.captured_stream != c->origin) {  // a join
            size_t& j = c->joined[e.captured_stream];
            if (e.captured_at > j) j = e.captured_at;
        }
        return CUDA_SUCCESS;
    }
    if (!s->capture) return CUDA_SUCCESS;
    *handled = true;
    if (e.recorded == 0) return CUDA_SUCCESS;  // never recorded: no dependency at all
    s->capture->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
}

CUresult captured_event_locked(const Event& e) {
    return e.captured_in != 0 && state().captures.count(e.captured_in) ? CUDA_ERROR_CAPTURED_EVENT : CUDA_SUCCESS;
}

CUresult unsafe_in_capture_locked() {
    State& g = state();
    const std::thread::id me = std::this_thread::get_id();
    for (auto& [id, c] : g.captures)
        if (c->mode == CU_STREAM_CAPTURE_MODE_RELAXED && c->thread == me) return CUDA_SUCCESS;  // this thread is relaxed
    CUresult r = CUDA_SUCCESS;
    for (auto& [id, c] : g.captures)
        if (c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
            (c->mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && c->thread == me)) {
            c->invalidated = true;
            r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    return r;
}

void stream_leaves_capture_locked(Stream& s) {
    std::shared_ptr<Capture> c = s.capture;
    if (!c) return;
    if (c->origin == s.handle) {
        c->invalidated = true;
        finish_locked(c);
    } else {
        c->members.erase(s.handle);
    }
    s.capture.reset();
}

void graphs_free_all_locked() {
    State& g = state();
    g.captures.clear();
    g.graphs.clear();
    g.execs.clear();
}

void graph_ledger_locked(std::string& body, size_t& live) {
    State& g = state();
    char line[160];
    for (auto& [h, x] : g.graphs) {
        ++live;
        std::snprintf(line, sizeof line, "graph 0x%" PRIx64 " of context 0x%" PRIx64 ", %zu op(s)\n", h, x.ctx,
                      x.ops.size());
        body += line;
    }
    for (auto& [h, x] : g.execs) {
        ++live;
        std::snprintf(line, sizeof line, "executable graph 0x%" PRIx64 " of context 0x%" PRIx64 ", %zu op(s)\n", h,
                      x.ctx, x.ops.size());
        body += line;
    }
}

}  // namespace xmc_fake

using namespace xmc_fake;

// ---- capture --------------------------------------------------------------------------------

XMC_FAKE_EXPORT CUresult cuStreamBeginCapture(CUstream hStream, CUstreamCaptureMode mode) {
    FAKE_ENTER("cuStreamBeginCapture_v2");
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    std::shared_ptr<Stream> s = find_stream_locked(hStream, &err);
    if (!s) return err;
    if (hStream == nullptr || hStream == CU_STREAM_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (s->capture) return CUDA_ERROR_ILLEGAL_STATE;
    auto c = std::make_shared<Capture>();
    c->id = new_handle_locked();
    c->origin = s->handle;
    c->ctx = s->ctx;
    c->mode = mode;
    c->thread = std::this_thread::get_id();
    c->members.insert(s->handle);
    s->capture = c;
    g.captures[c->id] = c;
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
    FAKE_ENTER("cuStreamEndCapture");
    if (phGraph == nullptr) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    std::shared_ptr<Stream> s = find_stream_locked(hStream, &err);
    if (!s) return err;
    std::shared_ptr<Capture> c = s->capture;
    if (!c) return CUDA_ERROR_ILLEGAL_STATE;
    if (c->origin != s->handle) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && c->thread != std::this_thread::get_id())
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    finish_locked(c);
    *phGraph = nullptr;
    if (c->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    for (auto& [h, n] : c->last_op)
        if (h != c->origin && n > c->joined[h]) return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    const uint64_t h = new_handle_locked();
    g.graphs[h] = Graph{c->ctx, std::move(c->ops)};
    *phGraph = to_handle<CUgraph>(h);
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
    FAKE_ENTER("cuStreamIsCapturing");
    if (captureStatus == nullptr) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    std::shared_ptr<Stream> s = find_stream_locked(hStream, &err);
    if (!s) return err;
    if (CUresult r = legacy_query_refused_locked(*s); r != CUDA_SUCCESS) return r;
    *captureStatus = !s->capture ? CU_STREAM_CAPTURE_STATUS_NONE
                     : s->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                               : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                                                   cuuint64_t* id_out, CUgraph* graph_out,
                                                   const CUgraphNode** dependencies_out,
                                                   const CUgraphEdgeData** edgeData_out, size_t* numDependencies_out) {
    FAKE_ENTER("cuStreamGetCaptureInfo_v3");
    if (captureStatus_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    std::shared_ptr<Stream> s = find_stream_locked(hStream, &err);
    if (!s) return err;
    if (CUresult r = legacy_query_refused_locked(*s); r != CUDA_SUCCESS) return r;
    const Capture* c = s->capture.get();
    *captureStatus_out = !c ? CU_STREAM_CAPTURE_STATUS_NONE
                         : c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                          : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    // The graph being built and its dependency nodes are not modelled: none.
    if (id_out != nullptr) *id_out = c ? c->id : 0;
    if (graph_out != nullptr) *graph_out = nullptr;
    if (dependencies_out != nullptr) *dependencies_out = nullptr;
    if (edgeData_out != nullptr) *edgeData_out = nullptr;
    if (numDependencies_out != nullptr) *numDependencies_out = 0;
    return CUDA_SUCCESS;
}

// ---- graphs ----------------------------------------------------------------------------------

XMC_FAKE_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                     unsigned long long flags) {
    FAKE_ENTER("cuGraphInstantiateWithFlags");
    if (phGraphExec == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    auto it = g.graphs.find(from_handle(hGraph));
    if (it == g.graphs.end()) return CUDA_ERROR_INVALID_VALUE;  // recorded: graph_instantiate_null_graph
    const uint64_t h = new_handle_locked();
    g.execs[h] = it->second;  // its own copy of the ops: the graph may go first
    *phGraphExec = to_handle<CUgraphExec>(h);
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
    FAKE_ENTER("cuGraphLaunch");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    auto it = g.execs.find(from_handle(hGraphExec));
    if (it == g.execs.end()) return CUDA_ERROR_INVALID_VALUE;  // recorded: graph_launch_null_exec
    CUresult err = CUDA_SUCCESS;
    std::shared_ptr<Stream> s = find_stream_locked(hStream, &err);
    if (!s) return err;
    for (const Op& op : it->second.ops)
        if (CUresult r = queue_op_locked(s, op); r != CUDA_SUCCESS) return r;
    return CUDA_SUCCESS;
}

// Does not wait for launches in flight: their ops are queued already
// (recorded: graph_exec_destroy_while_running_waits is "no").
XMC_FAKE_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
    FAKE_ENTER("cuGraphExecDestroy");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    return g.execs.erase(from_handle(hGraphExec)) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

XMC_FAKE_EXPORT CUresult cuGraphDestroy(CUgraph hGraph) {
    FAKE_ENTER("cuGraphDestroy");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    return g.graphs.erase(from_handle(hGraph)) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
