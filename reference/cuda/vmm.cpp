// Fixed-address slots through the driver (capability `vmm`, VMM-*), after
// reference/model/slot_model.hpp and in the shape of reference/host/vmm.cpp.
// A slot is a range from cuMemAddressReserve, aligned to and rounded up to
// cuMemGetAllocationGranularity; its physical memory comes from cuMemCreate,
// mapped with cuMemMap and opened with cuMemSetAccess. Release is cuMemUnmap
// and cuMemRelease; remap maps a fresh allocation at the same address
// (VMM-STABLE) and copies from a pinned host source with cuMemcpyHtoDAsync
// on the request's stream (VMM-REMAP-COPY).
//
// Order, without host functions. The real driver runs the host functions of
// all streams one at a time on one thread (measured on H200, driver 580), so
// a design that holds a stream in a host function holds every other stream's
// host functions too. Here nothing runs on a callback thread (VMM-CALLBACK):
// - A request's place on its stream is an event recorded there at submit. A
//   watcher thread (a plain thread: driver calls are allowed) polls the
//   events of every pending point and copy with cuEventQuery, backing off
//   from 2 us to 100 us while nothing finishes, and hands a reached point to
//   the workers (VMM-RELEASE-ORDER). Polling, not cuEventSynchronize: a point
//   held on one stream must not delay noticing the others.
// - A worker runs only requests whose dependencies are met (a remap after its
//   slots' releases, a release after the copies into its slots), so one
//   worker is enough (VMM-SERIAL). After a remap maps, the worker issues the
//   reload copy and records its event; the watcher sees it finish.
// - A consumer told to wait for copies already issued waits on their events.
//   For a copy not issued yet it waits GPU-side: cuStreamWaitValue32 on a
//   word in registered (device-mapped) host memory, which the backend stores
//   to from the CPU once the copy has finished or will never run
//   (VMM-EVENT-WAIT). Word values only grow, so a stream still waiting on an
//   old value of a reused word is never held by the new one.
// Speed (VMM-SPEED): a caller waiting for a request polls the request's own
// copy events itself, as the driver's synchronize spins, rather than waiting
// for the watcher (whose backoff reaches 100 us) to notice them and wake it;
// the events of stream points and copies are reused, not made per request.
// With XMC_CUDA_SLOT_PHASES=FILE each instance writes, at close, one line per
// request: when its stream point was seen, a worker took it, its driver calls
// were done, its copies enqueued and seen done (hardware/gpu_bench.cpp reads it).
#include "cuda.hpp"
#include "slot_book.hpp"

#include <sys/mman.h>
#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace xmc::cuda {

namespace {

using be::CopyState;

struct Request;

struct Slot : be::SlotBase<Request> {
    CUdeviceptr addr = 0;
    int32_t device = 0;
    CUcontext ctx = nullptr;
    CUmemGenericAllocationHandle handle = 0;  // the allocation mapped now, or 0 while released
    std::vector<CUmemGenericAllocationHandle> stray;  // unmapped, but the driver kept it: released at close
};

using Clock = std::chrono::steady_clock;

struct Request : be::RequestBase<Slot> {
    std::vector<CUevent> events;    // per slot: recorded after its copy, until the copy is seen done
    std::vector<int> words;         // per slot: the word a consumer waits on for it (-1: none)
    std::vector<uint32_t> targets;  // per slot: the value that word gets once the copy is settled
    // VMM-SPEED, XMC_CUDA_SLOT_PHASES: when each step happened (zero: not yet).
    Clock::time_point t_submit, t_point, t_picked, t_driver, t_enqueued, t_copied;
    size_t bytes = 0;               // of its slots together
};

struct Watched {  // an event the watcher polls: a request's stream point, or a copy's end
    CUevent ev;
    CUcontext ctx;
    std::shared_ptr<Request> r;
    bool point;    // true: r's stream point; false: the copy into slot `index`
    size_t index;
};

struct PassEvent {  // recorded after a consumer's value waits: the stream has passed them
    CUevent ev;
    CUcontext ctx;
};

constexpr size_t kWordBytes = 64 << 10;  // one registered block of wait words
constexpr int kWords = static_cast<int>(kWordBytes / sizeof(uint32_t));

} // namespace

// Slots, requests and threads: the shared book (slot_book.hpp), the
// watcher's events and the wait words.
struct Vmm : be::SlotBook<Slot, Request> {
    std::vector<Watched> watched;
    bool watch_fresh = false;  // something was added to `watched`: poll it now
    // Wait words (VMM-EVENT-WAIT): host memory registered with the driver,
    // made on first need and unregistered at close.
    uint32_t *words = nullptr;
    CUdeviceptr words_dev = 0;
    CUcontext words_ctx = nullptr;
    std::vector<int> free_words;
    std::vector<PassEvent> passes;
    std::vector<PassEvent> spare_events;  // VMM-SPEED: done with, for the next point or copy
    std::string phases_file;              // XMC_CUDA_SLOT_PHASES: where close writes `phases`
    std::vector<std::string> phases;
};

std::shared_ptr<Vmm> vmm_create() {
    auto v = std::make_shared<Vmm>();
    if (const char *f = std::getenv("XMC_CUDA_SLOT_PHASES")) v->phases_file = f;
    return v;
}

bool vmm_option(Instance *in, const std::string &key, const std::string &value, xmc_status *st) {
    return be::workers_option(key, value, &in->vmm->workers, st);
}

