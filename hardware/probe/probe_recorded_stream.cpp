// The first two recordings' cases (cuda_driver_580_h200.tsv): driver calls from inside a host callback (cuLaunchHostFunc), device memory,
// streams, events and copies, within one context and across two.
// probe_cases.cpp lists them, in the recording's order.
#include "probe_cases.h"
#include "probe_support.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace xmc::probe::recorded {

// -- driver calls from inside a host callback (cuLaunchHostFunc)
struct CbData {
    P* p = nullptr;
    std::function<CUresult()> call;
    CUresult r = CUDA_ERROR_UNKNOWN;
    std::atomic<bool> ran{false};
};

void CUDA_CB host_fn(void* u) {
    auto* c = static_cast<CbData*>(u);
    c->r = c->call();
    c->ran.store(true);
}

// Runs `call` inside a host callback on a fresh stream and records its result.
Outcome in_callback(P& p, Cleanup& cl, std::function<CUresult()> call) {
    CUstream s = stream(p, cl);
    CbData data;
    data.p = &p;
    data.call = std::move(call);
    TRY(p.d.cuLaunchHostFunc(s, host_fn, &data));
    TRY(p.d.cuStreamSynchronize(s));
    if (!data.ran.load()) return word("NO_RESULT", -1, "callback did not run");
    return res(p, data.r);
}

Outcome c_callback_mem_alloc(P& p) {
    Cleanup cl;
    CUdeviceptr a = 0;
    Outcome o = in_callback(p, cl, [&] { return p.d.cuMemAlloc(&a, 1 << 20); });
    if (a != 0) p.d.cuMemFree(a);
    return o;
}

Outcome c_callback_mem_get_info(P& p) {
    Cleanup cl;
    size_t f = 0, t = 0;
    return in_callback(p, cl, [&] { return p.d.cuMemGetInfo(&f, &t); });
}

Outcome c_callback_event_record_other_stream(P& p) {
    Cleanup cl;
    CUstream other = stream(p, cl);
    CUevent e = event(p, cl);
    return in_callback(p, cl, [&] { return p.d.cuEventRecord(e, other); });
}

Outcome c_callback_stream_query_other_stream(P& p) {
    Cleanup cl;
    CUstream other = stream(p, cl);
    return in_callback(p, cl, [&] { return p.d.cuStreamQuery(other); });
}

Outcome c_callback_ctx_get_current(P& p) {
    Cleanup cl;
    CUcontext c = nullptr;
    return in_callback(p, cl, [&] { return p.d.cuCtxGetCurrent(&c); });
}

Outcome c_callback_mem_unmap(P& p) {
    Cleanup cl;
    size_t g = granularity(p);
    CUdeviceptr va = mapping_to_unmap(p, cl, g);
    Outcome o = in_callback(p, cl, [&] { return p.d.cuMemUnmap(va, g); });
    if (o.code != CUDA_SUCCESS) p.d.cuMemUnmap(va, g);
    return o;
}

// -- memory, streams, events, copies
Outcome c_mem_alloc_zero(P& p) {
    CUdeviceptr a = 0;
    CUresult r = p.d.cuMemAlloc(&a, 0);
    if (r == CUDA_SUCCESS && a != 0) p.d.cuMemFree(a);
    return res(p, r);
}

Outcome c_mem_free_interior(P& p) {
    Cleanup cl;
    CUdeviceptr a = dalloc(p, cl, 1 << 20);
    return res(p, p.d.cuMemFree(a + 4096));
}

Outcome c_mem_free_twice(P& p) {
    CUdeviceptr a = 0;
    TRY(p.d.cuMemAlloc(&a, 1 << 20));
    TRY(p.d.cuMemFree(a));
    return res(p, p.d.cuMemFree(a));
}

Outcome c_mem_free_null(P& p) { return res(p, p.d.cuMemFree(0)); }

Outcome c_event_query_unrecorded(P& p) {
    Cleanup cl;
    return res(p, p.d.cuEventQuery(event(p, cl)));
}

