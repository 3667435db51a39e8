// Fixed-address slots through Level Zero (capability `vmm`, VMM-*), after
// reference/model/slot_model.hpp and in the shape of reference/cuda/vmm.cpp.
// A slot is a range from zeVirtualMemReserve in its device's own context,
// rounded up to the page size zeVirtualMemQueryPageSize gives for the size
// asked; its physical memory comes from zePhysicalMemCreate, mapped with
// zeVirtualMemMap read/write (the map grants the access). Release is
// zeVirtualMemUnmap and zePhysicalMemDestroy; remap maps a fresh physical
// object at the same address (VMM-STABLE) and copies from a pinned host source
// with zeCommandListAppendMemoryCopy on the request's stream (VMM-REMAP-COPY).
//
// Order: a host callback on the caller's stream (stream.cpp: run by that
// stream's callback thread) marks the point after the stream's prior work
// (VMM-RELEASE-ORDER) and only hands the request to the workers: no driver
// call on a callback thread (VMM-CALLBACK). A worker runs only requests whose
// dependencies are met (a remap after its slots' releases, a release after the
// copies into its slots), so one worker is enough (VMM-SERIAL).
//
// Copies: each slot of a remap has an event, made with the request, that its
// copy signals. A Level Zero list may wait for an event nobody has signalled
// yet, so a consumer stream waits on the device for copies not issued yet
// (VMM-EVENT-WAIT), with no host-side hold. A copy that will never be issued
// (the remap failed) has its event signalled by the worker, so that no
// consumer hangs. A completion thread (never a callback) sees copies finish
// with zeEventQueryStatus. A destroyed request's events stay until every
// consumer list has passed its wait (a signal appended after the wait says
// so), at the latest until close, once the streams are gone.
//
// The slot entry points are reference/common/slots.hpp's; this file is Level Zero's steps
// (be::VmmOps), the completion thread, request_stream_wait and device_free_memory.
#include "slots.hpp"
#include "ze.hpp"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace xmc::ze {

namespace {

using be::CopyState;

struct Request;

struct Slot : be::SlotBase<Request> {
    uintptr_t addr = 0;
    int32_t device = 0;
    ze_context_handle_t ctx = nullptr;
    ze_device_handle_t dev = nullptr;
    ze_physical_mem_handle_t phys = nullptr;  // the memory mapped now, or null while released
    std::vector<ze_physical_mem_handle_t> stray;  // unmapped, but the driver kept it: destroyed at close
};

struct Consumer {  // a stream told to wait for a request's copies
    ze_event_pool_handle_t pool = nullptr;
    ze_event_handle_t passed = nullptr;  // signalled by that stream once past its wait
};

struct Request : be::RequestBase<Slot> {
    int32_t device = 0;  // the stream's device, and (remap) every slot's
    ze_event_pool_handle_t pool = nullptr;  // remap: the copies' events, in the device's context
    std::vector<ze_event_handle_t> events;  // per slot: its copy finished, or will never run
    std::vector<Consumer> consumers;
    bool consumer_unknown = false;  // a wait whose `passed` could not be appended: events kept until close
};

struct InFlight {  // a copy the completion thread watches
    std::shared_ptr<Request> r;
    size_t index;
};

} // namespace

// Slots, requests and threads: the shared book (slot_book.hpp), the copies
// in flight and the events of destroyed requests.
struct Vmm : be::SlotBook<Slot, Request> {
    using SlotType = Slot;
    using RequestType = Request;
    be::VmmOps<Vmm> ops;
    std::vector<InFlight> in_flight;
    std::vector<std::shared_ptr<Request>> retired;  // destroyed; their events not yet
};

be::VmmOps<Vmm> &vmm_ops();

std::shared_ptr<Vmm> vmm_create() {
    auto v = std::make_shared<Vmm>();
    v->ops = vmm_ops();
    return v;
}

bool vmm_option(Instance *in, const std::string &key, const std::string &value, xmc_status *st) {
    return be::workers_option(key, value, &in->vmm->workers, st);
}

