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
#include "ze.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace xmc::ze {

namespace {

struct Request;

enum class SlotState { Mapped, ReleasePending, Released, RemapPending };

struct Slot {
    uintptr_t addr = 0;
    size_t size = 0;
    int32_t device = 0;
    ze_context_handle_t ctx = nullptr;
    ze_device_handle_t dev = nullptr;
    ze_physical_mem_handle_t phys = nullptr;  // the memory mapped now, or null while released
    std::vector<ze_physical_mem_handle_t> stray;  // unmapped, but the driver kept it: destroyed at close
    bool closed = false;
    SlotState state = SlotState::Mapped;
    Request *pending = nullptr;    // the release or remap of ReleasePending / RemapPending
    Request *mapped_by = nullptr;  // the remap whose mapping it holds (nullptr: create's)
    bool release_queued = false;   // a release not yet run by a worker: a remap waits for it
    int jobs = 0;                  // requests naming it not yet run by a worker: close waits
    int copies = 0;                // copies into it not yet finished: release and close wait
    xmc_status release_status = XMC_OK;  // why its last release failed
    int64_t release_native = 0;
};

// Claimed: a deferred launch waiting for its remap; not launched yet.
enum class CopyState : uint8_t { None, Claimed, Launched, Done };

struct Consumer {  // a stream told to wait for a request's copies
    ze_event_pool_handle_t pool = nullptr;
    ze_event_handle_t passed = nullptr;  // signalled by that stream once past its wait
};

struct Request {
    bool remap = false;
    bool defer = false;
    xmc_stream *stream = nullptr;
    int32_t device = 0;  // the stream's device, and (remap) every slot's
    std::vector<std::shared_ptr<Slot>> slots;
    std::vector<const void *> srcs;
    std::vector<CopyState> copies;          // per slot
    ze_event_pool_handle_t pool = nullptr;  // remap: the copies' events, in the device's context
    std::vector<ze_event_handle_t> events;  // per slot: its copy finished, or will never run
    std::vector<Consumer> consumers;
    bool consumer_unknown = false;  // a wait whose `passed` could not be appended: events kept until close
    bool fired = false;
    bool done = false;
    bool adopted = false;
    xmc_status status = XMC_OK;
    int64_t native = 0;
    std::string what;
    uint32_t copies_launched = 0;
    uint32_t copies_done = 0;
};

struct InFlight {  // a copy the completion thread watches
    std::shared_ptr<Request> r;
    size_t index;
};

} // namespace

struct Vmm {
    unsigned workers = 4;
    std::mutex mu;
    std::condition_variable cv;  // every change of a slot or request is announced here
    std::map<xmc_slot *, std::shared_ptr<Slot>> slots;
    std::map<xmc_request *, std::shared_ptr<Request>> requests;
    std::deque<std::shared_ptr<Request>> jobs;  // fired, not yet run
    std::vector<InFlight> in_flight;
    std::vector<std::shared_ptr<Request>> retired;  // destroyed; their events not yet
    std::vector<std::thread> threads;
    bool stop = false;
};

std::shared_ptr<Vmm> vmm_create() { return std::make_shared<Vmm>(); }

// Slot and request handles: numbers from one process-wide counter, never
// reused, so a stale handle or another instance's is refused.
static std::atomic<uint64_t> g_next_handle{1};

bool vmm_option(Instance *in, const std::string &key, const std::string &value, xmc_status *st) {
    if (key != "vmm_workers") return false;
    char *end = nullptr;
    const unsigned long v = std::strtoul(value.c_str(), &end, 10);
    const bool ok = !value.empty() && value[0] >= '0' && value[0] <= '9' && *end == 0 && v >= 1 && v <= 64;
    *st = ok ? XMC_OK : XMC_ERR_INVALID_ARGUMENT;
    if (ok) in->vmm->workers = static_cast<unsigned>(v);
    return true;
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
    const ze_result_t r = d.zeVirtualMemMap(s.ctx, reinterpret_cast<void *>(s.addr), s.size, h, 0,
                                            ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE);
    if (r != ZE_RESULT_SUCCESS) {
        if (d.zePhysicalMemDestroy(s.ctx, h) != ZE_RESULT_SUCCESS) s.stray.push_back(h);
        return r;
    }
    s.phys = h;
    return ZE_RESULT_SUCCESS;
}

