// Streams through the driver (capability `stream`, COPY-ORDER): cuStreamCreate
// in the primary context of the stream's device, events without timing,
// cuStreamWaitEvent across streams, and host callbacks by cuLaunchHostFunc.
// A host callback runs on a driver thread where driver calls may be refused
// (CUDA_ERROR_NOT_PERMITTED, VMM-CALLBACK): the trampoline only calls the
// user's function and frees its own record, nothing else.
// Device memory: cuMemAlloc in the device's context, freed in the same one.
// Capture (capability `graph`, graph.cpp): the driver records the copies and
// host callbacks of a capturing stream; a recorded callback runs once per
// launch, so its record belongs to the graph. Every other call naming a
// capturing stream is refused before the driver (refuse_capturing).
#include "cuda.hpp"

#include <new>

namespace xmc::cuda {

static Instance *as_cuda(xmc_instance *inst) { return static_cast<Instance *>(inst); }

// The context of device `device`, retained by the driver table.
static xmc_status device_context(xmc_instance *inst, int32_t device, const char *call, CUcontext *ctx) {
    Driver &d = Driver::get();
    if (CUresult r = d.context_for(d.devices[static_cast<size_t>(device)].uuid, ctx, nullptr); r != CUDA_SUCCESS)
        return driver_fail(inst, r, call, "cuDevicePrimaryCtxRetain");
    return XMC_OK;
}

// Checks every stream entry point shares: the driver, its stream entry
// points, and the device index.
static xmc_status ready(xmc_instance *inst, int32_t device, const char *call) {
    if (xmc_status st = require(inst, call, Driver::get().missing_stream); st != XMC_OK) return st;
    return check_device(inst, device, call);
}

bool find_stream(xmc_instance *inst, xmc_stream *handle, Stream *out) {
    Instance *in = as_cuda(inst);
    std::lock_guard<std::mutex> lock(in->mu);
    auto it = in->streams.find(handle);
    if (it == in->streams.end()) return false;
    *out = it->second;
    return true;
}

static bool find_event(xmc_instance *inst, xmc_event *handle, Event *out) {
    Instance *in = as_cuda(inst);
    std::lock_guard<std::mutex> lock(in->mu);
    auto it = in->events.find(handle);
    if (it == in->events.end()) return false;
    *out = it->second;
    return true;
}

using be::bad_event;
using be::bad_stream;

// Waits for the stream's work, then destroys it in its context.
static CUresult destroy_stream(const Stream &s) {
    Driver &d = Driver::get();
    CtxScope scope(d, s.ctx);
    if (scope.result() != CUDA_SUCCESS) return scope.result();
    // A failed wait keeps the stream, so that a retry can finish the job.
    if (CUresult r = d.cuStreamSynchronize(s.stream); r != CUDA_SUCCESS) return r;
    return d.cuStreamDestroy(s.stream);
}

Instance::~Instance() = default;

CUresult Instance::release_all(const char **what) {
    Driver &d = Driver::get();
    while (!streams.empty()) {
        auto it = streams.begin();
        *what = "cuStreamSynchronize/cuStreamDestroy";
        if (CUresult r = destroy_stream(it->second); r != CUDA_SUCCESS) return r;
        be::free_cookie(it->first);
        streams.erase(it);
    }
    while (!events.empty()) {
        auto it = events.begin();
        CtxScope scope(d, it->second.ctx);
        CUresult r = scope.result();
        if (r == CUDA_SUCCESS) r = d.cuEventDestroy(it->second.event);
        *what = "cuEventDestroy";
        if (r != CUDA_SUCCESS) return r;
        be::free_cookie(it->first);
        events.erase(it);
    }
    while (!dev_allocs.empty()) {
        auto it = dev_allocs.begin();
        CtxScope scope(d, it->second.ctx);
        CUresult r = scope.result();
        if (r == CUDA_SUCCESS) r = d.cuMemFree(static_cast<CUdeviceptr>(it->first));
        *what = "cuMemFree";
        if (r != CUDA_SUCCESS) return r;
        dev_allocs.erase(it);
    }
    return CUDA_SUCCESS;
}

static xmc_status create_stream(xmc_instance *inst, int32_t device, xmc_stream **out) {
    Stream s;
    s.device = device;
    if (xmc_status st = device_context(inst, device, "stream_create", &s.ctx); st != XMC_OK) return st;
    Driver &d = Driver::get();
    {
        CtxScope scope(d, s.ctx);
        if (scope.result() != CUDA_SUCCESS) return driver_fail(inst, scope.result(), "stream_create", "cuCtxPushCurrent");
        // Non-blocking: no implicit order with the legacy default stream;
        // only events order streams (COPY-ORDER).
        if (CUresult r = d.cuStreamCreate(&s.stream, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS)
            return driver_fail(inst, r, "stream_create", "cuStreamCreate");
    }
    xmc_stream *h = be::new_cookie<xmc_stream>();
    std::lock_guard<std::mutex> lock(as_cuda(inst)->mu);
    as_cuda(inst)->streams[h] = s;
    *out = h;
    return XMC_OK;
}

xmc_status stream_destroy(xmc_instance *inst, xmc_stream *handle) {
    Instance *in = as_cuda(inst);
    Stream s;
    {
        std::lock_guard<std::mutex> lock(in->mu);
        auto it = in->streams.find(handle);
        if (it == in->streams.end()) return bad_stream(inst, "stream_destroy", handle);
        s = it->second;
    }
    if (s.capture) return refuse_capturing(inst, "stream_destroy");
    if (CUresult r = destroy_stream(s); r != CUDA_SUCCESS)
        return driver_fail(inst, r, "stream_destroy", "cuStreamSynchronize/cuStreamDestroy");  // kept: the caller may retry
    std::lock_guard<std::mutex> lock(in->mu);
    in->streams.erase(handle);
    be::free_cookie(handle);
    return XMC_OK;
}

xmc_status stream_synchronize(xmc_instance *inst, xmc_stream *handle) {
    Stream s;
    if (!find_stream(inst, handle, &s)) return bad_stream(inst, "stream_synchronize", handle);
    // The driver refuses it too, and ends the capture (probe: capture_stream_synchronize).
    if (s.capture) return refuse_capturing(inst, "stream_synchronize");
    Driver &d = Driver::get();
    CtxScope scope(d, s.ctx);
    CUresult r = scope.result();
    if (r == CUDA_SUCCESS) r = d.cuStreamSynchronize(s.stream);
    return r == CUDA_SUCCESS ? XMC_OK : driver_fail(inst, r, "stream_synchronize", "cuStreamSynchronize");
}

static xmc_status create_event(xmc_instance *inst, int32_t device, xmc_event **out) {
    Event e;
    e.device = device;
    if (xmc_status st = device_context(inst, device, "event_create", &e.ctx); st != XMC_OK) return st;
    Driver &d = Driver::get();
    {
        CtxScope scope(d, e.ctx);
        CUresult r = scope.result();
        if (r == CUDA_SUCCESS) r = d.cuEventCreate(&e.event, CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS) return driver_fail(inst, r, "event_create", "cuEventCreate");
    }
    xmc_event *h = be::new_cookie<xmc_event>();
    std::lock_guard<std::mutex> lock(as_cuda(inst)->mu);
    as_cuda(inst)->events[h] = e;
    *out = h;
    return XMC_OK;
}

xmc_status event_destroy(xmc_instance *inst, xmc_event *handle) {
    Event e;
    if (!find_event(inst, handle, &e)) return bad_event(inst, "event_destroy", handle);
    Driver &d = Driver::get();
    {
        CtxScope scope(d, e.ctx);
        CUresult r = scope.result();
        if (r == CUDA_SUCCESS) r = d.cuEventDestroy(e.event);
        if (r != CUDA_SUCCESS) return driver_fail(inst, r, "event_destroy", "cuEventDestroy");
    }
    std::lock_guard<std::mutex> lock(as_cuda(inst)->mu);
    as_cuda(inst)->events.erase(handle);
    be::free_cookie(handle);
    return XMC_OK;
}

xmc_status event_record(xmc_instance *inst, xmc_event *eh, xmc_stream *sh) {
    Event e;
    Stream s;
    if (!find_event(inst, eh, &e)) return bad_event(inst, "event_record", eh);
    if (!find_stream(inst, sh, &s)) return bad_stream(inst, "event_record", sh);
    // The driver would take it into the capture, where the event means nothing
    // to a launch (and querying it is CUDA_ERROR_CAPTURED_EVENT until the end).
    if (s.capture) return refuse_capturing(inst, "event_record");
    // The driver records an event only on a stream of its own context.
    if (e.device != s.device)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "event_record",
                        "event_record: event of device %d recorded on a stream of device %d", e.device, s.device);
    Driver &d = Driver::get();
    CtxScope scope(d, s.ctx);
    CUresult r = scope.result();
    if (r == CUDA_SUCCESS) r = d.cuEventRecord(e.event, s.stream);
    return r == CUDA_SUCCESS ? XMC_OK : driver_fail(inst, r, "event_record", "cuEventRecord");
}

xmc_status event_synchronize(xmc_instance *inst, xmc_event *eh) {
    Event e;
    if (!find_event(inst, eh, &e)) return bad_event(inst, "event_synchronize", eh);
    Driver &d = Driver::get();
    CtxScope scope(d, e.ctx);
    CUresult r = scope.result();
    if (r == CUDA_SUCCESS) r = d.cuEventSynchronize(e.event);
    return r == CUDA_SUCCESS ? XMC_OK : driver_fail(inst, r, "event_synchronize", "cuEventSynchronize");
}

xmc_status stream_wait_event(xmc_instance *inst, xmc_stream *sh, xmc_event *eh) {
    Event e;
    Stream s;
    if (!find_event(inst, eh, &e)) return bad_event(inst, "stream_wait_event", eh);
    if (!find_stream(inst, sh, &s)) return bad_stream(inst, "stream_wait_event", sh);
    // An event recorded outside the capture: CUDA_ERROR_STREAM_CAPTURE_ISOLATION (probe).
    if (s.capture) return refuse_capturing(inst, "stream_wait_event", CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    Driver &d = Driver::get();
    CtxScope scope(d, s.ctx);
    CUresult r = scope.result();
    // COPY-ORDER: events order work across streams.
    if (r == CUDA_SUCCESS) r = d.cuStreamWaitEvent(s.stream, e.event, 0);
    return r == CUDA_SUCCESS ? XMC_OK : driver_fail(inst, r, "stream_wait_event", "cuStreamWaitEvent");
}

namespace {
struct Callback {
    xmc_host_fn fn;
    void *user;
};
// Runs on the driver's callback thread: no driver call here (VMM-CALLBACK).
void CUDA_CB trampoline(void *p) {
    auto *cb = static_cast<Callback *>(p);
    cb->fn(cb->user);
    delete cb;
}
// A recorded callback: run by every launch, freed with its graph.
void CUDA_CB recorded_trampoline(void *p) {
    auto *cb = static_cast<RecordedCallback *>(p);
    cb->fn(cb->user);
}
} // namespace

static xmc_status enqueue_callback(xmc_instance *inst, xmc_stream *sh, xmc_host_fn fn, void *user) {
    Stream s;
    if (!find_stream(inst, sh, &s)) return bad_stream(inst, "host_callback", sh);
    if (s.capture) {
        // GRAPH-CAPTURE: recorded; the capture keeps the record for the graph.
        auto rec = std::unique_ptr<RecordedCallback>(new (std::nothrow) RecordedCallback{fn, user});
        if (!rec) return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, 0, "host_callback", "host_callback: out of host memory");
        Driver &d = Driver::get();
        CtxScope scope(d, s.ctx);
        CUresult r = scope.result();
        if (r == CUDA_SUCCESS) r = d.cuLaunchHostFunc(s.stream, recorded_trampoline, rec.get());
        if (r != CUDA_SUCCESS) return driver_fail(inst, r, "host_callback", "cuLaunchHostFunc");
        std::lock_guard<std::mutex> lock(s.capture->mu);
        s.capture->callbacks.push_back(std::move(rec));
        return XMC_OK;
    }
    auto *cb = new (std::nothrow) Callback{fn, user};
    if (!cb) return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, 0, "host_callback", "host_callback: out of host memory");
    Driver &d = Driver::get();
    CtxScope scope(d, s.ctx);
    CUresult r = scope.result();
    if (r == CUDA_SUCCESS) r = d.cuLaunchHostFunc(s.stream, trampoline, cb);
    if (r != CUDA_SUCCESS) {
        delete cb;  // never enqueued
        return driver_fail(inst, r, "host_callback", "cuLaunchHostFunc");
    }
    return XMC_OK;
}