namespace {

Vmm &vmm_of(xmc_instance *inst) { return *static_cast<Instance *>(inst)->vmm; }

// ---- physical memory of a slot ---------------------------------------------

// Fresh memory at the slot's address, readable and writable by its device.
int64_t map_backing(Vmm &, Slot &s, bool) {
    Driver &d = Driver::get();
    ze_physical_mem_desc_t desc{ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, nullptr, 0, s.size};
    ze_physical_mem_handle_t h = nullptr;
    if (ze_result_t r = d.zePhysicalMemCreate(s.ctx, s.dev, &desc, &h); r != ZE_RESULT_SUCCESS) return r;
    // VMM-STABLE, VMM-CREATE: mapped read/write at the slot's own address.
    const ze_result_t r = d.zeVirtualMemMap(s.ctx, reinterpret_cast<void *>(s.addr), s.size, h, 0,
                                            ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE);
    if (r != ZE_RESULT_SUCCESS) {
        if (d.zePhysicalMemDestroy(s.ctx, h) != ZE_RESULT_SUCCESS) s.stray.push_back(h);
        return r;
    }
    s.phys = h;
    return ZE_RESULT_SUCCESS;
}

// VMM-ASYNC-ERROR: a failed release leaves the slot as it was.
// Unmapped, then destroyed: the memory returns to the device. A failed unmap
// leaves the slot mapped; after a failed destroy the same memory is mapped
// back (its bytes intact), so a failed release leaves the slot as it was
// (the model's rule). Only if that fails too is the slot left unmapped, its
// memory kept for close.
int64_t unmap_backing(Vmm &, Slot &s, bool) {
    Driver &d = Driver::get();
    void *p = reinterpret_cast<void *>(s.addr);
    // VMM-UNMAPPED-FAULTS: the range stays reserved, unmapped: an access faults;
    // VMM-RELEASE-ORDER: destroyed, the memory goes back to the device.
    if (ze_result_t r = d.zeVirtualMemUnmap(s.ctx, p, s.size); r != ZE_RESULT_SUCCESS) return r;
    const ze_result_t r = d.zePhysicalMemDestroy(s.ctx, s.phys);
    if (r != ZE_RESULT_SUCCESS &&
        d.zeVirtualMemMap(s.ctx, p, s.size, s.phys, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE) == ZE_RESULT_SUCCESS)
        return r;
    if (r != ZE_RESULT_SUCCESS) s.stray.push_back(s.phys);
    s.phys = nullptr;
    return r;
}

void record(Request &r, ze_result_t res, const std::string &what) {
    r.record(status_of(res) == XMC_OK ? XMC_ERR_DRIVER : status_of(res), res, what + " failed with " + result_name(res));
}

// ---- workers ------------------------------------------------------------------

// Appends the reload copy of slot i of r to `st`, signalling its event.
// Caller holds v.mu and is no callback thread. A deferred launch (`launch`)
// that fails is its caller's to report and may be tried again: the request
// stays good, and no consumer waits on a copy not launched (VMM-ERROR-CLEAR;
// failing the request made the launch's failure reported twice and the slot
// unusable until destroyed). The worker's own copies fail their request.
ze_result_t issue_copy(Vmm &v, const std::shared_ptr<Request> &r, size_t i, Stream &st, bool launch = false) {
    Driver &d = Driver::get();
    Slot &s = *r->slots[i];
    ze_result_t res = ZE_RESULT_SUCCESS;
    {
        std::lock_guard<std::mutex> lock(st.append_mu);
        // VMM-REMAP-COPY: the whole slot from its checked pinned source.
        res = d.zeCommandListAppendMemoryCopy(st.list, reinterpret_cast<void *>(s.addr), r->srcs[i], s.size,
                                              r->events[i], 0, nullptr);
    }
    if (res != ZE_RESULT_SUCCESS && launch) return res;
    if (res != ZE_RESULT_SUCCESS) {
        d.zeEventHostSignal(r->events[i]);  // it will never run: nobody may wait for it
        record(*r, res, "zeCommandListAppendMemoryCopy of a slot's reload copy" + be::batch_index(i));
        return res;
    }
    r->copy_launched(i);
    v.in_flight.push_back({r, i});
    v.announce();
    return ZE_RESULT_SUCCESS;
}

void finish_copy(Vmm &v, InFlight &f, ze_result_t res) {
    Request &r = *f.r;
    if (res != ZE_RESULT_SUCCESS) record(r, res, "the reload copy of a slot" + be::batch_index(f.index));
    r.copy_finished(f.index);
    v.announce();
}

// Notices copies finishing. A plain thread (driver calls are allowed here),
// polling every copy in flight, so none waits behind another.
void completion_loop(Vmm *v) {
    Driver &d = Driver::get();
    std::unique_lock<std::mutex> lock(v->mu);
    for (;;) {
        if (v->in_flight.empty()) {
            if (v->stop) return;
            v->cv.wait(lock);
            continue;
        }
        bool progressed = false;
        for (size_t k = 0; k < v->in_flight.size();) {
            InFlight &f = v->in_flight[k];
            const ze_result_t res = d.zeEventQueryStatus(f.r->events[f.index]);
            if (res == ZE_RESULT_NOT_READY) {
                ++k;
                continue;
            }
            // A failed query does not say the copy has ended: wait for its event before the
            // slot may be released under it (the fault sweep caught a release unmapping under
            // a running copy, and the device lost after it).
            if (res != ZE_RESULT_SUCCESS) d.zeEventHostSynchronize(f.r->events[f.index], UINT64_MAX);
            finish_copy(*v, f, res);
            v->in_flight.erase(v->in_flight.begin() + static_cast<long>(k));
            progressed = true;
        }
        if (!progressed) v->cv.wait_for(lock, std::chrono::microseconds(200));
    }
}

struct Point {  // a request's place on its stream
    xmc_instance *inst;
    std::shared_ptr<Vmm> v;
    std::shared_ptr<Request> r;
};

// On the stream's callback thread: the point's step (VMM-CALLBACK: hand the request to the
// workers, nothing else).
void on_stream_point(void *p) {
    auto *pt = static_cast<Point *>(p);
    pt->v->ops.point_reached(pt->inst, pt->v, pt->r);
    delete pt;
}

// Destroys the events of a request and of its consumers' marks; stops at the
// first failure, keeping what is left for the next try.
ze_result_t destroy_request_events(Request &r) {
    while (!r.consumers.empty()) {
        Consumer &c = r.consumers.back();
        if (ze_result_t res = destroy_events(&c.pool, &c.passed, 1); res != ZE_RESULT_SUCCESS) return res;
        r.consumers.pop_back();
    }
    return destroy_events(&r.pool, r.events.data(), static_cast<uint32_t>(r.events.size()));
}

// Destroys the events of retired requests whose consumers have all passed
// their waits (all of them when `all`: no stream is left). Returns the first
// failure; what the driver kept stays for the next try.
ze_result_t reap(Vmm &v, bool all) {
    Driver &d = Driver::get();
    ze_result_t first = ZE_RESULT_SUCCESS;
    for (auto it = v.retired.begin(); it != v.retired.end();) {
        Request &r = **it;
        bool passed = all || !r.consumer_unknown;
        for (const Consumer &c : r.consumers)
            if (passed && !all && d.zeEventQueryStatus(c.passed) == ZE_RESULT_NOT_READY) passed = false;
        const ze_result_t res = passed ? destroy_request_events(r) : ZE_RESULT_SUCCESS;
        if (passed && res == ZE_RESULT_SUCCESS) {
            it = v.retired.erase(it);
            continue;
        }
        if (first == ZE_RESULT_SUCCESS) first = res;
        ++it;
    }
    return first;
}

// ---- requests -------------------------------------------------------------------

xmc_status bad_stream(xmc_instance *inst, const char *call, xmc_stream *h) {
    return be::fail(inst, XMC_ERR_INVALID_HANDLE, 0, call, "%s: %p is not a live stream of this instance", call,
                    static_cast<void *>(h));
}

// VMM-RELEASE-ORDER: the request's stream, the copies' events and its stream point, after the
// shared refusals (slots.hpp's submit).
xmc_status enqueue_point(xmc_instance *inst, const char *call, xmc_stream *stream, const std::shared_ptr<Vmm> &vp,
                         const std::shared_ptr<Request> &r) {
    std::shared_ptr<Stream> st = find_stream(inst, stream);
    if (!st) return bad_stream(inst, call, stream);
    // VMM-GRAPH-ORDER: the stream point cannot join a capture (it would be
    // recorded into the graph): refused, nothing changed.
    if (capturing(*st)) return refuse_capturing(inst, call);
    r->device = st->device;
    if (r->remap) {
        const size_t n = r->slots.size();
        // The copies run on the stream and signal events of its context:
        // every slot must be of the stream's device.
        for (size_t i = 0; i < n; ++i)
            if (r->slots[i]->device != st->device)
                return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call,
                                "%s: slot %zu is of device %d, the stream of device %d", call, i,
                                r->slots[i]->device, st->device);
        r->events.assign(n, nullptr);
        if (ze_result_t res = make_events(st->ctx, static_cast<uint32_t>(n), &r->pool, r->events.data());
            res != ZE_RESULT_SUCCESS)
            return driver_fail(inst, res, call, "zeEventPoolCreate/zeEventCreate");
    }
    // VMM-RELEASE-ORDER: a host callback on the caller's stream, after its prior work.
    auto *pt = new (std::nothrow) Point{inst, vp, r};
    xmc_status enq = pt ? enqueue_callback(inst, *st, on_stream_point, pt, call)
                        : be::fail(inst, XMC_ERR_OUT_OF_MEMORY, 0, call, "%s: out of host memory", call);
    if (enq != XMC_OK) {
        delete pt;  // never to run: nothing changed
        destroy_events(&r->pool, r->events.data(), static_cast<uint32_t>(r->events.size()));
        return enq;
    }
    return XMC_OK;
}