// Unmapped, then destroyed: the memory returns to the device. A failed unmap
// leaves the slot mapped; after a failed destroy the same memory is mapped
// back (its bytes intact), so a failed release leaves the slot as it was
// (the model's rule). Only if that fails too is the slot left unmapped, its
// memory kept for close.
ze_result_t unmap_backing(Slot &s) {
    Driver &d = Driver::get();
    void *p = reinterpret_cast<void *>(s.addr);
    if (ze_result_t r = d.zeVirtualMemUnmap(s.ctx, p, s.size); r != ZE_RESULT_SUCCESS) return r;
    const ze_result_t r = d.zePhysicalMemDestroy(s.ctx, s.phys);
    if (r != ZE_RESULT_SUCCESS &&
        d.zeVirtualMemMap(s.ctx, p, s.size, s.phys, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE) == ZE_RESULT_SUCCESS)
        return r;
    if (r != ZE_RESULT_SUCCESS) s.stray.push_back(s.phys);
    s.phys = nullptr;
    return r;
}

void record(Request &r, xmc_status st, int64_t native, const std::string &what) {
    if (r.status != XMC_OK) return;  // the first failure is the request's
    r.status = st;
    r.native = native;
    r.what = what;
}

void record(Request &r, ze_result_t res, const std::string &what) {
    record(r, status_of(res) == XMC_OK ? XMC_ERR_DRIVER : status_of(res), res,
           what + " failed with " + result_name(res));
}

// ---- workers ------------------------------------------------------------------

// A remap waits for its slots' releases; a release for the copies into them.
bool ready(const Request &r) {
    for (const auto &s : r.slots)
        if (r.remap ? s->release_queued : s->copies > 0) return false;
    return true;
}

// Appends the reload copy of slot i of r to `st`, signalling its event.
// Caller holds v.mu and is no callback thread.
ze_result_t issue_copy(Vmm &v, const std::shared_ptr<Request> &r, size_t i, Stream &st) {
    Driver &d = Driver::get();
    Slot &s = *r->slots[i];
    ze_result_t res = ZE_RESULT_SUCCESS;
    {
        std::lock_guard<std::mutex> lock(st.append_mu);
        res = d.zeCommandListAppendMemoryCopy(st.list, reinterpret_cast<void *>(s.addr), r->srcs[i], s.size,
                                              r->events[i], 0, nullptr);
    }
    if (res != ZE_RESULT_SUCCESS) {
        d.zeEventHostSignal(r->events[i]);  // it will never run: nobody may wait for it
        record(*r, res, "zeCommandListAppendMemoryCopy of a slot's reload copy");
        return res;
    }
    r->copies[i] = CopyState::Launched;
    ++r->copies_launched;
    ++s.copies;
    v.in_flight.push_back({r, i});
    v.cv.notify_all();
    return ZE_RESULT_SUCCESS;
}

void run_release(Request &r) {
    for (const auto &s : r.slots) {
        if (ze_result_t res = unmap_backing(*s); res != ZE_RESULT_SUCCESS) {
            record(r, res, "zeVirtualMemUnmap/zePhysicalMemDestroy of a slot");
            s->release_status = r.status;
            s->release_native = res;
        }
        s->release_queued = false;
        --s->jobs;
        if (s->state == SlotState::ReleasePending && s->pending == &r) {
            s->state = s->phys ? SlotState::Mapped : SlotState::Released;
            s->pending = nullptr;
        }
    }
}

