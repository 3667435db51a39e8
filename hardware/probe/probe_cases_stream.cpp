// Cases: streams, events and host functions beyond the first recordings
// (XMC_CU_STREAM, cuStreamQuery / cuEventQuery of XMC_CU_VMM): refused
// arguments, work still queued when a stream or event goes, and every
// operation on a destroyed stream or event. A destroyed handle may crash a
// real driver (recorded: cuStreamDestroy twice); the recording says which.
#include "probe_support.h"

namespace xmc::probe {
namespace {

// -- refused arguments
Outcome c_stream_create_null_out(P& p) { return res(p, p.d.cuStreamCreate(nullptr, 0)); }
Outcome c_stream_create_bad_flags(P& p) {
    CUstream s = nullptr;
    CUresult r = p.d.cuStreamCreate(&s, 0x4);
    if (r == CUDA_SUCCESS) p.d.cuStreamDestroy(s);
    return res(p, r, "flags 0x4");
}
Outcome c_stream_destroy_null(P& p) { return res(p, p.d.cuStreamDestroy(nullptr), "stream 0"); }
Outcome c_event_create_null_out(P& p) { return res(p, p.d.cuEventCreate(nullptr, 0)); }
Outcome c_event_create_flags(P& p, unsigned flags, const char* note) {
    CUevent e = nullptr;
    CUresult r = p.d.cuEventCreate(&e, flags);
    if (r == CUDA_SUCCESS) p.d.cuEventDestroy(e);
    return res(p, r, note);
}
Outcome c_event_create_bad_flags(P& p) { return c_event_create_flags(p, 0x100, "flags 0x100"); }
Outcome c_event_destroy_null(P& p) { return res(p, p.d.cuEventDestroy(nullptr)); }
Outcome c_event_record_null_event(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    return res(p, p.d.cuEventRecord(nullptr, s));
}
Outcome c_stream_wait_event_bad_flags(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl), o = stream(p, cl);
    CUevent e = event(p, cl, CU_EVENT_DISABLE_TIMING);
    TRY(p.d.cuEventRecord(e, o));
    return res(p, p.d.cuStreamWaitEvent(s, e, 0x4), "flags 0x4");
}
Outcome c_launch_host_func_null_fn(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    return res(p, p.d.cuLaunchHostFunc(s, nullptr, nullptr));
}

// -- queued work: what queries answer, and whether destruction waits for it
Outcome c_stream_query_pending(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    Gate* g = hold(p, cl, s);
    CUresult r = p.d.cuStreamQuery(s);
    g->open.store(true);
    return res(p, r, "a host function holds the stream");
}
Outcome c_event_query_pending(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUevent e = event(p, cl, CU_EVENT_DISABLE_TIMING);
    Gate* g = hold(p, cl, s);
    TRY(p.d.cuEventRecord(e, s));
    CUresult r = p.d.cuEventQuery(e);
    g->open.store(true);
    return res(p, r, "recorded behind a host function that holds the stream");
}

// cuStreamDestroy while a host function holds the stream: the answer (which
// 0) and whether the call waited for the work (which 1).
Outcome c_stream_destroy_pending(P& p, int which) {
    Cleanup cl;
    CUstream s = nullptr;
    TRY(p.d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    Gate* g = nullptr;
    CUevent e = event(p, cl, CU_EVENT_DISABLE_TIMING);
    try {
        g = hold(p, cl, s, 1000);
        TRY(p.d.cuEventRecord(e, s));
    } catch (...) {
        p.d.cuStreamDestroy(s);
        throw;
    }
    auto t0 = std::chrono::steady_clock::now();
    CUresult r = p.d.cuStreamDestroy(s);
    int64_t ms = ms_since(t0);
    g->open.store(true);
    CUresult er = p.d.cuEventSynchronize(e);  // the queued work still ran?
    open_and_drain(g);
    std::string note = "destroy took " + std::to_string(ms) + " ms (the host function holds up to 1000 ms); "
                       "an event recorded after it then synchronized with " + result_name(p.d, er);
    if (which == 0) return res(p, r, note);
    if (r != CUDA_SUCCESS) return word("skipped", 0, "cuStreamDestroy answered " + result_name(p.d, r));
    return yes_no(ms >= 500, note);
}

Outcome c_event_destroy_pending_record(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUevent e = nullptr;
    TRY(p.d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    Gate* g = nullptr;
    try {
        g = hold(p, cl, s);
        TRY(p.d.cuEventRecord(e, s));
    } catch (...) {
        p.d.cuEventDestroy(e);
        throw;
    }
    CUresult r = p.d.cuEventDestroy(e);
    g->open.store(true);
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, "its record still queued behind a host function; stream sync " + result_name(p.d, sr));
}

// -- operations on a destroyed stream (which: the operation)
Outcome c_destroyed_stream(P& p, int which) {
    Cleanup cl;
    CUdeviceptr a = dalloc(p, cl, 4096);
    CUevent e = event(p, cl, CU_EVENT_DISABLE_TIMING);
    std::vector<char> host(4096, 1);
    CUstream s = nullptr;
    TRY(p.d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    TRY(p.d.cuStreamDestroy(s));
    CUresult r = CUDA_ERROR_UNKNOWN;
    const char* note = "";
    switch (which) {
        case 0: r = p.d.cuStreamSynchronize(s); note = "cuStreamSynchronize"; break;
        case 1: r = p.d.cuStreamQuery(s); note = "cuStreamQuery"; break;
        case 2: r = p.d.cuStreamWaitEvent(s, e, 0); note = "cuStreamWaitEvent (the event never recorded)"; break;
        case 3: r = p.d.cuEventRecord(e, s); note = "cuEventRecord"; break;
        case 4: {
            static std::atomic<int> ran{0};
            r = p.d.cuLaunchHostFunc(s, [](void*) { ran.fetch_add(1); }, nullptr);
            note = "cuLaunchHostFunc";
            break;
        }
        default: r = p.d.cuMemcpyHtoDAsync(a, host.data(), host.size(), s); note = "cuMemcpyHtoDAsync"; break;
    }
    return res(p, r, std::string(note) + " on a destroyed stream: may crash a real driver");
}

// -- operations on a destroyed event
Outcome c_destroyed_event(P& p, int which) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUevent e = nullptr;
    TRY(p.d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    TRY(p.d.cuEventRecord(e, s));
    TRY(p.d.cuStreamSynchronize(s));
    TRY(p.d.cuEventDestroy(e));
    CUresult r = CUDA_ERROR_UNKNOWN;
    const char* note = "";
    switch (which) {
        case 0: r = p.d.cuEventDestroy(e); note = "cuEventDestroy"; break;
        case 1: r = p.d.cuEventRecord(e, s); note = "cuEventRecord"; break;
        case 2: r = p.d.cuEventQuery(e); note = "cuEventQuery"; break;
        case 3: r = p.d.cuEventSynchronize(e); note = "cuEventSynchronize"; break;
        default: r = p.d.cuStreamWaitEvent(s, e, 0); note = "cuStreamWaitEvent"; break;
    }
    return res(p, r, std::string(note) + " of a destroyed event (recorded and completed before): may crash a real driver");
}

}  // namespace

std::vector<Case> stream_cases() {
    return {
        {"stream_create_null_out", Setup::ctx, c_stream_create_null_out, "cuStreamCreate with a NULL result",
         nullptr},
        {"stream_create_bad_flags", Setup::ctx, c_stream_create_bad_flags, "cuStreamCreate with flags 0x4", nullptr},
        {"stream_destroy_null", Setup::ctx, c_stream_destroy_null, "cuStreamDestroy(0)", nullptr},
        {"event_create_null_out", Setup::ctx, c_event_create_null_out, "cuEventCreate with a NULL result", nullptr},
        {"event_create_bad_flags", Setup::ctx, c_event_create_bad_flags, "cuEventCreate with flags 0x100", nullptr},
        {"event_destroy_null", Setup::ctx, c_event_destroy_null, "cuEventDestroy(NULL)", nullptr},
        {"event_record_null_event", Setup::ctx, c_event_record_null_event, "cuEventRecord(NULL, stream)", nullptr},
        {"stream_wait_event_bad_flags", Setup::ctx, c_stream_wait_event_bad_flags,
         "cuStreamWaitEvent with flags 0x4", nullptr},
        {"launch_host_func_null_fn", Setup::ctx, c_launch_host_func_null_fn, "cuLaunchHostFunc with a NULL function",
         nullptr},
        {"stream_query_pending", Setup::ctx, c_stream_query_pending, "cuStreamQuery of a stream with work queued",
         nullptr},
        {"event_query_pending", Setup::ctx, c_event_query_pending, "cuEventQuery of an event not reached yet",
         nullptr},
        {"stream_destroy_pending_work", Setup::ctx, with<c_stream_destroy_pending, 0>,
         "cuStreamDestroy of a stream with work queued", nullptr, true},
        {"stream_destroy_pending_work_waits", Setup::ctx, with<c_stream_destroy_pending, 1>,
         "does cuStreamDestroy wait for the queued work", nullptr, true},
        {"event_destroy_pending_record", Setup::ctx, c_event_destroy_pending_record,
         "cuEventDestroy of an event whose record is still queued", nullptr},
        {"stream_synchronize_destroyed", Setup::ctx, with<c_destroyed_stream, 0>,
         "cuStreamSynchronize of a destroyed stream", kBadHandleNotCrashed},
        {"stream_query_destroyed", Setup::ctx, with<c_destroyed_stream, 1>, "cuStreamQuery of a destroyed stream",
         kBadHandleNotCrashed},
        {"event_record_destroyed_stream", Setup::ctx, with<c_destroyed_stream, 3>,
         "cuEventRecord on a destroyed stream", kBadHandleNotCrashed},
        {"copy_destroyed_stream", Setup::ctx, with<c_destroyed_stream, 5>, "cuMemcpyHtoDAsync on a destroyed stream",
         kBadHandleNotCrashed},
        {"event_destroy_twice", Setup::ctx, with<c_destroyed_event, 0>, "cuEventDestroy of a destroyed event", kBadHandleNotCrashed},
        {"event_record_destroyed", Setup::ctx, with<c_destroyed_event, 1>, "cuEventRecord of a destroyed event",
         kBadHandleNotCrashed},
        {"event_query_destroyed", Setup::ctx, with<c_destroyed_event, 2>, "cuEventQuery of a destroyed event", kBadHandleNotCrashed},
        {"event_synchronize_destroyed", Setup::ctx, with<c_destroyed_event, 3>,
         "cuEventSynchronize of a destroyed event", kBadHandleNotCrashed},
    };
}

}  // namespace xmc::probe