// request_launch_copy's stream: live, of the request's device, not capturing (VMM-GRAPH-ORDER).
xmc_status launch_check(xmc_instance *inst, Vmm &, Request &r, xmc_stream *sh) {
    const char *call = "request_launch_copy";
    std::shared_ptr<Stream> st = find_stream(inst, sh);
    if (!st) return bad_stream(inst, call, sh);
    if (st->device != r.device)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: a stream of device %d for a slot of device %d",
                        call, st->device, r.device);
    if (capturing(*st)) return refuse_capturing(inst, call);
    return XMC_OK;
}

// The reload copy of slot i: a worker's (its stream destroyed meanwhile fails the request, and
// nobody may wait for the copy), or a deferred launch's (launch_check passed).
xmc_status copy(xmc_instance *inst, Vmm &v, const std::shared_ptr<Request> &r, size_t i, xmc_stream *stream,
                const char *call) {
    const bool launch = std::strcmp(call, "request_launch_copy") == 0;
    std::shared_ptr<Stream> st = find_stream(inst, stream);
    if (!st && launch) return bad_stream(inst, call, stream);
    if (!st) {
        Driver::get().zeEventHostSignal(r->events[i]);
        r->record(XMC_ERR_INVALID_HANDLE, 0, "the request's stream was destroyed before its copies were issued");
        return XMC_ERR_INVALID_HANDLE;
    }
    const ze_result_t res = issue_copy(v, r, i, *st, launch);
    if (res != ZE_RESULT_SUCCESS && launch) return driver_fail(inst, res, call, "zeCommandListAppendMemoryCopy");
    return res == ZE_RESULT_SUCCESS ? XMC_OK : XMC_ERR_DRIVER;
}