void run_remap(xmc_instance *inst, Vmm &v, const std::shared_ptr<Request> &r) {
    Driver &d = Driver::get();
    size_t mapped = 0;
    for (const auto &s : r->slots) {
        if (s->phys) {  // its release failed: the slot was never unmapped
            record(*r, s->release_status, s->release_native,
                   "the release this remap waited for failed; the slot still holds its old mapping");
            break;
        }
        if (ze_result_t res = map_backing(*s); res != ZE_RESULT_SUCCESS) {
            record(*r, res, "zePhysicalMemCreate/zeVirtualMemMap of a slot");
            break;
        }
        ++mapped;
    }
    if (r->status != XMC_OK) {
        // Roll back every mapping this request made: none was adopted.
        for (size_t i = 0; i < mapped; ++i) unmap_backing(*r->slots[i]);
        for (const auto &s : r->slots)
            if (s->state == SlotState::RemapPending && s->pending == r.get()) {
                s->state = s->phys ? SlotState::Mapped : SlotState::Released;
                s->pending = nullptr;
                s->mapped_by = nullptr;
            }
        for (ze_event_handle_t ev : r->events) d.zeEventHostSignal(ev);  // no copy will: consumers go on
    } else if (!r->defer) {
        std::shared_ptr<Stream> st = find_stream(inst, r->stream);
        for (size_t i = 0; i < r->slots.size(); ++i) {
            if (st) {
                issue_copy(v, r, i, *st);
                continue;
            }
            d.zeEventHostSignal(r->events[i]);
            record(*r, XMC_ERR_INVALID_HANDLE, 0, "the request's stream was destroyed before its copies were issued");
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
    std::unique_lock<std::mutex> lock(v->mu);
    for (;;) {
        auto it = std::find_if(v->jobs.begin(), v->jobs.end(), [](const auto &j) { return ready(*j); });
        if (it == v->jobs.end()) {
            if (v->stop && v->jobs.empty()) return;
            v->cv.wait(lock);
            continue;
        }
        std::shared_ptr<Request> r = *it;
        v->jobs.erase(it);
        run(inst, *v, r);
    }
}

void finish_copy(Vmm &v, InFlight &f, ze_result_t res) {
    Request &r = *f.r;
    if (res != ZE_RESULT_SUCCESS) record(r, res, "the reload copy of a slot");
    r.copies[f.index] = CopyState::Done;
    ++r.copies_done;
    --r.slots[f.index]->copies;
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

std::shared_ptr<Slot> find_slot(Vmm &v, xmc_slot *h) {
    auto it = v.slots.find(h);
    return it == v.slots.end() ? nullptr : it->second;
}

std::shared_ptr<Request> find_request(Vmm &v, xmc_request *h) {
    auto it = v.requests.find(h);
    return it == v.requests.end() ? nullptr : it->second;
}

xmc_status bad_request(xmc_instance *inst, const char *call, xmc_request *h) {
    return be::fail(inst, XMC_ERR_INVALID_HANDLE, 0, call, "%s: %p is not a live request of this instance", call,
                    static_cast<void *>(h));
}

xmc_status bad_stream(xmc_instance *inst, const char *call, xmc_stream *h) {
    return be::fail(inst, XMC_ERR_INVALID_HANDLE, 0, call, "%s: %p is not a live stream of this instance", call,
                    static_cast<void *>(h));
}

xmc_status check_source(xmc_instance *inst, const char *call, size_t i, const void *src, size_t bytes,
                        const Slot &s) {
    if (!src) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: source %zu is NULL", call, i);
    if (bytes < s.size)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call,
                        "%s: source %zu has %zu bytes, fewer than the slot's %zu", call, i, bytes, s.size);
    xmc_pin_info q{};
    be::PinRegistry::process().query(inst, src, bytes, &q);
    if (!q.pinned || q.base != src)
        return be::fail(inst, XMC_ERR_NOT_PINNED_BASE, 0, call,
                        "%s: source %zu (%p, %zu bytes) is not the base of a pinned block holding it", call, i, src,
                        bytes);
    return XMC_OK;
}

// Every refusal before any change, in the model's order (arguments, handles,
// duplicates, sources, states), then the stream, the copies' events and the
// stream point.
xmc_status submit(xmc_instance *inst, const char *call, bool remap, xmc_slot *const *handles, size_t n,
                  xmc_stream *stream, const void *const *srcs, const size_t *src_bytes, uint32_t flags,
                  xmc_request **out) {
    if (xmc_status st = require(inst, call, Driver::get().missing_vmm); st != XMC_OK) return st;
    if (!out || !handles || n == 0 || (remap && (!srcs || !src_bytes)))
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: NULL argument or empty batch", call);
    if (flags & ~XMC_REMAP_DEFER_COPY)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: unknown flags %#x", call, flags);
    Vmm &v = vmm_of(inst);
    std::lock_guard<std::mutex> lock(v.mu);
    auto r = std::make_shared<Request>();
    r->remap = remap;
    r->defer = flags & XMC_REMAP_DEFER_COPY;
    r->stream = stream;
    for (size_t i = 0; i < n; ++i) {
        std::shared_ptr<Slot> s = find_slot(v, handles[i]);
        if (!s)
            return be::fail(inst, XMC_ERR_INVALID_HANDLE, 0, call, "%s: slot %zu (%p) is not a live slot", call, i,
                            static_cast<void *>(handles[i]));
        r->slots.push_back(s);
    }
    std::set<Slot *> seen;
    for (size_t i = 0; i < n; ++i)
        if (!seen.insert(r->slots[i].get()).second)
            return be::fail(inst, XMC_ERR_DUPLICATE_IN_BATCH, 0, call, "%s: slot %p is named twice", call,
                            static_cast<void *>(handles[i]));
    if (remap)
        for (size_t i = 0; i < n; ++i)
            if (xmc_status st = check_source(inst, call, i, srcs[i], src_bytes[i], *r->slots[i]); st != XMC_OK)
                return st;
    for (size_t i = 0; i < n; ++i) {
        const SlotState st = r->slots[i]->state;
        if (!remap && st != SlotState::Mapped)
            return be::fail(inst, XMC_ERR_BUSY, 0, call,
                            "%s: slot %zu is not mapped, or has a release or remap pending", call, i);
        if (remap && st != SlotState::ReleasePending && st != SlotState::Released)
            return be::fail(inst, XMC_ERR_BUSY, 0, call,
                            "%s: slot %zu is neither released nor releasing (mapped, or a remap is pending)", call, i);
    }
    std::shared_ptr<Stream> st = find_stream(inst, stream);
    if (!st) return bad_stream(inst, call, stream);
    r->device = st->device;
    if (remap) {
        // The copies run on the stream and signal events of its context:
        // every slot must be of the stream's device.
        for (size_t i = 0; i < n; ++i)
            if (r->slots[i]->device != st->device)
                return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call,
                                "%s: slot %zu is of device %d, the stream of device %d", call, i,
                                r->slots[i]->device, st->device);
        r->srcs.assign(srcs, srcs + n);
        r->copies.assign(n, CopyState::None);
        r->events.assign(n, nullptr);
        if (ze_result_t res = make_events(st->ctx, static_cast<uint32_t>(n), &r->pool, r->events.data());
            res != ZE_RESULT_SUCCESS)
            return driver_fail(inst, res, call, "zeEventPoolCreate/zeEventCreate");
    }
    auto *pt = new (std::nothrow) Point{static_cast<Instance *>(inst)->vmm, r};
    xmc_status enq = pt ? enqueue_callback(inst, *st, on_stream_point, pt, call)
                        : be::fail(inst, XMC_ERR_OUT_OF_MEMORY, 0, call, "%s: out of host memory", call);
    if (enq != XMC_OK) {
        delete pt;  // never to run: nothing changed
        destroy_events(&r->pool, r->events.data(), static_cast<uint32_t>(r->events.size()));
        return enq;
    }
    for (const auto &s : r->slots) {
        s->state = remap ? SlotState::RemapPending : SlotState::ReleasePending;
        s->pending = r.get();
        s->mapped_by = remap ? r.get() : nullptr;
        if (!remap) s->release_queued = true;
        ++s->jobs;
    }
    auto *h = reinterpret_cast<xmc_request *>(g_next_handle++);
    v.requests[h] = r;
    *out = h;
    return XMC_OK;
}

// Unmaps and frees a slot once no work on it is in flight (VMM-CLOSE).
ze_result_t close_slot(Vmm &v, std::unique_lock<std::mutex> &lock, Slot &s, const char **what) {
    v.cv.wait(lock, [&] { return s.jobs == 0 && s.copies == 0; });
    Driver &d = Driver::get();
    ze_result_t first = ZE_RESULT_SUCCESS;
    auto note = [&](ze_result_t r, const char *call) {
        if (r != ZE_RESULT_SUCCESS && first == ZE_RESULT_SUCCESS) {
            first = r;
            *what = call;
        }
    };
    if (s.phys) note(unmap_backing(s), "zeVirtualMemUnmap/zePhysicalMemDestroy");
    for (ze_physical_mem_handle_t h : s.stray) note(d.zePhysicalMemDestroy(s.ctx, h), "zePhysicalMemDestroy");
    s.stray.clear();
    note(d.zeVirtualMemFree(s.ctx, reinterpret_cast<void *>(s.addr), s.size), "zeVirtualMemFree");
    s.closed = true;
    v.cv.notify_all();
    return first;
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
    auto *h = reinterpret_cast<xmc_slot *>(g_next_handle++);
    v.slots[h] = s;
    *out = h;
    *info = xmc_slot_info{p, s->size, device};
    return XMC_OK;
}

xmc_status slot_release(xmc_instance *inst, xmc_slot *slot, xmc_stream *s, xmc_request **out) {
    return submit(inst, "slot_release", false, &slot, 1, s, nullptr, nullptr, 0, out);
}

xmc_status slot_remap(xmc_instance *inst, xmc_slot *slot, xmc_stream *s, const void *host_src, size_t src_bytes,
                      uint32_t flags, xmc_request **out) {
    return submit(inst, "slot_remap", true, &slot, 1, s, &host_src, &src_bytes, flags, out);
}

xmc_status slot_release_batch(xmc_instance *inst, xmc_slot *const *slots, size_t n, xmc_stream *s,
                              xmc_request **out) {
    return submit(inst, "slot_release_batch", false, slots, n, s, nullptr, nullptr, 0, out);
}

xmc_status slot_remap_batch(xmc_instance *inst, xmc_slot *const *slots, size_t n, xmc_stream *s,
                            const void *const *host_srcs, const size_t *src_bytes, uint32_t flags,
                            xmc_request **out) {
    return submit(inst, "slot_remap_batch", true, slots, n, s, host_srcs, src_bytes, flags, out);
}

xmc_status request_launch_copy(xmc_instance *inst, xmc_request *h, uint32_t index, xmc_stream *sh) {
    const char *call = "request_launch_copy";
    Vmm &v = vmm_of(inst);
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r = find_request(v, h);
    if (!r) return bad_request(inst, call, h);
    if (!r->remap || !r->defer || index >= r->slots.size())
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call,
                        "%s: needs a deferred-copy remap request and a slot index below %zu (got %u)", call,
                        r->slots.size(), index);
    std::shared_ptr<Stream> st = find_stream(inst, sh);
    if (!st) return bad_stream(inst, call, sh);
    if (st->device != r->device)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: a stream of device %d for a slot of device %d",
                        call, st->device, r->device);
    // Once per slot (VMM-DEFERRED); claimed before waiting, so a concurrent
    // second launch is refused too.
    if (r->copies[index] != CopyState::None)
        return be::fail(inst, XMC_ERR_BUSY, 0, call, "%s: the copy of slot %u was already launched", call, index);
    r->copies[index] = CopyState::Claimed;
    v.cv.wait(lock, [&] { return r->done; });  // a launch waits for the remap itself
    r->copies[index] = CopyState::None;
    const Slot &sl = *r->slots[index];
    if (r->status != XMC_OK)
        return be::fail(inst, XMC_ERR_BUSY, r->native, call, "%s: the remap failed (%s): nothing to copy into", call,
                        r->what.c_str());
    const bool holds =
        !sl.closed && sl.mapped_by == r.get() &&
        (sl.state == SlotState::Mapped || (sl.state == SlotState::RemapPending && sl.pending == r.get()));
    if (!holds)
        return be::fail(inst, XMC_ERR_BUSY, 0, call,
                        "%s: slot %u no longer holds this request's mapping (closed, or released since)", call, index);
    if (ze_result_t res = issue_copy(v, r, index, *st); res != ZE_RESULT_SUCCESS)
        return driver_fail(inst, res, call, "zeCommandListAppendMemoryCopy");
    return XMC_OK;
}

