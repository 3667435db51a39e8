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
// were done, its copies enqueued and seen done (hardware/gpu_bench_measure.cpp reads it).
//
// The slot entry points are reference/common/slots.hpp's; this file is CUDA's steps (be::VmmOps),
// the watcher, the wait words, request_stream_wait and device_free_memory.
#include "cuda.hpp"
#include "slots.hpp"

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
    using SlotType = Slot;
    using RequestType = Request;
    be::VmmOps<Vmm> ops;
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

be::VmmOps<Vmm> &vmm_ops();

std::shared_ptr<Vmm> vmm_create() {
    auto v = std::make_shared<Vmm>();
    v->ops = vmm_ops();
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
int64_t map_backing(Vmm &, Slot &s, bool) {
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
int64_t unmap_backing(Vmm &, Slot &s, bool) {
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

// A worker ran r: consumers of copies that will never run go on; its phases, once finished.
void ran(Vmm &v, Request &r) {
    if (r.t_driver == Clock::time_point{}) r.t_driver = Clock::now();  // no copy issued after its driver calls
    settle_words(v, r);
    if (r.finished()) note_phases(v, r);  // a release, or a remap with no copy in flight
}

void worker_loop(xmc_instance *inst, Vmm *v) {
    be::work(*v, [&](const std::shared_ptr<Request> &r) {
        r->t_picked = Clock::now();
        be::run_request(inst, *v, r);
    });
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
    v.announce();
}

// A request's stream point was reached: the work before it is done, so the
// request goes to the workers. (If the stream failed instead, the request
// carries the failure; a remap then maps nothing.)
void point_seen(Vmm &v, const Watched &w, CUresult res) {
    if (res != CUDA_SUCCESS) record(*w.r, res, "the stream point (cuEventQuery) of the request");
    w.r->fired = true;
    w.r->t_point = Clock::now();
    v.jobs.push_back(w.r);
    v.announce();
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
        if (w.point) point_seen(v, w, res);
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

// Issues the reload copy of slot i of r on `stream`, then records its event.
// Caller holds v.mu and is no callback thread.
xmc_status start_copy(xmc_instance *inst, Vmm &v, const std::shared_ptr<Request> &r, size_t i, xmc_stream *stream,
                      const char *call) {
    Stream st;
    Slot &s = *r->slots[i];
    // A deferred launch that fails is its caller's to report, and leaves the copy to launch again
    // (VMM-ERROR-CLEAR); the worker's own launches fail their request (VMM-ASYNC-ERROR).
    const bool launch = std::strcmp(call, "request_launch_copy") == 0;
    if (!launch && r->t_driver == Clock::time_point{}) r->t_driver = Clock::now();  // its maps are done
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
    v.announce();
    if (!launch) r->t_enqueued = Clock::now();  // XMC_CUDA_SLOT_PHASES: the last one's counts
    return XMC_OK;
}

// ---- requests -------------------------------------------------------------------

// VMM-RELEASE-ORDER: the request's stream point, after the shared refusals (slots.hpp's submit).
xmc_status enqueue_point(xmc_instance *inst, const char *call, xmc_stream *stream, const std::shared_ptr<Vmm> &vp,
                         const std::shared_ptr<Request> &r) {
    Vmm &v = *vp;
    Stream st;
    if (!find_stream(inst, stream, &st))
        return be::fail(inst, XMC_ERR_INVALID_HANDLE, 0, call, "%s: %p is not a live stream of this instance", call,
                        static_cast<void *>(stream));
    // VMM-GRAPH-ORDER: the stream point (and the cuStreamQuery below, which
    // would end the capture) cannot join a capture: refused, nothing changed.
    if (st.capture) return refuse_capturing(inst, call);
    if (r->remap) {
        const size_t n = r->slots.size();
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
    v.announce();
    return XMC_OK;
}

// Past its stream point (its stream was idle: enqueue_point queued it) and ready: with workers
// to spare, run it here rather than wake one (this is the caller's thread, never a callback;
// VMM-SPEED). Serial mode keeps every driver call on its one worker. v.mu is held since
// enqueue_point, so r is still the last job.
void committed(xmc_instance *inst, Vmm &v, const std::shared_ptr<Request> &r) {
    if (r->fired && v.workers > 1 && be::ready(*r)) {
        v.jobs.pop_back();
        r->t_picked = Clock::now();
        be::run_request(inst, v, r);
    }
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


// ---- steps -----------------------------------------------------------------------

// VMM-CREATE: slot_create's driver part, after the shared NULL check.
xmc_status create(xmc_instance *inst, int32_t device, size_t bytes, Slot &slot) {
    const char *call = "slot_create";
    Driver &d = Driver::get();
    if (xmc_status st = check_device(inst, device, call); st != XMC_OK) return st;
    // 0, or a size that would overflow when rounded up to any granularity a
    // driver uses (up to 1 GiB), is no size.
    constexpr size_t kMaxGranularity = size_t{1} << 30;
    if (bytes == 0 || bytes > SIZE_MAX - kMaxGranularity + 1)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "slot_create: size %zu", bytes);
    Slot *s = &slot;
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
    Vmm &v = vmm_of(inst);
    if (CUresult r = static_cast<CUresult>(v.ops.map(v, *s, false)); r != CUDA_SUCCESS) {
        d.cuMemAddressFree(s->addr, s->size);
        if (r == CUDA_ERROR_OUT_OF_MEMORY)
            return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, r, call,
                            "slot_create: cuMemCreate of %zu bytes: out of device memory", s->size);
        return driver_fail(inst, r, call, "cuMemCreate/cuMemMap/cuMemSetAccess");
    }
    return XMC_OK;
}

// VMM-SPEED: for up to kSpin the caller polls the request's own copies (this is the caller's
// thread: driver calls are allowed), as the raw driver's synchronize spins, instead of waiting for
// the watcher to see them and wake it; then, or once there is nothing to poll, it waits.
void before_wait(Vmm &v, xmc_request *h, uint32_t timeout_ms) {
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

// Unmaps and frees a slot once no work on it is in flight (VMM-CLOSE, after close_wait). A driver failure stops
// it where it failed and is returned, the slot still open with what is left, so that closing
// again finishes (ignoring them left the slot's memory or range with the driver, unreported:
// the fault sweep's ledger caught it).
int64_t close_free(Vmm &v, Slot &s, const char **what) {
    Driver &d = Driver::get();
    if (s.handle) {
        if (CUresult r = static_cast<CUresult>(unmap_backing(v, s, false)); r != CUDA_SUCCESS) {
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
    return CUDA_SUCCESS;
}

// A request_launch_copy that will not copy releases the consumers waiting for its copy.
void launched(Vmm &v, Request &r, xmc_status st) {
    if (st != XMC_OK) settle_words(v, r);
    else r.t_enqueued = Clock::now();
}

void destroyed(Vmm &v, const std::shared_ptr<Request> &r) { settle_words(v, *r); }

xmc_status available(xmc_instance *inst, const char *call) {
    return require(inst, call, Driver::get().missing_vmm);
}
bool mapped(const Slot &s) { return s.handle != 0; }
xmc_status status_of_native(int64_t res) {
    const xmc_status st = status_of(static_cast<CUresult>(res));
    return st == XMC_OK ? XMC_ERR_DRIVER : st;
}
std::string native_name(int64_t res) { return Driver::get().result_name(static_cast<CUresult>(res)); }

} // namespace

be::VmmOps<Vmm> &vmm_ops() {
    static be::VmmOps<Vmm> ops{
        .map_call = "cuMemCreate/cuMemMap/cuMemSetAccess",
        .unmap_call = "cuMemUnmap/cuMemRelease",
        .available = available,
        .create = create,
        .map = map_backing,
        .unmap = unmap_backing,
        .mapped = mapped,
        .status_of = status_of_native,
        .native_name = native_name,
        .copy = start_copy,
        .claim = CopyState::Launched,  // a stream told to wait meanwhile gets a wait word for it
        .launched = launched,
        .enqueue_point = enqueue_point,
        .committed = committed,
        .point_reached = be::hand_to_workers<Vmm>,  // unused: the watcher sees the points (point_seen)
        .worker = worker_loop,
        .watcher = watch_loop,
        .ran = ran,
        .before_wait = before_wait,
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
    int64_t native = 0;
    // A driver failure returns at once with what is left kept, so that closing again finishes.
    const size_t closed = be::close_slots(v, &native, what);  // close_report counts them
    *failed = static_cast<CUresult>(native);
    if (native) return closed;
    std::unique_lock<std::mutex> lock(v.mu);
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