// VMM-EVENT-WAIT: a consumer of a copy that will never run is released.
void undone(Vmm &, Request &r) {
    for (ze_event_handle_t ev : r.events) Driver::get().zeEventHostSignal(ev);  // no copy will: consumers go on
}

// A destroyed remap's events stay until its consumers have passed their waits.
void destroyed(Vmm &v, const std::shared_ptr<Request> &r) {
    if (r->remap) v.retired.push_back(r);
    reap(v, false);  // a failure here is retried later, at the latest by close
}

// Unmaps and frees a slot once no work on it is in flight (VMM-CLOSE, after close_wait). A
// driver failure stops it there and is returned, the slot still open with
// what is left, so that closing again finishes (it went on and called the
// slot closed with its memory still in the driver: the fault sweep's ledger).
int64_t close_free(Vmm &v, Slot &s, const char **what) {
    Driver &d = Driver::get();
    if (s.phys) {
        const auto r = static_cast<ze_result_t>(unmap_backing(v, s, false));
        if (!s.phys) {  // unmapped now, whatever else failed: the slot is released
            s.state = be::SlotState::Released;
            s.pending = nullptr;
            s.mapped_by = nullptr;
        }
        if (r != ZE_RESULT_SUCCESS) {
            *what = "zeVirtualMemUnmap/zePhysicalMemDestroy";
            return r;
        }
    }
    while (!s.stray.empty()) {
        if (ze_result_t r = d.zePhysicalMemDestroy(s.ctx, s.stray.back()); r != ZE_RESULT_SUCCESS) {
            *what = "zePhysicalMemDestroy";
            return r;
        }
        s.stray.pop_back();
    }
    if (ze_result_t r = d.zeVirtualMemFree(s.ctx, reinterpret_cast<void *>(s.addr), s.size); r != ZE_RESULT_SUCCESS) {
        *what = "zeVirtualMemFree";
        return r;
    }
    return ZE_RESULT_SUCCESS;
}