xmc_status request_wait(xmc_instance *inst, xmc_request *h, uint32_t timeout_ms) {
    Vmm &v = vmm_of(inst);
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r = find_request(v, h);
    if (!r) return bad_request(inst, "request_wait", h);
    if (!v.cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                       [&] { return r->done && r->copies_done == r->copies_launched; }))
        return be::fail(inst, XMC_ERR_TIMEOUT, 0, "request_wait", "request_wait: not finished after %u ms (%s)",
                        timeout_ms, r->fired ? "a worker has it" : "its stream has not reached it");
    if (r->status != XMC_OK)
        return be::fail(inst, r->status, r->native, "request_wait", "request_wait: %s", r->what.c_str());
    return XMC_OK;
}

xmc_status request_adopt(xmc_instance *inst, xmc_request *h) {
    const char *call = "request_adopt";
    Vmm &v = vmm_of(inst);
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r = find_request(v, h);
    if (!r) return bad_request(inst, call, h);
    if (!r->remap) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: a release request maps nothing", call);
    v.cv.wait(lock, [&] { return r->done; });
    if (r->adopted) return be::fail(inst, XMC_ERR_BUSY, 0, call, "%s: already adopted", call);
    if (r->status != XMC_OK)
        return be::fail(inst, XMC_ERR_BUSY, r->native, call, "%s: the remap failed (%s): nothing to adopt", call,
                        r->what.c_str());
    for (const auto &s : r->slots)
        if (!s->closed && s->state == SlotState::RemapPending && s->pending == r.get()) {
            s->state = SlotState::Mapped;  // the slot's own now (VMM-ADOPT)
            s->pending = nullptr;
        }
    r->adopted = true;
    return XMC_OK;
}