namespace {

Vmm &vmm_of(xmc_instance *inst) { return *static_cast<Instance *>(inst)->vmm; }

CUmemAllocationProp device_prop(int32_t device) {
    CUmemAllocationProp p;
    std::memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    const Device &d = Driver::get().devices[static_cast<size_t>(device)];
    p.location.id = d.dev;
    // Exportable as a POSIX fd where the device can: a transfer whose source is a slot shares it
    // with a peer process by that fd (path IPC), as slots have no legacy IPC handle.
    if (d.posix_fd) p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return p;
}

// ---- events, reused (VMM-SPEED) -------------------------------------------------

// An event of context ctx for a stream point or a copy: a spare one, or new.
CUresult take_event(Vmm &v, CUcontext ctx, CUevent *ev) {
    for (size_t k = v.spare_events.size(); k-- > 0;)
        if (v.spare_events[k].ctx == ctx) {
            *ev = v.spare_events[k].ev;
            v.spare_events.erase(v.spare_events.begin() + static_cast<long>(k));
            return CUDA_SUCCESS;
        }
    return Driver::get().cuEventCreate(ev, CU_EVENT_DISABLE_TIMING);
}

// An event seen complete: kept for the next one (a few), else destroyed. Its
// context is current.
void give_event(Vmm &v, CUcontext ctx, CUevent ev) {
    constexpr size_t kSpares = 16;
    if (v.spare_events.size() < kSpares) v.spare_events.push_back({ev, ctx});
    else Driver::get().cuEventDestroy(ev);
}

// XMC_CUDA_SLOT_PHASES: r is finished; its steps, in microseconds after its submit.
void note_phases(Vmm &v, const Request &r) {
    if (v.phases_file.empty()) return;
    auto us = [&](Clock::time_point t) {
        return t == Clock::time_point{} ? -1.0 : std::chrono::duration<double, std::micro>(t - r.t_submit).count();
    };
    char line[200];
    std::snprintf(line, sizeof line, "%s %zu %zu %.1f %.1f %.1f %.1f %.1f", r.remap ? "remap" : "release",
                  r.slots.size(), r.bytes, us(r.t_point), us(r.t_picked), us(r.t_driver), us(r.t_enqueued),
                  us(r.t_copied));
    v.phases.emplace_back(line);
}

// ---- physical memory of a slot ---------------------------------------------

// Allocation h mapped at the slot's address, readable and writable by its device; on a
// failure nothing stays mapped. The slot's context is current.
CUresult map_at(Slot &s, CUmemGenericAllocationHandle h) {
    Driver &d = Driver::get();
    // VMM-STABLE: mapped at the slot's own reserved address, every time.
    CUresult r = d.cuMemMap(s.addr, s.size, 0, h, 0);
    if (r != CUDA_SUCCESS) return r;
    CUmemAccessDesc access;
    std::memset(&access, 0, sizeof access);
    access.location = device_prop(s.device).location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    // VMM-CREATE: access granted to the slot's device, read/write.
    r = d.cuMemSetAccess(s.addr, s.size, &access, 1);
    if (r != CUDA_SUCCESS) d.cuMemUnmap(s.addr, s.size);
    return r;
}

// Fresh memory at the slot's address, readable and writable by its device.
CUresult map_backing(Slot &s) {
    Driver &d = Driver::get();
    CtxScope scope(d, s.ctx);
    if (scope.result() != CUDA_SUCCESS) return scope.result();
    const CUmemAllocationProp prop = device_prop(s.device);
    CUmemGenericAllocationHandle h = 0;
    if (CUresult r = d.cuMemCreate(&h, s.size, &prop, 0); r != CUDA_SUCCESS) return r;
    if (CUresult r = map_at(s, h); r != CUDA_SUCCESS) {
        if (d.cuMemRelease(h) != CUDA_SUCCESS) s.stray.push_back(h);
        return r;
    }
    s.handle = h;
    return CUDA_SUCCESS;
}

// Unmapped, then released: the memory returns to the device with its last mapping.
// VMM-ASYNC-ERROR: a failed release leaves the slot as it was. A failed unmap leaves it mapped;
// after a failed cuMemRelease the same memory is mapped back, its bytes intact (dropping the
// handle there leaked the allocation and left the slot unmapped under a failed request, which
// the fault sweep caught). Only if that fails too is the slot left unmapped, the allocation kept
// for close.
CUresult unmap_backing(Slot &s) {
    Driver &d = Driver::get();
    CtxScope scope(d, s.ctx);
    if (scope.result() != CUDA_SUCCESS) return scope.result();
    // VMM-UNMAPPED-FAULTS: the range stays reserved, unmapped: an access faults;
    // VMM-RELEASE-ORDER: released, the memory goes back to the device.
    if (CUresult r = d.cuMemUnmap(s.addr, s.size); r != CUDA_SUCCESS) return r;
    const CUresult r = d.cuMemRelease(s.handle);
    if (r != CUDA_SUCCESS && map_at(s, s.handle) == CUDA_SUCCESS) return r;
    if (r != CUDA_SUCCESS) s.stray.push_back(s.handle);
    s.handle = 0;
    return r;
}

// What the driver kept of a slot's earlier allocations (released at close). The slot's context
// is current.
CUresult release_strays(Slot &s) {
    while (!s.stray.empty()) {
        if (CUresult r = Driver::get().cuMemRelease(s.stray.back()); r != CUDA_SUCCESS) return r;
        s.stray.pop_back();
    }
    return CUDA_SUCCESS;
}

void record(Request &r, CUresult res, const std::string &what) {
    if (r.status != XMC_OK) return;  // the first failure is the request's
    r.record(status_of(res) == XMC_OK ? XMC_ERR_DRIVER : status_of(res), res,
             what + " failed with " + Driver::get().result_name(res));
}

// ... at slot `index` of the request (VMM-BATCH-PARTIAL).
void record(Request &r, CUresult res, const std::string &what, size_t index) {
    record(r, res, what + be::batch_index(index));
}

// ---- workers ------------------------------------------------------------------

xmc_status start_copy(xmc_instance *inst, Vmm &v, const std::shared_ptr<Request> &r, size_t i, xmc_stream *stream,
                      const char *call);

void run_release(Request &r) {
    const bool point_failed = r.status != XMC_OK;
    for (size_t i = 0; i < r.slots.size(); ++i) {
        const auto &s = r.slots[i];
        if (point_failed) {
            // VMM-ASYNC-ERROR: its stream point failed: nothing is unmapped, the slot stays mapped
            // (it unmapped under a failed request before: the fault sweep caught it).
            s->release_status = r.status;
            s->release_native = r.native;
            be::release_ran(*s, r, true);
            continue;
        }
        if (CUresult res = unmap_backing(*s); res != CUDA_SUCCESS) {
            // VMM-ASYNC-ERROR: the driver's code is the request's; slot stays mapped.
            record(r, res, "cuMemUnmap/cuMemRelease of a slot", i);
            s->release_status = r.status;
            s->release_native = res;
        }
        be::release_ran(*s, r, s->handle != 0);
    }
    r.t_driver = Clock::now();
}

void run_remap(xmc_instance *inst, Vmm &v, const std::shared_ptr<Request> &r) {
    size_t mapped = 0;
    const bool point_failed = r->status != XMC_OK;  // then nothing is mapped
    for (const auto &s : r->slots) {
        if (point_failed) break;
        // VMM-ASYNC-ERROR: a remap waiting on a failed release fails too.
        if (s->handle) {  // its release failed: the slot was never unmapped
            r->record(s->release_status, s->release_native,
                      "the release this remap waited for failed; the slot still holds its old mapping" +
                          be::batch_index(mapped));
            break;
        }
        if (CUresult res = map_backing(*s); res != CUDA_SUCCESS) {
            record(*r, res, "cuMemCreate/cuMemMap/cuMemSetAccess of a slot", mapped);
            break;
        }
        ++mapped;
    }
    r->t_driver = Clock::now();
    if (r->status != XMC_OK) {
        // VMM-ASYNC-ERROR: slots back to what the model says (slot_book.hpp).
        // Roll back every mapping this request made: none was adopted.
        for (size_t i = 0; i < mapped; ++i) unmap_backing(*r->slots[i]);
        be::remap_failed(*r, [](const Slot &s) { return s.handle != 0; });
    } else if (!r->defer) {
        for (size_t i = 0; i < r->slots.size(); ++i) start_copy(inst, v, r, i, r->stream, "slot_remap");
        r->t_enqueued = Clock::now();
    }
    for (const auto &s : r->slots) --s->jobs;
}

// Stores each of r's wait words whose copy has finished or will never run
// (the remap is done and the copy was not issued), releasing the consumers
// waiting on it GPU-side, and returns the word to the free list.
void settle_words(Vmm &v, Request &r) {
    for (size_t i = 0; i < r.words.size(); ++i) {
        if (r.words[i] < 0) continue;
        if (r.copies[i] != CopyState::Done && !(r.done && r.copies[i] == CopyState::None)) continue;
        std::atomic_ref<uint32_t>(v.words[r.words[i]]).store(r.targets[i], std::memory_order_release);
        v.free_words.push_back(r.words[i]);
        r.words[i] = -1;
    }
}

void run(xmc_instance *inst, Vmm &v, const std::shared_ptr<Request> &r) {
    r->t_picked = Clock::now();
    if (r->remap) run_remap(inst, v, r);
    else run_release(*r);
    r->done = true;
    settle_words(v, *r);
    if (r->finished()) note_phases(v, *r);  // a release, or a remap with no copy in flight
    v.cv.notify_all();
}

void worker_loop(xmc_instance *inst, Vmm *v) {
    be::work(*v, [&](const std::shared_ptr<Request> &r) { run(inst, *v, r); });
}

void finish_copy(Vmm &v, const Watched &w, CUresult res) {
    Request &r = *w.r;
    if (res != CUDA_SUCCESS) record(r, res, "the reload copy of a slot", w.index);
    r.events[w.index] = nullptr;
    r.copy_finished(w.index);
    settle_words(v, r);
    if (r.finished()) {
        r.t_copied = Clock::now();
        note_phases(v, r);
    }
    v.cv.notify_all();
}

// A request's stream point was reached: the work before it is done, so the
// request goes to the workers. (If the stream failed instead, the request
// carries the failure; a remap then maps nothing.)
void point_reached(Vmm &v, const Watched &w, CUresult res) {
    if (res != CUDA_SUCCESS) record(*w.r, res, "the stream point (cuEventQuery) of the request");
    w.r->fired = true;
    w.r->t_point = Clock::now();
    v.jobs.push_back(w.r);
    v.cv.notify_all();
}

// Queries the watched events that `pick` selects and finishes those that
// completed (the watcher: all of them; a caller waiting for a request: its
// copies). Caller holds v.mu; true if one finished.
template <class Pick>
bool poll(Vmm &v, Pick &&pick) {
    Driver &d = Driver::get();
    bool progressed = false;
    for (size_t k = 0; k < v.watched.size();) {
        if (!pick(v.watched[k])) {
            ++k;
            continue;
        }
        CUresult res;
        {
            CtxScope scope(d, v.watched[k].ctx);
            // A failed push says nothing of the event: it is polled again. (Taking it as the
            // event's failure finished a copy still running, and a release then unmapped under
            // it: the fault sweep caught the fake's illegal-address error that followed.)
            res = scope.result() == CUDA_SUCCESS ? d.cuEventQuery(v.watched[k].ev) : CUDA_ERROR_NOT_READY;
            if (res == CUDA_ERROR_NOT_READY) {
                ++k;
                continue;
            }
            if (res == CUDA_SUCCESS) {
                give_event(v, v.watched[k].ctx, v.watched[k].ev);
            } else {
                // A failed query does not say the copy has ended: wait for the event itself
                // before the slot may be released under it (a release after a failed query
                // unmapped under a running copy: the fault sweep caught the illegal address).
                if (!v.watched[k].point) d.cuEventSynchronize(v.watched[k].ev);
                d.cuEventDestroy(v.watched[k].ev);  // failed: not reused
            }
        }
        const Watched w = v.watched[k];
        v.watched.erase(v.watched.begin() + static_cast<long>(k));
        if (w.point) point_reached(v, w, res);
        else finish_copy(v, w, res);
        progressed = true;
    }
    return progressed;
}

// VMM-CALLBACK: stream points are seen here, never on a callback thread.
// Notices stream points reached and copies finished. A plain thread (driver
// calls are allowed here), polling every watched event so that none waits
// behind another; while nothing finishes it backs off from 2 us to 100 us,
// which bounds how late a finish is seen (0.5% of a 1 GiB reload).
void watch_loop(Vmm *v) {
    prctl(PR_SET_TIMERSLACK, 1UL);  // the default 50 us slack would stretch the short sleeps
    std::unique_lock<std::mutex> lock(v->mu);
    unsigned idle = 0;
    for (;;) {
        if (v->watched.empty()) {
            if (v->stop) return;
            v->cv.wait(lock);
            continue;
        }
        if (v->watch_fresh) idle = 0;
        v->watch_fresh = false;
        const bool progressed = poll(*v, [](const Watched &) { return true; });
        if (progressed) {
            idle = 0;
            continue;
        }
        v->cv.wait_for(lock, std::chrono::microseconds(std::min(100u, 2u << std::min(idle, 6u))));
        ++idle;
    }
}

void start_threads(xmc_instance *inst, Vmm &v) {
    if (!v.threads.empty()) return;
    v.stop = false;  // a close that failed after stopping them keeps the instance open
    // VMM-SERIAL: vmm_workers workers (1: serial) and the watcher.
    for (unsigned i = 0; i < v.workers; ++i) v.threads.emplace_back(worker_loop, inst, &v);
    v.threads.emplace_back(watch_loop, &v);
}

// Issues the reload copy of slot i of r on `stream`, then records its event.
// Caller holds v.mu and is no callback thread.
xmc_status start_copy(xmc_instance *inst, Vmm &v, const std::shared_ptr<Request> &r, size_t i, xmc_stream *stream,
                      const char *call) {
    Stream st;
    Slot &s = *r->slots[i];
    // A deferred launch that fails is its caller's to report, and leaves the copy to launch again
    // (VMM-ERROR-CLEAR); the worker's own launches fail their request (VMM-ASYNC-ERROR).
    const bool launch = std::strcmp(call, "request_launch_copy") == 0;
    if (!find_stream(inst, stream, &st)) {
        if (!launch) record(*r, CUDA_ERROR_INVALID_HANDLE, "finding the reload copy's stream", i);
        return be::fail(inst, XMC_ERR_INVALID_HANDLE, 0, call, "%s: %p is not a live stream of this instance", call,
                        static_cast<void *>(stream));
    }
    if (st.device != s.device)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: a stream of device %d for a slot of device %d",
                        call, st.device, s.device);
    // VMM-GRAPH-ORDER: the copy would be captured, not run, and its event never complete. A
    // deferred launch is refused, nothing changed; a worker never meets this (graph_begin
    // waits for a remap's copies, vmm_before_capture), and would fail the request.
    if (st.capture) {
        if (!launch)
            record(*r, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "issuing the reload copy onto a capturing stream", i);
        return refuse_capturing(inst, call);
    }
    Driver &d = Driver::get();
    CtxScope scope(d, s.ctx);
    CUresult res = scope.result();
    CUevent ev = nullptr;
    if (res == CUDA_SUCCESS) res = take_event(v, s.ctx, &ev);
    // VMM-REMAP-COPY: the whole slot from its checked pinned source.
    if (res == CUDA_SUCCESS) res = d.cuMemcpyHtoDAsync(s.addr, r->srcs[i], s.size, st.stream);
    const bool enqueued = res == CUDA_SUCCESS;
    if (res == CUDA_SUCCESS) res = d.cuEventRecord(ev, st.stream);
    if (res != CUDA_SUCCESS) {
        // A copy enqueued without its event is seen by nothing: it ends here, before the slot
        // can be released or closed under it (the fault sweep caught an unmap under it).
        if (enqueued) d.cuStreamSynchronize(st.stream);
        if (ev) d.cuEventDestroy(ev);
        if (!launch) record(*r, res, "issuing the reload copy", i);
        return driver_fail(inst, res, call, "cuMemcpyHtoDAsync/cuEventRecord");
    }
    r->events[i] = ev;
    r->copy_launched(i);
    v.watched.push_back({ev, s.ctx, r, false, i});
    v.watch_fresh = true;
    v.cv.notify_all();
    return XMC_OK;
}