// A failed slot_create: out of host or device memory is XMC_ERR_OUT_OF_MEMORY.
xmc_status create_fail(xmc_instance *inst, ze_result_t r, const char *what, size_t size) {
    if (r == ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY || r == ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
        return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, r, "slot_create", "slot_create: %s of %zu bytes failed with %s",
                        what, size, result_name(r));
    return driver_fail(inst, r, "slot_create", what);
}

// VMM-CREATE: slot_create's driver part, after the shared NULL check.
xmc_status create(xmc_instance *inst, int32_t device, size_t bytes, Slot &slot) {
    const char *call = "slot_create";
    Driver &d = Driver::get();
    if (xmc_status st = check_device(inst, device, call); st != XMC_OK) return st;
    if (bytes == 0) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "slot_create: size 0");
    Slot *s = &slot;
    s->device = device;
    s->dev = d.devices[static_cast<size_t>(device)].handle;
    if (xmc_status st = device_context(inst, call, device, &s->ctx); st != XMC_OK) return st;
    size_t g = 0;
    if (ze_result_t r = d.zeVirtualMemQueryPageSize(s->ctx, s->dev, bytes, &g); r != ZE_RESULT_SUCCESS)
        return driver_fail(inst, r, call, "zeVirtualMemQueryPageSize");
    if (g == 0 || bytes > SIZE_MAX - g)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "slot_create: size %zu", bytes);
    // VMM-CREATE: rounded up to the page size the driver gives for this size.
    s->size = (bytes + g - 1) / g * g;
    // The start is only a hint, which the specification lets be null, but the
    // Debian loader's validation layer (1.8.12) refuses a null one; so a
    // page-aligned hint is given, and the driver reserves elsewhere if it is taken.
    void *p = nullptr;
    if (ze_result_t r = d.zeVirtualMemReserve(s->ctx, reinterpret_cast<void *>(g), s->size, &p);
        r != ZE_RESULT_SUCCESS)
        return create_fail(inst, r, "zeVirtualMemReserve", s->size);
    s->addr = reinterpret_cast<uintptr_t>(p);
    Vmm &v = vmm_of(inst);
    if (auto r = static_cast<ze_result_t>(v.ops.map(v, *s, false)); r != ZE_RESULT_SUCCESS) {
        d.zeVirtualMemFree(s->ctx, p, s->size);
        return create_fail(inst, r, "zePhysicalMemCreate/zeVirtualMemMap", s->size);
    }
    return XMC_OK;
}