Outcome c_event_synchronize_unrecorded(P& p) {
    Cleanup cl;
    return res(p, p.d.cuEventSynchronize(event(p, cl)));
}

Outcome c_event_elapsed_unrecorded(P& p) {
    Cleanup cl;
    CUevent a = event(p, cl), b = event(p, cl);
    float ms = 0;
    return res(p, p.d.cuEventElapsedTime(&ms, a, b));
}

Outcome c_event_elapsed_disable_timing(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUevent a = event(p, cl, CU_EVENT_DISABLE_TIMING), b = event(p, cl, CU_EVENT_DISABLE_TIMING);
    TRY(p.d.cuEventRecord(a, s));
    TRY(p.d.cuEventRecord(b, s));
    TRY(p.d.cuStreamSynchronize(s));
    float ms = 0;
    return res(p, p.d.cuEventElapsedTime(&ms, a, b));
}

Outcome c_stream_wait_event_unrecorded(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUevent e = event(p, cl);
    CUresult r = p.d.cuStreamWaitEvent(s, e, 0);
    TRY(p.d.cuStreamSynchronize(s));
    return res(p, r);
}

Outcome c_copy_2d_pitch_smaller_than_width(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 1 << 16);
    std::vector<char> host(1 << 16, 0);
    CUDA_MEMCPY2D c = rows_htod(host.data(), 64, a);
    CUresult r = p.d.cuMemcpy2DAsync(&c, s);
    TRY(p.d.cuStreamSynchronize(s));
    return res(p, r, "srcPitch 64 < WidthInBytes 128");
}

Outcome c_copy_htod_to_host_pointer(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    char* b = host_pages(cl, 4);
    std::vector<char> src(4096, 1);
    CUresult r = p.d.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(b), src.data(), src.size(), s);
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, "destination is unregistered host memory; stream sync " + result_name(p.d, sr));
}

Outcome c_copy_zero_bytes(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 4096);
    char h[16] = {0};
    return res(p, p.d.cuMemcpyHtoDAsync(a, h, 0, s));
}

Outcome c_memset_past_allocation_end(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a = dalloc(p, cl, 4096);
    CUresult r = p.d.cuMemsetD8Async(a, 0, 4097, s);
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, "4097 bytes into a 4096-byte allocation; stream sync " + result_name(p.d, sr));
}

Outcome c_stream_destroy_twice(P& p) {
    CUstream s = nullptr;
    TRY(p.d.cuStreamCreate(&s, 0));
    TRY(p.d.cuStreamDestroy(s));
    return res(p, p.d.cuStreamDestroy(s), "a destroyed handle: may crash a real driver");
}

Outcome c_event_record_other_context(P& p) {
    Cleanup cl;
    CUevent e = event(p, cl);  // device 0's context
    CUstream s = stream_device1(p, cl);
    return res(p, p.d.cuEventRecord(e, s), "event of device 0's context, stream of device 1's");
}

Outcome c_stream_wait_event_other_context(P& p) {
    Cleanup cl;
    CUevent e = event(p, cl);
    CUstream s0 = stream(p, cl);
    TRY(p.d.cuEventRecord(e, s0));
    CUstream s = stream_device1(p, cl);
    return res(p, p.d.cuStreamWaitEvent(s, e, 0), "event of device 0's context, stream of device 1's");
}

Outcome c_copy_dtod_between_devices(P& p) {
    Cleanup cl;
    CUstream s = stream(p, cl);
    CUdeviceptr a0 = dalloc(p, cl, 1 << 16);
    CUdeviceptr a1 = dalloc_device1(p, cl, 1 << 16);
    CUresult r = p.d.cuMemcpyDtoDAsync(a1, a0, 1 << 16, s);
    CUresult sr = p.d.cuStreamSynchronize(s);
    return res(p, r, "device 0 to device 1 on a device-0 stream, no peer access; sync " + result_name(p.d, sr));
}

}  // namespace xmc::probe::recorded