// ---- requests -------------------------------------------------------------------

// VMM-STATE, VMM-BATCH, VMM-REMAP-COPY: the shared refusals (make_request).
// Every refusal before any change, in the model's order (arguments, handles,
// duplicates, sources, states), then the stream point.
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
    Stream st;
    if (!find_stream(inst, stream, &st))
        return be::fail(inst, XMC_ERR_INVALID_HANDLE, 0, call, "%s: %p is not a live stream of this instance", call,
                        static_cast<void *>(stream));
    // VMM-GRAPH-ORDER: the stream point (and the cuStreamQuery below, which
    // would end the capture) cannot join a capture: refused, nothing changed.
    if (st.capture) return refuse_capturing(inst, call);
    if (remap) {
        r->events.assign(n, nullptr);
        r->words.assign(n, -1);
        r->targets.assign(n, 0);
    }
    r->t_submit = Clock::now();
    for (const auto &x : r->slots) r->bytes += x->size;
    // The stream point: an event after the stream's prior work, which the
    // watcher sees complete. A stream with no work left has passed its point
    // already: the request goes to the workers at once, which saves the
    // watcher's round trip (VMM-SPEED; a queried stream that is busy, or in
    // error, takes the event path).
    Driver &d = Driver::get();
    CUevent ev = nullptr;
    bool idle = false;
    {
        CtxScope scope(d, st.ctx);
        CUresult res = scope.result();
        if (res == CUDA_SUCCESS) idle = d.cuStreamQuery(st.stream) == CUDA_SUCCESS;
        if (res == CUDA_SUCCESS && !idle) res = take_event(v, st.ctx, &ev);
        if (res == CUDA_SUCCESS && !idle) res = d.cuEventRecord(ev, st.stream);
        if (res != CUDA_SUCCESS) {
            if (ev) d.cuEventDestroy(ev);  // never recorded: nothing changed
            return driver_fail(inst, res, call, "cuEventCreate/cuEventRecord");
        }
    }
    if (idle) {
        r->fired = true;
        r->t_point = Clock::now();
        v.jobs.push_back(r);
    } else {
        v.watched.push_back({ev, st.ctx, r, true, 0});
        v.watch_fresh = true;
    }
    v.cv.notify_all();
    be::commit(v, r, out);
    // Past its stream point and ready: with workers to spare, run it here
    // rather than wake one (this is the caller's thread, never a callback;
    // VMM-SPEED). Serial mode keeps every driver call on its one worker.
    if (idle && v.workers > 1 && be::ready(*r)) {
        v.jobs.pop_back();
        run(inst, v, r);
    }
    return XMC_OK;
}