static xmc_status alloc_device(xmc_instance *inst, int32_t device, size_t bytes, void **out) {
    DevAlloc a;
    a.device = device;
    if (xmc_status st = device_context(inst, device, "dev_alloc", &a.ctx); st != XMC_OK) return st;
    Driver &d = Driver::get();
    CUdeviceptr p = 0;
    {
        CtxScope scope(d, a.ctx);
        CUresult r = scope.result();
        if (r == CUDA_SUCCESS) r = d.cuMemAlloc(&p, bytes);
        if (r == CUDA_ERROR_OUT_OF_MEMORY)
            return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, r, "dev_alloc",
                            "dev_alloc: cuMemAlloc of %zu bytes on device %d: out of device memory", bytes, device);
        if (r != CUDA_SUCCESS) return driver_fail(inst, r, "dev_alloc", "cuMemAlloc");
    }
    std::lock_guard<std::mutex> lock(as_cuda(inst)->mu);
    as_cuda(inst)->dev_allocs[static_cast<uintptr_t>(p)] = a;
    *out = reinterpret_cast<void *>(p);
    return XMC_OK;
}

xmc_status dev_free(xmc_instance *inst, void *ptr) {
    Instance *in = as_cuda(inst);
    std::lock_guard<std::mutex> lock(in->mu);
    auto it = in->dev_allocs.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == in->dev_allocs.end())
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "dev_free",
                        "dev_free: %p is not a base that dev_alloc of this instance returned", ptr);
    Driver &d = Driver::get();
    CtxScope scope(d, it->second.ctx);
    CUresult r = scope.result();
    if (r == CUDA_SUCCESS) r = d.cuMemFree(reinterpret_cast<CUdeviceptr>(ptr));
    if (r != CUDA_SUCCESS) return driver_fail(inst, r, "dev_free", "cuMemFree");  // still tracked
    in->dev_allocs.erase(it);
    be::book_remove(reinterpret_cast<uintptr_t>(ptr), be::MemKind::Device);
    return XMC_OK;
}

static int32_t devices() { return static_cast<int32_t>(Driver::get().devices.size()); }
static bool live_stream(xmc_instance *inst, xmc_stream *h) {
    Stream s;
    return find_stream(inst, h, &s);
}
static xmc_status ready_copy(xmc_instance *inst) { return require(inst, "copy", Driver::get().missing_copy); }

XMC_STREAM_OPS(ready, ready_copy, devices, live_stream, vmm_copy_check,
               enqueue_copy, create_stream, create_event, alloc_device, enqueue_callback)

} // namespace xmc::cuda