xmc_status available(xmc_instance *inst, const char *call) {
    return require(inst, call, Driver::get().missing_vmm);
}
bool mapped(const Slot &s) { return s.phys != nullptr; }
xmc_status status_of_native(int64_t res) {
    const xmc_status st = status_of(static_cast<ze_result_t>(res));
    return st == XMC_OK ? XMC_ERR_DRIVER : st;
}
std::string native_name(int64_t res) { return result_name(static_cast<ze_result_t>(res)); }

} // namespace

be::VmmOps<Vmm> &vmm_ops() {
    static be::VmmOps<Vmm> ops{
        .map_call = "zePhysicalMemCreate/zeVirtualMemMap",
        .unmap_call = "zeVirtualMemUnmap/zePhysicalMemDestroy",
        .available = available,
        .create = create,
        .map = map_backing,
        .unmap = unmap_backing,
        .mapped = mapped,
        .status_of = status_of_native,
        .native_name = native_name,
        .copy = copy,
        // A claim is not a launch here: a stream told to wait meanwhile must not wait on this
        // copy's event, which nothing signals if the launch is refused.
        .claim = CopyState::Claimed,
        .launch_check = launch_check,
        .enqueue_point = enqueue_point,
        .point_reached = be::hand_to_workers<Vmm>,
        .worker = be::worker_loop<Vmm>,
        .undone = undone,
        .watcher = completion_loop,
        .destroyed = destroyed,
        .close_wait = be::wait_idle<Vmm>,
        .close_free = close_free,
    };
    return ops;
}

namespace {
const std::shared_ptr<Vmm> &vmm_ptr(xmc_instance *inst) { return static_cast<Instance *>(inst)->vmm; }
} // namespace

// ---- entry points -------------------------------------------------------------------

// slot_create, slot_release, slot_remap and their batches, request_launch_copy, request_wait,
// request_adopt, request_query, request_destroy, slot_close, vmm_before_capture, vmm_copy_check:
// the shared ones (slots.hpp) over the steps above.
XMC_SLOT_ENTRIES(vmm_ptr)

xmc_status request_stream_wait(xmc_instance *inst, xmc_request *h, xmc_stream *sh) {
    const char *call = "request_stream_wait";
    Vmm &v = vmm_of(inst);
    std::lock_guard<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r = be::find_request(v, h);
    if (!r) return be::bad_request(inst, call, h);
    if (!r->remap)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: a release request has no copies", call);
    std::shared_ptr<Stream> st = find_stream(inst, sh);
    if (!st) return bad_stream(inst, call, sh);
    if (st->device != r->device)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call,
                        "%s: a stream of device %d for copies on device %d", call, st->device, r->device);
    if (capturing(*st)) return refuse_capturing(inst, call);  // VMM-GRAPH-ORDER
    // VMM-EVENT-WAIT: the list waits on the copies' events, signalled or not yet.
    // The copies to wait for: all of a remap's own, issued or not (their
    // events exist from the start), or the deferred ones launched by now.
    std::vector<ze_event_handle_t> events;
    for (size_t i = 0; i < r->copies.size(); ++i)
        if (!r->defer || r->copies[i] == CopyState::Launched || r->copies[i] == CopyState::Done)
            events.push_back(r->events[i]);
    if (events.empty()) return XMC_OK;
    Consumer c;
    if (ze_result_t res = make_events(st->ctx, 1, &c.pool, &c.passed); res != ZE_RESULT_SUCCESS)
        return driver_fail(inst, res, call, "zeEventPoolCreate/zeEventCreate");
    Driver &d = Driver::get();
    std::lock_guard<std::mutex> append(st->append_mu);
    if (ze_result_t res = d.zeCommandListAppendWaitOnEvents(st->list, static_cast<uint32_t>(events.size()),
                                                            events.data());
        res != ZE_RESULT_SUCCESS) {
        destroy_events(&c.pool, &c.passed, 1);
        return driver_fail(inst, res, call, "zeCommandListAppendWaitOnEvents");
    }
    // Marks where the stream has passed its wait, so that the events may go.
    const ze_result_t res = d.zeCommandListAppendSignalEvent(st->list, c.passed);
    if (res != ZE_RESULT_SUCCESS) {
        r->consumer_unknown = true;  // the wait is queued, with no mark: the events stay until close
        destroy_events(&c.pool, &c.passed, 1);
        return driver_fail(inst, res, call, "zeCommandListAppendSignalEvent");
    }
    r->consumers.push_back(c);
    return XMC_OK;
}