// The wait words' block: host memory registered (portable, device-mapped)
// in the first device's context, made on first need. Caller holds v.mu.
CUresult ensure_words(Vmm &v) {
    if (v.words) return CUDA_SUCCESS;
    Driver &d = Driver::get();
    CUcontext ctx = nullptr;
    if (CUresult r = d.context_for(d.devices[0].uuid, &ctx, nullptr); r != CUDA_SUCCESS) return r;
    void *p = mmap(nullptr, kWordBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    CtxScope scope(d, ctx);
    CUresult r = scope.result();
    if (r == CUDA_SUCCESS)
        r = d.cuMemHostRegister(p, kWordBytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    if (r != CUDA_SUCCESS) {
        munmap(p, kWordBytes);
        return r;
    }
    CUdeviceptr dev = 0;
    if (r = d.cuMemHostGetDevicePointer(&dev, p, 0); r != CUDA_SUCCESS) {
        d.cuMemHostUnregister(p);
        munmap(p, kWordBytes);
        return r;
    }
    v.words = static_cast<uint32_t *>(p);
    v.words_dev = dev;
    v.words_ctx = ctx;
    for (int w = kWords - 1; w >= 0; --w) v.free_words.push_back(w);
    return CUDA_SUCCESS;
}

// Drops the pass events whose streams have passed their waits.
void prune_passes(Vmm &v) {
    Driver &d = Driver::get();
    for (size_t k = 0; k < v.passes.size();) {
        CtxScope scope(d, v.passes[k].ctx);
        if (scope.result() == CUDA_SUCCESS && d.cuEventQuery(v.passes[k].ev) == CUDA_SUCCESS) {
            d.cuEventDestroy(v.passes[k].ev);
            v.passes.erase(v.passes.begin() + static_cast<long>(k));
        } else {
            ++k;
        }
    }
}

} // namespace

// ---- entry points -------------------------------------------------------------------

xmc_status slot_create(xmc_instance *inst, int32_t device, size_t bytes, xmc_slot **out, xmc_slot_info *info) {
    const char *call = "slot_create";
    Driver &d = Driver::get();
    if (xmc_status st = require(inst, call, d.missing_vmm); st != XMC_OK) return st;
    if (!out || !info) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "slot_create: NULL result");
    if (xmc_status st = check_device(inst, device, call); st != XMC_OK) return st;
    // 0, or a size that would overflow when rounded up to any granularity a
    // driver uses (up to 1 GiB), is no size.
    constexpr size_t kMaxGranularity = size_t{1} << 30;
    if (bytes == 0 || bytes > SIZE_MAX - kMaxGranularity + 1)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "slot_create: size %zu", bytes);
    auto s = std::make_shared<Slot>();
    s->device = device;
    if (CUresult r = d.context_for(d.devices[static_cast<size_t>(device)].uuid, &s->ctx, nullptr); r != CUDA_SUCCESS)
        return driver_fail(inst, r, call, "cuDevicePrimaryCtxRetain");
    CtxScope scope(d, s->ctx);
    if (scope.result() != CUDA_SUCCESS) return driver_fail(inst, scope.result(), call, "cuCtxPushCurrent");
    const CUmemAllocationProp prop = device_prop(device);
    size_t g = 0;
    if (CUresult r = d.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM); r != CUDA_SUCCESS)
        return driver_fail(inst, r, call, "cuMemGetAllocationGranularity");
    if (g == 0 || bytes > SIZE_MAX - g)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "slot_create: size %zu", bytes);
    // VMM-CREATE: rounded up to the granularity, reserved aligned to it, then mapped
    // with access granted (map_backing).
    s->size = (bytes + g - 1) / g * g;
    if (s->size > d.devices[static_cast<size_t>(device)].total)
        return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, 0, call,
                        "slot_create: %zu bytes is more than device %d has (%zu bytes)", s->size, device,
                        d.devices[static_cast<size_t>(device)].total);
    if (CUresult r = d.cuMemAddressReserve(&s->addr, s->size, g, 0, 0); r != CUDA_SUCCESS) {
        if (r == CUDA_ERROR_OUT_OF_MEMORY)
            return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, r, call,
                            "slot_create: cuMemAddressReserve of %zu bytes: out of address space", s->size);
        return driver_fail(inst, r, call, "cuMemAddressReserve");
    }
    if (CUresult r = map_backing(*s); r != CUDA_SUCCESS) {
        d.cuMemAddressFree(s->addr, s->size);
        if (r == CUDA_ERROR_OUT_OF_MEMORY)
            return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, r, call,
                            "slot_create: cuMemCreate of %zu bytes: out of device memory", s->size);
        return driver_fail(inst, r, call, "cuMemCreate/cuMemMap/cuMemSetAccess");
    }
    Vmm &v = vmm_of(inst);
    std::lock_guard<std::mutex> lock(v.mu);
    start_threads(inst, v);
    *out = be::add_slot(v, s);
    *info = xmc_slot_info{reinterpret_cast<void *>(s->addr), s->size, device};
    return XMC_OK;
}