xmc_status request_query(xmc_instance *inst, xmc_request *h, xmc_request_info *out) {
    if (!out) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "request_query", "request_query: NULL result");
    Vmm &v = vmm_of(inst);
    std::lock_guard<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r = find_request(v, h);
    if (!r) return bad_request(inst, "request_query", h);
    *out = xmc_request_info{};
    out->callback_fired = r->fired;
    out->done = r->done;
    out->status = r->status;
    out->native_code = r->native;
    out->slots = static_cast<uint32_t>(r->slots.size());
    out->copies_launched = r->copies_launched;
    out->adopted = r->adopted;
    return XMC_OK;
}

xmc_status request_stream_wait(xmc_instance *inst, xmc_request *h, xmc_stream *sh) {
    const char *call = "request_stream_wait";
    Vmm &v = vmm_of(inst);
    std::lock_guard<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r = find_request(v, h);
    if (!r) return bad_request(inst, call, h);
    if (!r->remap)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: a release request has no copies", call);
    std::shared_ptr<Stream> st = find_stream(inst, sh);
    if (!st) return bad_stream(inst, call, sh);
    if (st->device != r->device)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call,
                        "%s: a stream of device %d for copies on device %d", call, st->device, r->device);
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
    std::shared_ptr<Request> r = find_request(v, h);
    if (!r) return bad_request(inst, "request_destroy", h);
    v.requests.erase(h);
    v.cv.wait(lock, [&] { return r->done && r->copies_done == r->copies_launched; });
    if (r->remap && !r->adopted && r->status == XMC_OK)
        for (const auto &s : r->slots)
            if (!s->closed && s->state == SlotState::RemapPending && s->pending == r.get()) {
                // Never adopted: the request's mapping goes with it.
                unmap_backing(*s);
                s->state = s->phys ? SlotState::Mapped : SlotState::Released;
                s->pending = nullptr;
                s->mapped_by = nullptr;
            }
    if (r->remap) v.retired.push_back(r);
    reap(v, false);  // a failure here is retried later, at the latest by close
    v.cv.notify_all();
    return XMC_OK;
}

