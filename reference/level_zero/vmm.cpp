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
#include "slot_book.hpp"
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
    std::vector<InFlight> in_flight;
    std::vector<std::shared_ptr<Request>> retired;  // destroyed; their events not yet
};

std::shared_ptr<Vmm> vmm_create() { return std::make_shared<Vmm>(); }

bool vmm_option(Instance *in, const std::string &key, const std::string &value, xmc_status *st) {
    return be::workers_option(key, value, &in->vmm->workers, st);
}

namespace {

Vmm &vmm_of(xmc_instance *inst) { return *static_cast<Instance *>(inst)->vmm; }

// ---- physical memory of a slot ---------------------------------------------

// Fresh memory at the slot's address, readable and writable by its device.
ze_result_t map_backing(Slot &s) {
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
ze_result_t unmap_backing(Slot &s) {
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
    v.cv.notify_all();
    return ZE_RESULT_SUCCESS;
}

void run_release(Request &r) {
    for (size_t i = 0; i < r.slots.size(); ++i) {
        const auto &s = r.slots[i];
        if (ze_result_t res = unmap_backing(*s); res != ZE_RESULT_SUCCESS) {
            // VMM-ASYNC-ERROR: the driver's code is the request's; slot stays mapped.
            record(r, res, "zeVirtualMemUnmap/zePhysicalMemDestroy of a slot" + be::batch_index(i));
            s->release_status = r.status;
            s->release_native = res;
        }
        be::release_ran(*s, r, s->phys != nullptr);
    }
}

void run_remap(xmc_instance *inst, Vmm &v, const std::shared_ptr<Request> &r) {
    Driver &d = Driver::get();
    size_t mapped = 0;
    for (const auto &s : r->slots) {
        // VMM-ASYNC-ERROR: a remap waiting on a failed release fails too.
        if (s->phys) {  // its release failed: the slot was never unmapped
            r->record(s->release_status, s->release_native,
                      "the release this remap waited for failed; the slot still holds its old mapping" +
                          be::batch_index(mapped));
            break;
        }
        if (ze_result_t res = map_backing(*s); res != ZE_RESULT_SUCCESS) {
            record(*r, res, "zePhysicalMemCreate/zeVirtualMemMap of a slot" + be::batch_index(mapped));
            break;
        }
        ++mapped;
    }
    if (r->status != XMC_OK) {
        // VMM-ASYNC-ERROR: slots back to what the model says (slot_book.hpp).
        // Roll back every mapping this request made: none was adopted.
        for (size_t i = 0; i < mapped; ++i) unmap_backing(*r->slots[i]);
        be::remap_failed(*r, [](const Slot &s) { return s.phys != nullptr; });
        // VMM-EVENT-WAIT: a consumer of a copy that will never run is released.
        for (ze_event_handle_t ev : r->events) d.zeEventHostSignal(ev);  // no copy will: consumers go on
    } else if (!r->defer) {
        std::shared_ptr<Stream> st = find_stream(inst, r->stream);
        for (size_t i = 0; i < r->slots.size(); ++i) {
            if (st) {
                issue_copy(v, r, i, *st);
                continue;
            }
            d.zeEventHostSignal(r->events[i]);
            r->record(XMC_ERR_INVALID_HANDLE, 0, "the request's stream was destroyed before its copies were issued");
        }
    }
    for (const auto &s : r->slots) --s->jobs;
}

void run(xmc_instance *inst, Vmm &v, const std::shared_ptr<Request> &r) {
    if (r->remap) run_remap(inst, v, r);
    else run_release(*r);
    r->done = true;
    v.cv.notify_all();
}

void worker_loop(xmc_instance *inst, Vmm *v) {
    be::work(*v, [&](const std::shared_ptr<Request> &r) { run(inst, *v, r); });
}

void finish_copy(Vmm &v, InFlight &f, ze_result_t res) {
    Request &r = *f.r;
    if (res != ZE_RESULT_SUCCESS) record(r, res, "the reload copy of a slot" + be::batch_index(f.index));
    r.copy_finished(f.index);
    v.cv.notify_all();
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

void start_threads(xmc_instance *inst, Vmm &v) {
    if (!v.threads.empty()) return;
    v.stop = false;
    // VMM-SERIAL: vmm_workers workers (1: serial) and the completion thread.
    for (unsigned i = 0; i < v.workers; ++i) v.threads.emplace_back(worker_loop, inst, &v);
    v.threads.emplace_back(completion_loop, &v);
}

struct Point {  // a request's place on its stream
    std::shared_ptr<Vmm> v;
    std::shared_ptr<Request> r;
};

// On the stream's callback thread: hand the request to the workers, nothing
// else (VMM-CALLBACK).
void on_stream_point(void *p) {
    auto *pt = static_cast<Point *>(p);
    {
        std::lock_guard<std::mutex> lock(pt->v->mu);
        pt->r->fired = true;
        pt->v->jobs.push_back(pt->r);
        pt->v->cv.notify_all();
    }
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

// VMM-STATE, VMM-BATCH, VMM-REMAP-COPY: the shared refusals (make_request).
// Every refusal before any change, in the model's order (arguments, handles,
// duplicates, sources, states), then the stream, the copies' events and the
// stream point.
xmc_status submit(xmc_instance *inst, const char *call, bool remap, xmc_slot *const *handles, size_t n,
                  xmc_stream *stream, const void *const *srcs, const size_t *src_bytes, uint32_t flags,
                  xmc_request **out) {
    if (xmc_status st = require(inst, call, Driver::get().missing_vmm); st != XMC_OK) return st;
    const be::Batch b{call, remap, handles, n, stream, srcs, src_bytes, flags, out};
    if (xmc_status st = be::check_batch(inst, b); st != XMC_OK) return st;
    Vmm &v = vmm_of(inst);
    std::lock_guard<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r;
    if (xmc_status st = be::make_request(inst, v, b, &r); st != XMC_OK) return st;
    std::shared_ptr<Stream> st = find_stream(inst, stream);
    if (!st) return bad_stream(inst, call, stream);
    // VMM-GRAPH-ORDER: the stream point cannot join a capture (it would be
    // recorded into the graph): refused, nothing changed.
    if (capturing(*st)) return refuse_capturing(inst, call);
    r->device = st->device;
    if (remap) {
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
    auto *pt = new (std::nothrow) Point{static_cast<Instance *>(inst)->vmm, r};
    xmc_status enq = pt ? enqueue_callback(inst, *st, on_stream_point, pt, call)
                        : be::fail(inst, XMC_ERR_OUT_OF_MEMORY, 0, call, "%s: out of host memory", call);
    if (enq != XMC_OK) {
        delete pt;  // never to run: nothing changed
        destroy_events(&r->pool, r->events.data(), static_cast<uint32_t>(r->events.size()));
        return enq;
    }
    be::commit(v, r, out);
    return XMC_OK;
}

// Unmaps and frees a slot once no work on it is in flight (VMM-CLOSE). A
// driver failure stops it there and is returned, the slot still open with
// what is left, so that closing again finishes (it went on and called the
// slot closed with its memory still in the driver: the fault sweep's ledger).
ze_result_t close_slot(Vmm &v, std::unique_lock<std::mutex> &lock, Slot &s, const char **what) {
    v.cv.wait(lock, [&] { return s.jobs == 0 && s.copies == 0; });
    Driver &d = Driver::get();
    if (s.phys) {
        const ze_result_t r = unmap_backing(s);
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
    s.closed = true;
    v.cv.notify_all();
    return ZE_RESULT_SUCCESS;
}

} // namespace

// ---- entry points -------------------------------------------------------------------

// A failed slot_create: out of host or device memory is XMC_ERR_OUT_OF_MEMORY.
static xmc_status create_fail(xmc_instance *inst, ze_result_t r, const char *what, size_t size) {
    if (r == ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY || r == ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
        return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, r, "slot_create", "slot_create: %s of %zu bytes failed with %s",
                        what, size, result_name(r));
    return driver_fail(inst, r, "slot_create", what);
}

xmc_status slot_create(xmc_instance *inst, int32_t device, size_t bytes, xmc_slot **out, xmc_slot_info *info) {
    const char *call = "slot_create";
    Driver &d = Driver::get();
    if (xmc_status st = require(inst, call, d.missing_vmm); st != XMC_OK) return st;
    if (!out || !info) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "slot_create: NULL result");
    if (xmc_status st = check_device(inst, device, call); st != XMC_OK) return st;
    if (bytes == 0) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "slot_create: size 0");
    auto s = std::make_shared<Slot>();
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
    if (ze_result_t r = map_backing(*s); r != ZE_RESULT_SUCCESS) {
        d.zeVirtualMemFree(s->ctx, p, s->size);
        return create_fail(inst, r, "zePhysicalMemCreate/zeVirtualMemMap", s->size);
    }
    Vmm &v = vmm_of(inst);
    std::lock_guard<std::mutex> lock(v.mu);
    start_threads(inst, v);
    *out = be::add_slot(v, s);
    *info = xmc_slot_info{p, s->size, device};
    return XMC_OK;
}

// slot_release, slot_remap and their batches: one submit each (slot_book.hpp).
XMC_SLOT_SUBMIT_ENTRIES(submit)

xmc_status request_launch_copy(xmc_instance *inst, xmc_request *h, uint32_t index, xmc_stream *sh) {
    const char *call = "request_launch_copy";
    Vmm &v = vmm_of(inst);
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r = be::find_request(v, h);
    if (!r) return be::bad_request(inst, call, h);
    // VMM-DEFERRED: once per slot, after the remap, into its own mapping.
    if (xmc_status st = be::check_launch(inst, call, *r, index); st != XMC_OK) return st;
    std::shared_ptr<Stream> st = find_stream(inst, sh);
    if (!st) return bad_stream(inst, call, sh);
    if (st->device != r->device)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: a stream of device %d for a slot of device %d",
                        call, st->device, r->device);
    if (capturing(*st)) return refuse_capturing(inst, call);  // VMM-GRAPH-ORDER
    // A claim is not a launch here: a stream told to wait meanwhile must not
    // wait on this copy's event, which nothing signals if the launch is refused.
    if (xmc_status res = be::claim_copy(inst, call, v, lock, *r, index, CopyState::Claimed); res != XMC_OK) return res;
    if (xmc_status res = be::check_target(inst, call, *r, index); res != XMC_OK) return res;
    if (ze_result_t res = issue_copy(v, r, index, *st, true); res != ZE_RESULT_SUCCESS)
        return driver_fail(inst, res, call, "zeCommandListAppendMemoryCopy");
    return XMC_OK;
}

xmc_status request_wait(xmc_instance *inst, xmc_request *h, uint32_t timeout_ms) {
    return be::wait_request(inst, vmm_of(inst), h, timeout_ms);
}

// request_adopt and request_query: the book's own (slot_book.hpp).
XMC_SLOT_REQUEST_ENTRIES(vmm_of)

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

xmc_status request_destroy(xmc_instance *inst, xmc_request *h) {
    Vmm &v = vmm_of(inst);
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r = be::find_request(v, h);
    if (!r) return be::bad_request(inst, "request_destroy", h);
    be::forget_request(v, lock, h, *r);
    // VMM-ADOPT: an adopted mapping is the slot's and stays.
    // Never adopted: the request's mapping goes with it (kept, as the slot's
    // own, if it is still mapped after a failed unmap).
    be::drop_unadopted(*r, [](Slot &s) {
        unmap_backing(s);
        return s.phys == nullptr;
    });
    if (r->remap) v.retired.push_back(r);
    reap(v, false);  // a failure here is retried later, at the latest by close
    v.cv.notify_all();
    return XMC_OK;
}

xmc_status slot_close(xmc_instance *inst, xmc_slot *h) {
    Vmm &v = vmm_of(inst);
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<Slot> s;
    if (xmc_status st = be::take_slot(inst, v, h, &s); st != XMC_OK) return st;
    const char *what = "";
    if (ze_result_t r = close_slot(v, lock, *s, &what); r != ZE_RESULT_SUCCESS) {
        v.slots[h] = s;  // still open: a second close finishes
        return be::fail(inst, status_of(r), r, "slot_close",
                        "slot_close: %s failed with %s (0x%x); the slot is still open: closing it again finishes",
                        what, result_name(r), static_cast<unsigned>(r));
    }
    return XMC_OK;
}

xmc_status vmm_before_capture(xmc_instance *inst, xmc_stream *s, const std::function<xmc_status()> &begin) {
    Vmm &v = vmm_of(inst);
    std::lock_guard<std::mutex> lock(v.mu);
    if (be::copies_to_enqueue_on(v, s))
        return be::fail(inst, XMC_ERR_BUSY, 0, "graph_begin",
                        "graph_begin: a remap on this stream has not issued its reload copies yet (wait for it first)");
    return begin();
}

xmc_status vmm_copy_check(xmc_instance *inst, const be::CopySpan (&spans)[2]) {
    Instance *in = static_cast<Instance *>(inst);
    if (!in->vmm) return XMC_OK;
    const uintptr_t first[2] = {spans[0].first, spans[1].first}, last[2] = {spans[0].last, spans[1].last};
    return be::check_copy_slots(inst, *in->vmm, first, last, [](const Slot &s) { return s.phys != nullptr; });
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
    std::unique_lock<std::mutex> lock(v.mu);
    size_t closed = 0;  // close_report counts them
    *failed = ZE_RESULT_SUCCESS;
    while (!v.slots.empty()) {
        auto it = v.slots.begin();
        std::shared_ptr<Slot> s = it->second;
        xmc_slot *const h = it->first;
        v.slots.erase(it);
        // A failure keeps that slot (and the rest) for the retry of close.
        if (ze_result_t r = close_slot(v, lock, *s, what); r != ZE_RESULT_SUCCESS) {
            v.slots[h] = s;
            *failed = r;
            return closed;
        }
        ++closed;
    }
    // Every request has run (each slot's close waited for them): the ones
    // left go once the streams are gone (vmm_release_events).
    for (auto &[h, r] : v.requests)
        if (r->remap) v.retired.push_back(r);
    v.requests.clear();
    be::stop_threads(v, lock);
    v.threads.clear();
    return closed;
}

ze_result_t vmm_release_events(Instance *in) {
    Vmm &v = *in->vmm;
    std::lock_guard<std::mutex> lock(v.mu);
    return reap(v, true);
}

} // namespace xmc::ze