// slot_release, slot_remap and their batches: one submit each (slot_book.hpp).
XMC_SLOT_SUBMIT_ENTRIES(submit)

xmc_status request_launch_copy(xmc_instance *inst, xmc_request *h, uint32_t index, xmc_stream *s) {
    const char *call = "request_launch_copy";
    Vmm &v = vmm_of(inst);
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r = be::find_request(v, h);
    if (!r) return be::bad_request(inst, call, h);
    // VMM-DEFERRED: once per slot, after the remap, into its own mapping.
    if (xmc_status st = be::check_launch(inst, call, *r, index); st != XMC_OK) return st;
    // A claim shows as launched: a stream told to wait meanwhile gets a wait
    // word for it (request_stream_wait).
    if (xmc_status st = be::claim_copy(inst, call, v, lock, *r, index, CopyState::Launched); st != XMC_OK) return st;
    if (xmc_status st = be::check_target(inst, call, *r, index); st != XMC_OK) {
        settle_words(v, *r);  // this copy will not run: release consumers waiting for it
        return st;
    }
    const xmc_status st = start_copy(inst, v, r, index, s, call);
    if (st != XMC_OK) settle_words(v, *r);
    else r->t_enqueued = Clock::now();
    return st;
}

xmc_status request_wait(xmc_instance *inst, xmc_request *h, uint32_t timeout_ms) {
    Vmm &v = vmm_of(inst);
    {
        // VMM-SPEED: for up to kSpin the caller polls the request's own copies
        // (this is the caller's thread: driver calls are allowed), as the raw
        // driver's synchronize spins, instead of waiting for the watcher to see
        // them and wake it; then, or once there is nothing to poll, it waits.
        constexpr auto kSpin = std::chrono::milliseconds(2);
        std::unique_lock<std::mutex> lock(v.mu);
        std::shared_ptr<Request> r = be::find_request(v, h);
        const auto until = Clock::now() + std::min<Clock::duration>(kSpin, std::chrono::milliseconds(timeout_ms));
        while (r && !r->finished() && Clock::now() < until) {
            if (r->done) poll(v, [&](const Watched &w) { return w.r == r && !w.point; });
            if (r->finished()) break;
            lock.unlock();
            std::this_thread::yield();
            lock.lock();
        }
    }
    return be::wait_request(inst, v, h, timeout_ms);
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
    Stream s;
    if (!find_stream(inst, sh, &s))
        return be::fail(inst, XMC_ERR_INVALID_HANDLE, 0, call, "%s: %p is not a live stream", call,
                        static_cast<void *>(sh));
    // VMM-GRAPH-ORDER: a wait on events recorded outside the capture is
    // CUDA_ERROR_STREAM_CAPTURE_ISOLATION, and its pass event could not be recorded.
    if (s.capture) return refuse_capturing(inst, call, CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    // The copies to wait for: all of a remap's own, or the deferred ones
    // launched by now. One issued and not seen finished has an event to wait
    // on. One not issued yet (the remap has not run, or a launch is waiting
    // for it) gets a wait word: the stream waits GPU-side until the backend
    // stores the word's target, once the copy has finished or will never run
    // (VMM-EVENT-WAIT). Finished ones, and ones that will never run, need nothing.
    std::vector<CUevent> events;
    std::vector<size_t> unissued;
    for (size_t i = 0; i < r->copies.size(); ++i) {
        if (r->defer && r->copies[i] == CopyState::None) continue;
        if (r->copies[i] == CopyState::Done || (r->done && r->copies[i] == CopyState::None)) continue;
        if (r->copies[i] == CopyState::Launched && r->events[i]) events.push_back(r->events[i]);
        else unissued.push_back(i);
    }
    Driver &d = Driver::get();
    if (!unissued.empty()) {
        if (!d.cuStreamWaitValue32)
            return be::fail(inst, XMC_ERR_UNSUPPORTED, 0, call, "%s: the driver %s does not export %s", call,
                            d.library.c_str(), "cuStreamWaitValue32_v2");
        if (!d.missing_register.empty())
            return be::fail(inst, XMC_ERR_UNSUPPORTED, 0, call, "%s: the driver %s does not export %s", call,
                            d.library.c_str(), d.missing_register.c_str());
        if (CUresult res = ensure_words(v); res != CUDA_SUCCESS)
            return driver_fail(inst, res, call, "registering the wait words (cuMemHostRegister)");
        prune_passes(v);
        if (v.free_words.size() < unissued.size())
            return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, 0, call, "%s: all %d wait words are in use", call, kWords);
    }
    CtxScope scope(d, s.ctx);
    CUresult res = scope.result();
    for (CUevent ev : events)
        if (res == CUDA_SUCCESS) res = d.cuStreamWaitEvent(s.stream, ev, 0);
    for (size_t i : unissued) {
        if (res != CUDA_SUCCESS) break;
        if (r->words[i] < 0) {  // one word per copy, shared by every consumer told to wait for it
            r->words[i] = v.free_words.back();
            v.free_words.pop_back();
            r->targets[i] = std::atomic_ref<uint32_t>(v.words[r->words[i]]).load() + 1;
        }
        const CUdeviceptr word = v.words_dev + static_cast<CUdeviceptr>(r->words[i]) * sizeof(uint32_t);
        res = d.cuStreamWaitValue32(s.stream, word, r->targets[i], CU_STREAM_WAIT_VALUE_GEQ);
    }
    if (res == CUDA_SUCCESS && !unissued.empty()) {
        // The words stay registered until every stream has passed its waits.
        CUevent pass = nullptr;
        res = d.cuEventCreate(&pass, CU_EVENT_DISABLE_TIMING);
        if (res == CUDA_SUCCESS) res = d.cuEventRecord(pass, s.stream);
        if (res == CUDA_SUCCESS) v.passes.push_back({pass, s.ctx});
        else if (pass) d.cuEventDestroy(pass);
    }
    return res == CUDA_SUCCESS ? XMC_OK : driver_fail(inst, res, call, "cuStreamWaitEvent/cuStreamWaitValue32");
}