xmc_status slot_close(xmc_instance *inst, xmc_slot *h) {
    Vmm &v = vmm_of(inst);
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<Slot> s = find_slot(v, h);
    if (!s)
        return be::fail(inst, XMC_ERR_INVALID_HANDLE, 0, "slot_close", "slot_close: %p is not a live slot",
                        static_cast<void *>(h));
    v.slots.erase(h);
    const char *what = "";
    if (ze_result_t r = close_slot(v, lock, *s, &what); r != ZE_RESULT_SUCCESS)
        return be::fail(inst, status_of(r), r, "slot_close",
                        "slot_close: %s failed with %s (0x%x); the slot is closed, the driver kept that memory", what,
                        result_name(r), static_cast<unsigned>(r));
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

void vmm_close(Instance *in) {
    Vmm &v = *in->vmm;
    std::unique_lock<std::mutex> lock(v.mu);
    while (!v.slots.empty()) {
        std::shared_ptr<Slot> s = v.slots.begin()->second;
        v.slots.erase(v.slots.begin());
        const char *what = "";
        close_slot(v, lock, *s, &what);  // close has no slot to report on; the driver keeps what it refused
    }
    // Every request has run (each slot's close waited for them): the ones
    // left go once the streams are gone (vmm_release_events).
    for (auto &[h, r] : v.requests)
        if (r->remap) v.retired.push_back(r);
    v.requests.clear();
    v.stop = true;
    v.cv.notify_all();
    lock.unlock();
    for (auto &t : v.threads) t.join();
    v.threads.clear();
}

ze_result_t vmm_release_events(Instance *in) {
    Vmm &v = *in->vmm;
    std::lock_guard<std::mutex> lock(v.mu);
    return reap(v, true);
}

} // namespace xmc::ze