xmc_status device_free_memory(xmc_instance *inst, int32_t device, uint64_t *free_bytes, uint64_t *total_bytes) {
    const char *call = "device_free_memory";
    Driver &d = Driver::get();
    if (xmc_status st = require(inst, call, d.missing_vmm); st != XMC_OK) return st;
    if (!free_bytes || !total_bytes)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "device_free_memory: NULL result");
    if (xmc_status st = check_device(inst, device, call); st != XMC_OK) return st;
    // Sysman takes the core device handle (the loader translates it).
    auto dev = reinterpret_cast<zes_device_handle_t>(d.devices[static_cast<size_t>(device)].handle);
    uint32_t n = 0;
    if (ze_result_t r = d.zesDeviceEnumMemoryModules(dev, &n, nullptr); r != ZE_RESULT_SUCCESS)
        return driver_fail(inst, r, call, "zesDeviceEnumMemoryModules");
    std::vector<zes_mem_handle_t> modules(n);
    if (n > 0) {
        if (ze_result_t r = d.zesDeviceEnumMemoryModules(dev, &n, modules.data()); r != ZE_RESULT_SUCCESS)
            return driver_fail(inst, r, call, "zesDeviceEnumMemoryModules");
    }
    if (n == 0)
        return be::fail(inst, XMC_ERR_UNSUPPORTED, 0, call, "%s: Sysman reports no memory module on device %d", call,
                        device);
    uint64_t f = 0, t = 0;
    for (uint32_t i = 0; i < n; ++i) {
        zes_mem_state_t st{};
        st.stype = ZES_STRUCTURE_TYPE_MEM_STATE;
        if (ze_result_t r = d.zesMemoryGetState(modules[i], &st); r != ZE_RESULT_SUCCESS)
            return driver_fail(inst, r, call, "zesMemoryGetState");
        f += st.free;
        t += st.size;
    }
    *free_bytes = f;
    *total_bytes = t;
    return XMC_OK;
}

size_t vmm_close(Instance *in, ze_result_t *failed, const char **what) {
    Vmm &v = *in->vmm;
    int64_t native = 0;
    // A failure keeps that slot (and the rest) for the retry of close.
    const size_t closed = be::close_slots(v, &native, what);  // close_report counts them
    *failed = static_cast<ze_result_t>(native);
    if (native) return closed;
    // Every request has run (each slot's close waited for them): the ones
    // left go once the streams are gone (vmm_release_events).
    std::lock_guard<std::mutex> lock(v.mu);
    for (auto &[h, r] : v.requests)
        if (r->remap) v.retired.push_back(r);
    v.requests.clear();
    return closed;
}

ze_result_t vmm_release_events(Instance *in) {
    Vmm &v = *in->vmm;
    std::lock_guard<std::mutex> lock(v.mu);
    return reap(v, true);
}

} // namespace xmc::ze