xmc_status request_destroy(xmc_instance *inst, xmc_request *h) {
    Vmm &v = vmm_of(inst);
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r = be::find_request(v, h);
    if (!r) return be::bad_request(inst, "request_destroy", h);
    be::forget_request(v, lock, h, *r);
    settle_words(v, *r);
    // VMM-ADOPT: an adopted mapping is the slot's and stays.
    // Never adopted: the request's mapping goes with it.
    be::drop_unadopted(*r, [](Slot &s) { return unmap_backing(s) == CUDA_SUCCESS; });
    v.cv.notify_all();
    return XMC_OK;
}

// Unmaps and frees a slot once no work on it is in flight (VMM-CLOSE). A driver failure stops
// it where it failed and is returned, the slot still open with what is left, so that closing
// again finishes (ignoring them left the slot's memory or range with the driver, unreported:
// the fault sweep's ledger caught it).
static CUresult close_slot(Vmm &v, std::unique_lock<std::mutex> &lock, Slot &s, const char **what) {
    v.cv.wait(lock, [&] { return s.jobs == 0 && s.copies == 0; });
    Driver &d = Driver::get();
    if (s.handle) {
        if (CUresult r = unmap_backing(s); r != CUDA_SUCCESS) {
            *what = "cuMemUnmap/cuMemRelease";
            return r;
        }
        // Released now, whatever it was: if the rest fails the slot stays open, unmapped.
        s.state = be::SlotState::Released;
        s.pending = nullptr;
        s.mapped_by = nullptr;
    }
    CtxScope scope(d, s.ctx);
    if (scope.result() != CUDA_SUCCESS) {
        *what = "cuCtxPushCurrent";
        return scope.result();
    }
    if (CUresult r = release_strays(s); r != CUDA_SUCCESS) {
        *what = "cuMemRelease";
        return r;
    }
    if (CUresult r = d.cuMemAddressFree(s.addr, s.size); r != CUDA_SUCCESS) {
        *what = "cuMemAddressFree";
        return r;
    }
    s.closed = true;
    v.cv.notify_all();
    return CUDA_SUCCESS;
}

