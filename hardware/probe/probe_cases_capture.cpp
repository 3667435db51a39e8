// Cases: stream capture and graphs. A program may capture the stream a backend
// copies on, or capture on one thread while a slot worker maps, unmaps or
// copies on another; these cases record what the driver refuses during a
// capture (and whether the refusal invalidates it), in each capture mode from
// the capturing thread and from another, what a captured copy, event record,
// event wait, host function or stream wait value becomes, and the graph
// entry points' misuse (launching twice at once, destroying while running,
// twice, after destruction; a graph that copies from a slot range remapped or
// unmapped after instantiation).
//
// The fake answers these as recorded on an H200 (cuda_driver_580_h200_capture.tsv,
// replayed by the cuda_probe_replay_fake_capture test; fakes/cuda/fake_cuda_graph.cpp).
#include "probe_support.h"

#include <atomic>

namespace xmc::probe {
namespace {

void need_capture(P& p) {
    NEED(cuStreamBeginCapture);
    NEED(cuStreamEndCapture);
    NEED(cuGraphDestroy);
}
void need_graphs(P& p) {
    need_capture(p);
    NEED(cuGraphInstantiate);
    NEED(cuGraphLaunch);
    NEED(cuGraphExecDestroy);
}

// Ends the capture on s whatever it answers, destroying a graph it gives;
// returns the answer.
CUresult end_now(P& p, CUstream s) {
    CUgraph g = nullptr;
    CUresult r = p.d.cuStreamEndCapture(s, &g);
    if (g != nullptr) p.d.cuGraphDestroy(g);
    return r;
}

void CUDA_CB count_fn(void* u) { static_cast<std::atomic<int>*>(u)->fetch_add(1); }

const char* mode_name(CUstreamCaptureMode m) {
    return m == CU_STREAM_CAPTURE_MODE_GLOBAL ? "global" : m == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ? "thread-local"
                                                                                                      : "relaxed";
}

// -- the capture entry points' own misuse
Outcome c_capture_legacy_stream(P& p) {
    need_capture(p);
    CUresult r = p.d.cuStreamBeginCapture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL);
    if (r == CUDA_SUCCESS) end_now(p, nullptr);
    return res(p, r, "cuStreamBeginCapture of the legacy stream (0)");
}
Outcome c_capture_begin_twice(P& p) {
    need_capture(p);
    Cleanup cl;
    CUstream s = stream(p, cl);
    begin_capture(p, cl, s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    return res(p, p.d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), "a stream already capturing");
}
Outcome c_capture_end_not_capturing(P& p) {
    need_capture(p);
    Cleanup cl;
    CUstream s = stream(p, cl);
    return res(p, end_now(p, s), "a stream that is not capturing");
}
Outcome c_capture_end_other_stream(P& p) {
    need_capture(p);
    Cleanup cl;
    CUstream s = stream(p, cl), o = stream(p, cl);
    begin_capture(p, cl, s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    return res(p, end_now(p, o), "capture begun on one stream, ended on another");
}
Outcome c_capture_end_other_thread(P& p) {
    need_capture(p);
    Cleanup cl;
    CUstream s = stream(p, cl);
    begin_capture(p, cl, s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CUresult r = on_other_thread(p, p.ctx[0], [&] { return end_now(p, s); });
    return res(p, r, "global-mode capture ended from another thread");
}
Outcome c_capture_bad_mode(P& p) {
    need_capture(p);
    Cleanup cl;
    CUstream s = stream(p, cl);
    // 3 is no mode, yet inside the enum's range (see copy_2d_bad_memory_type)
    CUresult r = p.d.cuStreamBeginCapture(s, static_cast<CUstreamCaptureMode>(3));
    if (r == CUDA_SUCCESS) end_now(p, s);
    return res(p, r, "mode 3");
}
Outcome c_capture_is_capturing_value(P& p) {
    need_capture(p);
    NEED(cuStreamIsCapturing);
    Cleanup cl;
    CUstream s = stream(p, cl);
    begin_capture(p, cl, s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    TRY(p.d.cuStreamIsCapturing(s, &st));
    return value(st, "CUstreamCaptureStatus: 0 none, 1 active, 2 invalidated");
}
Outcome c_capture_get_info_after_refused_sync(P& p) {
    need_capture(p);
    NEED(cuStreamGetCaptureInfo);
    Cleanup cl;
    CUstream s = stream(p, cl);
    begin_capture(p, cl, s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CUresult sr = p.d.cuStreamSynchronize(s);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    CUresult r = p.d.cuStreamGetCaptureInfo(s, &st, &id, nullptr, nullptr, nullptr, nullptr);
    if (r != CUDA_SUCCESS) return res(p, r, "cuStreamGetCaptureInfo");
    return value(st, "status after cuStreamSynchronize of the capturing stream (" + result_name(p.d, sr) +
                         "); 0 none, 1 active, 2 invalidated");
}

// -- what capturing turns work into, and what it refuses on the capturing stream
Outcome c_capture_op(P& p, int which) {
    need_capture(p);
    Cleanup cl;
    CUstream s = stream(p, cl), o = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 1 << 16);
    char* host = host_pages(cl, 16);
    CUevent e = event(p, cl, CU_EVENT_DISABLE_TIMING);
    std::vector<char> pageable(1 << 16, 1);
    static std::atomic<int> ran{0};
    if (which == 0) reg(p, cl, host, 16 * page_size());
    if (which == 3) {
        TRY(p.d.cuEventRecord(e, o));
        TRY(p.d.cuStreamSynchronize(o));
    }
    if (which == 5) {
        uint32_t one = 1;
        TRY(p.d.cuMemcpyHtoD(a, &one, sizeof one));
    }
    begin_capture(p, cl, s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    switch (which) {
        case 0: return res(p, p.d.cuMemcpyHtoDAsync(a, host, 1 << 16, s), "cuMemcpyHtoDAsync from registered memory");
        case 1: return res(p, p.d.cuMemcpyHtoDAsync(a, pageable.data(), 1 << 16, s),
                           "cuMemcpyHtoDAsync from pageable memory");
        case 2: return res(p, p.d.cuEventRecord(e, s), "cuEventRecord on the capturing stream");
        case 3: return res(p, p.d.cuStreamWaitEvent(s, e, 0), "cuStreamWaitEvent on an event recorded outside the capture");
        case 4: return res(p, p.d.cuLaunchHostFunc(s, count_fn, &ran), "cuLaunchHostFunc on the capturing stream");
        case 5: return res(p, p.d.cuStreamWaitValue32(s, a, 1, CU_STREAM_WAIT_VALUE_GEQ),
                           "cuStreamWaitValue32 on the capturing stream");
        case 6: return res(p, p.d.cuStreamSynchronize(s), "cuStreamSynchronize of the capturing stream");
        case 7: return res(p, p.d.cuStreamQuery(s), "cuStreamQuery of the capturing stream");
        case 8: TRY(p.d.cuEventRecord(e, s)); return res(p, p.d.cuEventSynchronize(e), "cuEventSynchronize of an event recorded in the capture");
        default: TRY(p.d.cuEventRecord(e, s)); return res(p, p.d.cuEventQuery(e), "cuEventQuery of an event recorded in the capture");
    }
}

// A fork into a second stream (an event recorded in the capture, waited on
// by another stream) that is never joined back: cuStreamEndCapture's answer.
Outcome c_capture_fork_unjoined_end(P& p) {
    need_capture(p);
    Cleanup cl;
    CUstream s = stream(p, cl), o = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 4096);
    CUevent e = event(p, cl, CU_EVENT_DISABLE_TIMING);
    begin_capture(p, cl, s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    TRY(p.d.cuEventRecord(e, s));
    TRY(p.d.cuStreamWaitEvent(o, e, 0));
    TRY(p.d.cuMemsetD8Async(a, 1, 4096, o));
    CUresult r = end_now(p, s);
    end_now(p, o);  // leave no stream capturing, whatever the answer was
    return res(p, r, "the second stream forked by an event wait, never joined");
}

// Does a graph made by capture run: a memset and a device-to-device copy,
// launched once; the copy's destination read back.
Outcome c_capture_graph_runs_copies(P& p) {
    need_graphs(p);
    Cleanup cl;
    CUstream s = stream(p, cl);
    size_t n = 1 << 16;
    CUdeviceptr a = dalloc(p, cl, n), b = dalloc(p, cl, n);
    TRY(p.d.cuMemsetD8Async(b, 0, n, s));
    TRY(p.d.cuStreamSynchronize(s));
    begin_capture(p, cl, s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    TRY(p.d.cuMemsetD8Async(a, 0x33, n, s));
    TRY(p.d.cuMemcpyAsync(b, a, n, s));
    CUgraph g = end_capture(p, cl, s);
    CUgraphExec x = instantiate(p, cl, g);
    TRY(p.d.cuGraphLaunch(x, s));
    TRY(p.d.cuStreamSynchronize(s));
    std::vector<unsigned char> back(n, 0);
    TRY(p.d.cuMemcpyDtoH(back.data(), b, n));
    bool ok = true;
    for (unsigned char c : back) ok = ok && c == 0x33;
    return yes_no(ok, "captured memset + copy, launched, the copy's destination read back");
}

// -- other calls while a (non-blocking) stream captures: from the capturing
// thread or from another thread (the backends' slot workers and pinning
// callers), in each mode. The call's answer, or (end) what cuStreamEndCapture
// answers afterwards: did the call invalidate the program's capture? (Seen on
// an H200 with driver 580 while writing these cases: cuMemMap, cuMemUnmap and
// cuMemcpyHtoD pass; cuMemAlloc and cuMemHostRegister are refused in global
// mode, from another thread too, and invalidate the capture; so the modes are
// varied for those two.)
enum class Call { map, unmap, htod_sync, alloc, reg, legacy_memset };

Outcome c_capture_call(P& p, CUstreamCaptureMode mode, bool other, Call call, bool end) {
    need_capture(p);
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    CUmemGenericAllocationHandle h = create(p, cl, g);
    if (call == Call::unmap) map(p, cl, va, g, h);
    CUdeviceptr a = dalloc(p, cl, 4096);
    char* host = host_pages(cl, 4);
    CUstream s = stream(p, cl, call == Call::legacy_memset ? 0u : unsigned(CU_STREAM_NON_BLOCKING));
    CUdeviceptr got = 0;
    begin_capture(p, cl, s, mode);
    const char* what = "";
    std::function<CUresult()> fn;
    switch (call) {
        case Call::map: what = "cuMemMap"; fn = [&] { return p.d.cuMemMap(va, g, 0, h, 0); }; break;
        case Call::unmap: what = "cuMemUnmap"; fn = [&] { return p.d.cuMemUnmap(va, g); }; break;
        case Call::htod_sync: what = "cuMemcpyHtoD"; fn = [&] { return p.d.cuMemcpyHtoD(a, host, 4096); }; break;
        case Call::alloc: what = "cuMemAlloc"; fn = [&] { return p.d.cuMemAlloc(&got, 1 << 20); }; break;
        case Call::reg: what = "cuMemHostRegister"; fn = [&] { return p.d.cuMemHostRegister(host, 4 * page_size(), 0); }; break;
        case Call::legacy_memset: what = "cuMemsetD8Async on the legacy stream"; fn = [&] { return p.d.cuMemsetD8Async(a, 0, 4096, nullptr); }; break;
    }
    CUresult r = other ? on_other_thread(p, p.ctx[0], fn) : fn();
    CUresult er = end_now(p, s);
    if (r == CUDA_SUCCESS) {
        if (call == Call::map) p.d.cuMemUnmap(va, g);
        if (call == Call::alloc) p.d.cuMemFree(got);
        if (call == Call::reg) p.d.cuMemHostUnregister(host);
    }
    std::string note = std::string(what) + " from " + (other ? "another thread" : "the capturing thread") +
                       " during a " + mode_name(mode) + " capture " +
                       (call == Call::legacy_memset ? "of a blocking stream" : "of another stream") + ": " +
                       result_name(p.d, r) + "; then cuStreamEndCapture " + result_name(p.d, er);
    return res(p, end ? er : r, note);
}

constexpr CUstreamCaptureMode kGlobal = CU_STREAM_CAPTURE_MODE_GLOBAL;
constexpr CUstreamCaptureMode kLocal = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
constexpr CUstreamCaptureMode kRelaxed = CU_STREAM_CAPTURE_MODE_RELAXED;

// -- graphs
// A graph of [host function `gate` (if any), memset of n bytes at a],
// captured on s and instantiated; the exec is NOT destroyed at cleanup (the
// caller does it, or arranges it).
CUgraphExec memset_graph(P& p, Cleanup& cl, CUstream s, CUdeviceptr a, size_t n, Gate* gate) {
    begin_capture(p, cl, s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    if (gate != nullptr) TRY(p.d.cuLaunchHostFunc(s, gate_fn, gate));
    TRY(p.d.cuMemsetD8Async(a, 0x44, n, s));
    CUgraph g = end_capture(p, cl, s);
    CUgraphExec x = nullptr;
    TRY(p.d.cuGraphInstantiate(&x, g, 0));
    return x;
}
void destroy_later(P& p, Cleanup& cl, CUgraphExec x) {
    Driver* d = &p.d;
    cl.add([d, x] { d->cuGraphExecDestroy(x); });
}

Outcome c_graph_instantiate_null_graph(P& p) {
    need_graphs(p);
    CUgraphExec x = nullptr;
    CUresult r = p.d.cuGraphInstantiate(&x, nullptr, 0);
    if (r == CUDA_SUCCESS && x != nullptr) p.d.cuGraphExecDestroy(x);
    return res(p, r, "cuGraphInstantiateWithFlags of a NULL graph");
}
Outcome c_graph_launch_null_exec(P& p) {
    need_graphs(p);
    Cleanup cl;
    CUstream s = stream(p, cl);
    return res(p, p.d.cuGraphLaunch(nullptr, s), "cuGraphLaunch of a NULL exec");
}

// Launch while an earlier launch of the same exec is held in flight.
Outcome c_graph_launch_twice_at_once(P& p) {
    need_graphs(p);
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 4096);
    Gate* gate = new_gate(cl, 1000);
    CUgraphExec x = memset_graph(p, cl, s, a, 4096, gate);
    destroy_later(p, cl, x);
    TRY(p.d.cuGraphLaunch(x, s));
    CUresult r = p.d.cuGraphLaunch(x, s);
    bool first_running = gate->done.load() == 0;
    gate->open.store(true);
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, std::string("second launch while the first ") + (first_running ? "is held" : "had already ended") +
                         "; host node ran " + std::to_string(gate->runs.load()) + " times; sync " + result_name(p.d, sr));
}

// cuGraphExecDestroy while its launch is held in flight: the answer (which 0)
// and whether it waited for the launch (1).
Outcome c_graph_exec_destroy_running(P& p, int which) {
    need_graphs(p);
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 4096);
    Gate* gate = new_gate(cl, 1000);
    CUgraphExec x = memset_graph(p, cl, s, a, 4096, gate);
    CUresult lr = p.d.cuGraphLaunch(x, s);
    if (lr != CUDA_SUCCESS) {
        p.d.cuGraphExecDestroy(x);
        throw SetupFailed{lr, "cuGraphLaunch"};
    }
    auto t0 = std::chrono::steady_clock::now();
    CUresult r = p.d.cuGraphExecDestroy(x);
    int64_t ms = ms_since(t0);
    gate->open.store(true);
    CUresult sr = p.d.cuStreamSynchronize(s);
    std::string note = "destroy took " + std::to_string(ms) +
                       " ms (the launch's host node holds up to 1000 ms); stream sync " + result_name(p.d, sr);
    if (which == 0) return res(p, r, note);
    if (r != CUDA_SUCCESS) return word("skipped", 0, "cuGraphExecDestroy answered " + result_name(p.d, r));
    return yes_no(ms >= 500, note);
}

// Second operations and operations on destroyed graphs (which: 0 exec
// destroyed twice, 1 graph destroyed twice, 2 launch of a destroyed exec,
// 3 launch of an exec whose graph was destroyed).
Outcome c_graph_destroyed(P& p, int which) {
    need_graphs(p);
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 4096);
    begin_capture(p, cl, s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    TRY(p.d.cuMemsetD8Async(a, 1, 4096, s));
    CUgraph g = nullptr;
    TRY(p.d.cuStreamEndCapture(s, &g));
    CUgraphExec x = nullptr;
    CUresult ir = p.d.cuGraphInstantiate(&x, g, 0);
    if (ir != CUDA_SUCCESS) {
        p.d.cuGraphDestroy(g);
        throw SetupFailed{ir, "cuGraphInstantiateWithFlags"};
    }
    CUresult r = CUDA_ERROR_UNKNOWN;
    std::string note;
    switch (which) {
        case 0:
            p.d.cuGraphDestroy(g);
            TRY(p.d.cuGraphExecDestroy(x));
            r = p.d.cuGraphExecDestroy(x);
            note = "cuGraphExecDestroy of a destroyed exec: may crash a real driver";
            break;
        case 1:
            destroy_later(p, cl, x);
            TRY(p.d.cuGraphDestroy(g));
            r = p.d.cuGraphDestroy(g);
            note = "cuGraphDestroy of a destroyed graph: may crash a real driver";
            break;
        case 2:
            p.d.cuGraphDestroy(g);
            TRY(p.d.cuGraphExecDestroy(x));
            r = p.d.cuGraphLaunch(x, s);
            note = "cuGraphLaunch of a destroyed exec: may crash a real driver";
            break;
        default:
            destroy_later(p, cl, x);
            TRY(p.d.cuGraphDestroy(g));
            r = p.d.cuGraphLaunch(x, s);
            note = "cuGraphLaunch of an exec whose graph was destroyed";
            break;
    }
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, note + "; stream sync " + result_name(p.d, sr));
}

// A graph whose captured copy reads a slot range; before the launch the
// range is unmapped, its handle released, and a new handle (other contents)
// mapped at the same address. Does the launch read the new backing?
Outcome c_graph_vmm_remap_reads_new_backing(P& p) {
    need_graphs(p);
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = reserve(p, cl, g);
    CUstream s = stream(p, cl);
    CUdeviceptr b = dalloc(p, cl, 4096);
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    CUmemGenericAllocationHandle h1 = 0;
    TRY(p.d.cuMemCreate(&h1, g, &prop, 0));
    CUresult m = p.d.cuMemMap(va, g, 0, h1, 0);
    if (m != CUDA_SUCCESS) {
        p.d.cuMemRelease(h1);
        throw SetupFailed{m, "cuMemMap"};
    }
    TRY(p.d.cuMemRelease(h1));  // the mapping keeps it until the unmap
    Driver* d = &p.d;
    cl.add([d, va, g] { d->cuMemUnmap(va, g); });
    grant(p, va, g);
    TRY(p.d.cuMemsetD8Async(va, 0x11, g, s));
    TRY(p.d.cuStreamSynchronize(s));
    begin_capture(p, cl, s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    TRY(p.d.cuMemcpyAsync(b, va, 4096, s));
    CUgraph graph = end_capture(p, cl, s);
    CUgraphExec x = instantiate(p, cl, graph);
    TRY(p.d.cuMemUnmap(va, g));
    CUmemGenericAllocationHandle h2 = create(p, cl, g);
    map(p, cl, va, g, h2);
    grant(p, va, g);
    TRY(p.d.cuMemsetD8Async(va, 0x22, g, s));
    TRY(p.d.cuStreamSynchronize(s));
    CUresult lr = p.d.cuGraphLaunch(x, s);
    CUresult sr = p.d.cuStreamSynchronize(s);
    if (lr != CUDA_SUCCESS) return res(p, lr, "cuGraphLaunch after the remap");
    if (sr != CUDA_SUCCESS) return res(p, sr, "cuStreamSynchronize after the launch");
    unsigned char back[4096] = {0};
    TRY(p.d.cuMemcpyDtoH(back, b, sizeof back));
    int news = 0, olds = 0;
    for (unsigned char c : back) {
        news += c == 0x22;
        olds += c == 0x11;
    }
    return yes_no(news == 4096, "the launch read " + std::to_string(news) + " bytes of the new backing (0x22), " +
                                    std::to_string(olds) + " of the old (0x11)");
}

// A graph that memsets a slot range unmapped after instantiation (no new
// backing): what the launch answers (which 0) and its stream's synchronize (1).
Outcome c_graph_unmapped_slot(P& p, int which) {
    need_graphs(p);
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = mapped_range(p, cl, g);
    CUstream s = stream(p, cl);
    CUgraphExec x = memset_graph(p, cl, s, va, g, nullptr);
    destroy_later(p, cl, x);
    TRY(p.d.cuMemUnmap(va, g));
    CUresult lr = p.d.cuGraphLaunch(x, s);
    CUresult sr = p.d.cuStreamSynchronize(s);
    std::string note = "memset graph, its range unmapped before the launch: launch " + result_name(p.d, lr) +
                       ", stream sync " + result_name(p.d, sr);
    return res(p, which == 0 ? lr : sr, note);
}

}  // namespace

std::vector<Case> capture_cases() {
    return {
        {"capture_legacy_stream", Setup::ctx, c_capture_legacy_stream, "cuStreamBeginCapture of the legacy stream",
         nullptr},
        {"capture_begin_twice", Setup::ctx, c_capture_begin_twice, "cuStreamBeginCapture of a capturing stream",
         nullptr},
        {"capture_end_not_capturing", Setup::ctx, c_capture_end_not_capturing,
         "cuStreamEndCapture of a stream not capturing", nullptr},
        {"capture_end_other_stream", Setup::ctx, c_capture_end_other_stream,
         "cuStreamEndCapture on another stream than the capturing one", nullptr},
        {"capture_end_other_thread", Setup::ctx, c_capture_end_other_thread,
         "cuStreamEndCapture of a global-mode capture from another thread", nullptr},
        {"capture_bad_mode", Setup::ctx, c_capture_bad_mode, "cuStreamBeginCapture with mode 3", nullptr},
        {"capture_is_capturing_value", Setup::ctx, c_capture_is_capturing_value,
         "cuStreamIsCapturing of a capturing stream", nullptr},
        {"capture_get_info_after_refused_sync", Setup::ctx, c_capture_get_info_after_refused_sync,
         "cuStreamGetCaptureInfo's status after a refused synchronize", nullptr},
        {"capture_htod_registered", Setup::ctx, with<c_capture_op, 0>,
         "capture cuMemcpyHtoDAsync from registered memory", nullptr},
        {"capture_htod_pageable", Setup::ctx, with<c_capture_op, 1>,
         "capture cuMemcpyHtoDAsync from pageable memory", nullptr},
        {"capture_event_record", Setup::ctx, with<c_capture_op, 2>, "capture cuEventRecord", nullptr},
        {"capture_wait_event_outside", Setup::ctx, with<c_capture_op, 3>,
         "capture cuStreamWaitEvent on an event recorded outside the capture", nullptr},
        {"capture_launch_host_func", Setup::ctx, with<c_capture_op, 4>, "capture cuLaunchHostFunc", nullptr},
        {"capture_wait_value32", Setup::ctx, with<c_capture_op, 5>, "capture cuStreamWaitValue32", nullptr},
        {"capture_stream_synchronize", Setup::ctx, with<c_capture_op, 6>,
         "cuStreamSynchronize of a capturing stream", nullptr},
        {"capture_stream_query", Setup::ctx, with<c_capture_op, 7>, "cuStreamQuery of a capturing stream", nullptr},
        {"capture_event_synchronize_captured", Setup::ctx, with<c_capture_op, 8>,
         "cuEventSynchronize of an event recorded in a capture", nullptr},
        {"capture_event_query_captured", Setup::ctx, with<c_capture_op, 9>,
         "cuEventQuery of an event recorded in a capture", nullptr},
        {"capture_fork_unjoined_end", Setup::ctx, c_capture_fork_unjoined_end,
         "cuStreamEndCapture with a forked stream never joined", nullptr},
        {"capture_graph_runs_copies", Setup::ctx, c_capture_graph_runs_copies,
         "a captured memset + copy, launched, gives the data", nullptr},
        {"capture_global_same_thread_mem_map", Setup::ctx, with<c_capture_call, kGlobal, false, Call::map, false>,
         "cuMemMap on the capturing thread during a global capture", nullptr},
        {"capture_global_other_thread_mem_map", Setup::ctx, with<c_capture_call, kGlobal, true, Call::map, false>,
         "cuMemMap on another thread during a global capture", nullptr},
        {"capture_global_other_thread_mem_map_end", Setup::ctx, with<c_capture_call, kGlobal, true, Call::map, true>,
         "cuStreamEndCapture after a cuMemMap on another thread", nullptr},
        {"capture_global_same_thread_mem_unmap", Setup::ctx, with<c_capture_call, kGlobal, false, Call::unmap, false>,
         "cuMemUnmap on the capturing thread during a global capture", nullptr},
        {"capture_global_other_thread_mem_unmap", Setup::ctx, with<c_capture_call, kGlobal, true, Call::unmap, false>,
         "cuMemUnmap on another thread during a global capture", nullptr},
        {"capture_global_other_thread_mem_unmap_end", Setup::ctx, with<c_capture_call, kGlobal, true, Call::unmap, true>,
         "cuStreamEndCapture after a cuMemUnmap on another thread", nullptr},
        {"capture_global_same_thread_htod_sync", Setup::ctx, with<c_capture_call, kGlobal, false, Call::htod_sync, false>,
         "cuMemcpyHtoD on the capturing thread during a global capture", nullptr},
        {"capture_global_other_thread_htod_sync", Setup::ctx, with<c_capture_call, kGlobal, true, Call::htod_sync, false>,
         "cuMemcpyHtoD on another thread during a global capture", nullptr},
        {"capture_thread_local_same_thread_htod_sync", Setup::ctx, with<c_capture_call, kLocal, false, Call::htod_sync, false>,
         "cuMemcpyHtoD on the capturing thread during a thread-local capture", nullptr},
        {"capture_relaxed_same_thread_htod_sync", Setup::ctx, with<c_capture_call, kRelaxed, false, Call::htod_sync, false>,
         "cuMemcpyHtoD on the capturing thread during a relaxed capture", nullptr},
        {"capture_global_same_thread_htod_sync_end", Setup::ctx, with<c_capture_call, kGlobal, false, Call::htod_sync, true>,
         "cuStreamEndCapture after a cuMemcpyHtoD on the capturing thread", nullptr},
        {"capture_global_same_thread_mem_alloc", Setup::ctx, with<c_capture_call, kGlobal, false, Call::alloc, false>,
         "cuMemAlloc on the capturing thread during a global capture", nullptr},
        {"capture_global_other_thread_mem_alloc", Setup::ctx, with<c_capture_call, kGlobal, true, Call::alloc, false>,
         "cuMemAlloc on another thread during a global capture", nullptr},
        {"capture_thread_local_same_thread_mem_alloc", Setup::ctx, with<c_capture_call, kLocal, false, Call::alloc, false>,
         "cuMemAlloc on the capturing thread during a thread-local capture", nullptr},
        {"capture_thread_local_other_thread_mem_alloc", Setup::ctx, with<c_capture_call, kLocal, true, Call::alloc, false>,
         "cuMemAlloc on another thread during a thread-local capture", nullptr},
        {"capture_relaxed_same_thread_mem_alloc", Setup::ctx, with<c_capture_call, kRelaxed, false, Call::alloc, false>,
         "cuMemAlloc on the capturing thread during a relaxed capture", nullptr},
        {"capture_global_same_thread_mem_alloc_end", Setup::ctx, with<c_capture_call, kGlobal, false, Call::alloc, true>,
         "cuStreamEndCapture after a cuMemAlloc on the capturing thread", nullptr},
        {"capture_global_other_thread_mem_alloc_end", Setup::ctx, with<c_capture_call, kGlobal, true, Call::alloc, true>,
         "cuStreamEndCapture after a cuMemAlloc on another thread", nullptr},
        {"capture_global_same_thread_register", Setup::ctx, with<c_capture_call, kGlobal, false, Call::reg, false>,
         "cuMemHostRegister on the capturing thread during a global capture", nullptr},
        {"capture_global_other_thread_register", Setup::ctx, with<c_capture_call, kGlobal, true, Call::reg, false>,
         "cuMemHostRegister on another thread during a global capture", nullptr},
        {"capture_thread_local_same_thread_register", Setup::ctx, with<c_capture_call, kLocal, false, Call::reg, false>,
         "cuMemHostRegister on the capturing thread during a thread-local capture", nullptr},
        {"capture_thread_local_other_thread_register", Setup::ctx, with<c_capture_call, kLocal, true, Call::reg, false>,
         "cuMemHostRegister on another thread during a thread-local capture", nullptr},
        {"capture_relaxed_same_thread_register", Setup::ctx, with<c_capture_call, kRelaxed, false, Call::reg, false>,
         "cuMemHostRegister on the capturing thread during a relaxed capture", nullptr},
        {"capture_global_other_thread_register_end", Setup::ctx, with<c_capture_call, kGlobal, true, Call::reg, true>,
         "cuStreamEndCapture after a cuMemHostRegister on another thread", nullptr},
        {"capture_global_legacy_stream_memset", Setup::ctx, with<c_capture_call, kGlobal, false, Call::legacy_memset, false>,
         "cuMemsetD8Async on the legacy stream while a blocking stream captures", nullptr},
        {"capture_global_legacy_stream_memset_end", Setup::ctx, with<c_capture_call, kGlobal, false, Call::legacy_memset, true>,
         "cuStreamEndCapture after that legacy-stream memset", nullptr},
        {"graph_instantiate_null_graph", Setup::ctx, c_graph_instantiate_null_graph,
         "cuGraphInstantiateWithFlags of a NULL graph", nullptr},
        {"graph_launch_null_exec", Setup::ctx, c_graph_launch_null_exec, "cuGraphLaunch of a NULL exec", nullptr},
        {"graph_launch_twice_at_once", Setup::ctx, c_graph_launch_twice_at_once,
         "cuGraphLaunch while the same exec's launch is in flight", nullptr},
        {"graph_exec_destroy_while_running", Setup::ctx, with<c_graph_exec_destroy_running, 0>,
         "cuGraphExecDestroy while its launch is in flight", nullptr, true},
        {"graph_exec_destroy_while_running_waits", Setup::ctx, with<c_graph_exec_destroy_running, 1>,
         "does cuGraphExecDestroy wait for the launch in flight", nullptr, true},
        {"graph_exec_destroy_twice", Setup::ctx, with<c_graph_destroyed, 0>, "cuGraphExecDestroy twice", nullptr},
        {"graph_destroy_twice", Setup::ctx, with<c_graph_destroyed, 1>, "cuGraphDestroy twice", nullptr},
        {"graph_launch_destroyed_exec", Setup::ctx, with<c_graph_destroyed, 2>,
         "cuGraphLaunch of a destroyed exec", nullptr},
        {"graph_launch_after_graph_destroyed", Setup::ctx, with<c_graph_destroyed, 3>,
         "cuGraphLaunch of an exec whose graph was destroyed", nullptr},
        {"graph_vmm_remap_reads_new_backing", Setup::ctx, c_graph_vmm_remap_reads_new_backing,
         "a graph's copy from a slot range remapped after instantiation reads the new backing", nullptr},
        {"graph_launch_into_unmapped_slot", Setup::ctx, with<c_graph_unmapped_slot, 0>,
         "cuGraphLaunch of a memset into a slot range unmapped after instantiation", nullptr, true},
        {"graph_launch_into_unmapped_slot_sync", Setup::ctx, with<c_graph_unmapped_slot, 1>,
         "then the stream's synchronize", nullptr, true},
    };
}

}  // namespace xmc::probe