xmc_status slot_close(xmc_instance *inst, xmc_slot *h) {
    Vmm &v = vmm_of(inst);
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<Slot> s;
    if (xmc_status st = be::take_slot(inst, v, h, &s); st != XMC_OK) return st;
    const char *what = "";
    if (CUresult r = close_slot(v, lock, *s, &what); r != CUDA_SUCCESS) {
        v.slots[h] = s;  // still open: a second close finishes
        return driver_fail(inst, r, "slot_close", what);
    }
    return XMC_OK;
}

xmc_status vmm_before_capture(xmc_instance *inst, xmc_stream *s, const std::function<xmc_status()> &begin) {
    Vmm &v = vmm_of(inst);
    std::lock_guard<std::mutex> lock(v.mu);
    if (be::copies_to_enqueue_on(v, s))
        return be::fail(inst, XMC_ERR_BUSY, 0, "graph_begin",
                        "graph_begin: a remap on this stream has not enqueued its reload copies yet (wait for it first)");
    return begin();
}

xmc_status vmm_copy_check(xmc_instance *inst, const be::CopySpan (&spans)[2]) {
    Instance *in = static_cast<Instance *>(inst);
    if (!in->vmm) return XMC_OK;
    const uintptr_t first[2] = {spans[0].first, spans[1].first}, last[2] = {spans[0].last, spans[1].last};
    return be::check_copy_slots(inst, *in->vmm, first, last, [](const Slot &s) { return s.handle != 0; });
}

xmc_status device_free_memory(xmc_instance *inst, int32_t device, uint64_t *free_bytes, uint64_t *total_bytes) {
    const char *call = "device_free_memory";
    Driver &d = Driver::get();
    if (xmc_status st = require(inst, call, d.missing_vmm); st != XMC_OK) return st;
    if (!free_bytes || !total_bytes)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "device_free_memory: NULL result");
    if (xmc_status st = check_device(inst, device, call); st != XMC_OK) return st;
    CUcontext ctx = nullptr;
    if (CUresult r = d.context_for(d.devices[static_cast<size_t>(device)].uuid, &ctx, nullptr); r != CUDA_SUCCESS)
        return driver_fail(inst, r, call, "cuDevicePrimaryCtxRetain");
    CtxScope scope(d, ctx);
    size_t f = 0, t = 0;
    CUresult r = scope.result();
    if (r == CUDA_SUCCESS) r = d.cuMemGetInfo(&f, &t);
    if (r != CUDA_SUCCESS) return driver_fail(inst, r, call, "cuMemGetInfo");
    *free_bytes = f;
    *total_bytes = t;
    return XMC_OK;
}

size_t vmm_close(Instance *in, CUresult *failed, const char **what) {
    Vmm &v = *in->vmm;
    std::unique_lock<std::mutex> lock(v.mu);
    size_t closed = 0;  // close_report counts them
    *failed = CUDA_SUCCESS;
    // A driver failure returns at once with what is left kept, so that closing again finishes.
    while (!v.slots.empty()) {
        auto it = v.slots.begin();
        std::shared_ptr<Slot> s = it->second;
        xmc_slot *const h = it->first;
        v.slots.erase(it);
        if (CUresult r = close_slot(v, lock, *s, what); r != CUDA_SUCCESS) {
            v.slots[h] = s;
            *failed = r;
            return closed;
        }
        ++closed;
    }
    be::stop_threads(v, lock);
    v.threads.clear();  // joined: a close retried after a failure below joins none twice
    lock.lock();
    // Every request is done now, so every wait word is stored; once each
    // stream has passed its waits, the words' memory can go.
    Driver &d = Driver::get();
    auto note = [&](CUresult r, const char *call) {
        if (r == CUDA_SUCCESS) return false;
        *failed = r;
        *what = call;
        return true;
    };
    while (!v.passes.empty()) {
        const PassEvent &p = v.passes.back();
        CtxScope scope(d, p.ctx);
        if (note(scope.result(), "cuCtxPushCurrent") || note(d.cuEventSynchronize(p.ev), "cuEventSynchronize") ||
            note(d.cuEventDestroy(p.ev), "cuEventDestroy"))
            return closed;
        v.passes.pop_back();
    }
    while (!v.spare_events.empty()) {
        const PassEvent &e = v.spare_events.back();
        CtxScope scope(d, e.ctx);
        if (note(scope.result(), "cuCtxPushCurrent") || note(d.cuEventDestroy(e.ev), "cuEventDestroy")) return closed;
        v.spare_events.pop_back();
    }
    if (!v.phases.empty()) {
        if (FILE *f = std::fopen(v.phases_file.c_str(), "a")) {
            for (const std::string &line : v.phases) std::fprintf(f, "%s\n", line.c_str());
            std::fclose(f);
        }
        v.phases.clear();
    }
    if (v.words) {
        CtxScope scope(d, v.words_ctx);
        if (note(scope.result(), "cuCtxPushCurrent") || note(d.cuMemHostUnregister(v.words), "cuMemHostUnregister"))
            return closed;
        munmap(v.words, kWordBytes);
        v.words = nullptr;
        v.free_words.clear();
    }
    return closed;
}

} // namespace xmc::cuda
