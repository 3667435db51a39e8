// The bookkeeping of the fixed-address slot primitive (capability `vmm`, SPEC 5 VMM-*) that every
// in-tree backend shares, after reference/model/slot_model.hpp: the slot and request states, the
// handle maps, the refusals of a submit and of a deferred launch in the model's order, and the
// request calls that touch no driver (wait, adopt, query). Kept in one place so that the backends
// refuse, wait and report alike.
//
// A backend's Slot extends SlotBase<Request> (adding its address and its memory), its Request
// extends RequestBase<Slot> (adding its events), and its Vmm extends SlotBook<Slot, Request>
// (adding its threads' state). What touches memory, streams and events (mapping, copies, stream
// points, a consumer's wait) stays in the backend's vmm.cpp.
//
// Locking: wait_request, adopt_request, query_request and work take book.mu themselves; the
// other templates expect the caller to hold it (the functions of slot_book.cpp touch no book).
// Every change of a slot or request is announced (book.announce()): the ones that wait for one do
// so on book.cv; the workers (work) on book.work_cv, one woken per change where a job waits.
#pragma once
#include "errors.hpp"

#include <xmc/backend.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace xmc::be {

enum class SlotState { Mapped, ReleasePending, Released, RemapPending };

// The reload copy of one slot of a remap. Claimed: a deferred launch waiting for its remap.
// Only Level Zero marks a claim so: a consumer there waits on the copy's event, which nothing
// would signal if the launch were then refused. Host and CUDA mark a claim Launched instead, so
// that a consumer told to wait meanwhile waits for that copy; a refused launch sets it back to
// None, which releases such a consumer.
// VMM-EVENT-WAIT: a consumer's wait picks the copies to wait for from these.
enum class CopyState : uint8_t { None, Claimed, Launched, Done };

template <class Request>
struct SlotBase {
    size_t size = 0;
    bool closed = false;
    SlotState state = SlotState::Mapped;
    Request *pending = nullptr;    // the release or remap of ReleasePending / RemapPending
    Request *mapped_by = nullptr;  // the remap whose mapping it holds (nullptr: create's)
    bool release_queued = false;   // a release not yet run by a worker: a remap waits for it
    // VMM-CLOSE: close waits until jobs and copies are both 0.
    int jobs = 0;                  // requests naming it not yet run by a worker: close waits
    int copies = 0;                // copies into it not yet finished: release and close wait
    xmc_status release_status = XMC_OK;  // why its last release failed
    int64_t release_native = 0;
};

template <class Slot>
struct RequestBase {
    bool remap = false;
    bool defer = false;
    xmc_stream *stream = nullptr;
    std::vector<std::shared_ptr<Slot>> slots;
    std::vector<const void *> srcs;  // remap: per slot
    std::vector<CopyState> copies;   // remap: per slot
    bool fired = false;              // the stream reached it
    bool done = false;               // a worker ran it
    bool adopted = false;
    xmc_status status = XMC_OK;      // the first failure
    int64_t native = 0;
    std::string what;
    uint32_t copies_launched = 0;
    uint32_t copies_done = 0;

    // The first failure is the request's.
    void record(xmc_status st, int64_t native_code, const std::string &why) {
        if (status != XMC_OK) return;
        status = st;
        native = native_code;
        what = why;
    }
    void copy_launched(size_t i) {
        copies[i] = CopyState::Launched;
        ++copies_launched;
        ++slots[i]->copies;
    }
    void copy_finished(size_t i) {
        copies[i] = CopyState::Done;
        ++copies_done;
        --slots[i]->copies;
    }
    // The worker's part and every copy started so far: what request_wait and destroy wait for.
    bool finished() const { return done && copies_done == copies_launched; }
};

template <class Slot, class Request>
struct SlotBook {
    unsigned workers = 4;
    std::mutex mu;
    std::condition_variable cv;  // every change of a slot or request is announced here
    // The workers wait apart, woken one at a time and only where a job waits: woken on cv, every
    // change woke every worker, which then queued for mu behind the caller (VMM-SPEED: on an H100
    // a granule's cycle ran at 0.83 of the raw calls with 4 workers, 0.72 with 8, 0.86 with 2).
    std::condition_variable work_cv;
    std::map<xmc_slot *, std::shared_ptr<Slot>> slots;
    std::map<xmc_request *, std::shared_ptr<Request>> requests;
    std::deque<std::shared_ptr<Request>> jobs;  // fired, not yet run
    std::vector<std::thread> threads;
    bool stop = false;

    // A change of a slot or request, under mu: to every waiter, and to one worker if a job waits
    // (it may be ready now), or to all of them when they stop.
    void announce() {
        cv.notify_all();
        if (stop) work_cv.notify_all();
        else if (!jobs.empty()) work_cv.notify_one();
    }
};

// VMM-BATCH-PARTIAL: a worker's failure names the slot it failed at by its index in the request
// (batch or single), so the caller knows which slot of a batch the driver refused: " (batch index i)".
inline std::string batch_index(size_t i) { return " (batch index " + std::to_string(i) + ")"; }

// ---- handles and options (slot_book.cpp) ----------------------------------------

// Slot and request handles: from one counter per backend library, never reused, so a stale handle
// or another instance's is refused (a counter per instance made slot 1 of one instance slot 1 of
// every other: test_hostile's VMM_STATE).
// VMM-CLOSE: a closed slot's handle is never reused: it stays refused everywhere.
uintptr_t next_handle();
xmc_status bad_request(xmc_instance *inst, const char *call, xmc_request *h);
// The value of a vmm_* open option: a whole decimal number, no sign or space, that fits in 64 bits.
bool option_number(const std::string &value, uint64_t *out);
// The open option vmm_workers=N (1..64; 1 = serial mode, VMM-SERIAL); false if `key` is another.
bool workers_option(const std::string &key, const std::string &value, unsigned *workers, xmc_status *st);

// What slot_release, slot_remap or one of their batches was asked.
struct Batch {
    const char *call;
    bool remap;
    xmc_slot *const *handles;
    size_t n;
    xmc_stream *stream;
    const void *const *srcs;  // remap only
    const size_t *src_bytes;  // remap only
    uint32_t flags;
    xmc_request **out;
};
// The refusals that need no lock: arguments and flags.
xmc_status check_batch(xmc_instance *inst, const Batch &b);
// A remap source: pinned, starting at its block's base, the block holding at least
// bytes >= the slot's size (VMM-REMAP-COPY).
xmc_status check_source(xmc_instance *inst, const char *call, size_t i, const void *src, size_t bytes,
                        size_t slot_size);

// ---- lookups ------------------------------------------------------------------------

template <class S, class R>
std::shared_ptr<S> find_slot(SlotBook<S, R> &v, xmc_slot *h) {
    auto it = v.slots.find(h);
    return it == v.slots.end() ? nullptr : it->second;
}

template <class S, class R>
std::shared_ptr<R> find_request(SlotBook<S, R> &v, xmc_request *h) {
    auto it = v.requests.find(h);
    return it == v.requests.end() ? nullptr : it->second;
}

// slot_create's last step: the new slot gets its handle.
template <class S, class R>
xmc_slot *add_slot(SlotBook<S, R> &v, const std::shared_ptr<S> &s) {
    auto *h = reinterpret_cast<xmc_slot *>(next_handle());
    v.slots[h] = s;
    return h;
}

// slot_close's lookup: the live slot h, out of the handle map at once (refused from now on).
template <class S, class R>
xmc_status take_slot(xmc_instance *inst, SlotBook<S, R> &v, xmc_slot *h, std::shared_ptr<S> *out) {
    *out = find_slot(v, h);
    if (!*out)
        return fail(inst, XMC_ERR_INVALID_HANDLE, 0, "slot_close", "slot_close: %p is not a live slot",
                    static_cast<void *>(h));
    v.slots.erase(h);
    return XMC_OK;
}

// ---- slot states ----------------------------------------------------------------------

// The slot has r's remap pending and may still take or lose its mapping (adopt, destroy).
template <class S, class R>
bool pending_remap(const S &s, const R &r) {
    return !s.closed && s.state == SlotState::RemapPending && s.pending == &r;
}

// The slot still holds r's mapping: a deferred copy may go into it.
template <class S, class R>
bool holds(const S &s, const R &r) {
    return !s.closed && s.mapped_by == &r &&
           (s.state == SlotState::Mapped || (s.state == SlotState::RemapPending && s.pending == &r));
}

// VMM-ASYNC-ERROR: a failed unmap leaves the slot mapped, its bytes intact.
// A worker ran r's release of s (`mapped`: the unmap failed, s holds its memory still). A remap
// asked meanwhile finds out for itself; otherwise the slot is released, or still mapped.
template <class S, class R>
void release_ran(S &s, const R &r, bool mapped) {
    s.release_queued = false;
    --s.jobs;
    if (s.state == SlotState::ReleasePending && s.pending == &r) {
        s.state = mapped ? SlotState::Mapped : SlotState::Released;
        s.pending = nullptr;
    }
}

// VMM-ASYNC-ERROR: a failed remap's slots go back to released (mapped, where their release failed).
// r's remap failed and its own mappings are undone: each slot still pending on it goes back to
// what it holds (mapped(slot): memory is mapped there now).
template <class R, class F>
void remap_failed(R &r, F &&mapped) {
    for (const auto &s : r.slots)
        if (s->state == SlotState::RemapPending && s->pending == &r) {
            s->state = mapped(*s) ? SlotState::Mapped : SlotState::Released;
            s->pending = nullptr;
            s->mapped_by = nullptr;
        }
}

// ---- submit ---------------------------------------------------------------------------

// Under v.mu, after check_batch: the request, or the first refusal in the model's order
// (handles, duplicates, sources, states). Nothing changes yet; the backend adds its stream point,
// then commit() makes the request count.
template <class S, class R>
xmc_status make_request(xmc_instance *inst, SlotBook<S, R> &v, const Batch &b, std::shared_ptr<R> *out) {
    const char *call = b.call;
    auto r = std::make_shared<R>();
    r->remap = b.remap;
    r->defer = b.flags & XMC_REMAP_DEFER_COPY;
    r->stream = b.stream;
    for (size_t i = 0; i < b.n; ++i) {
        std::shared_ptr<S> s = find_slot(v, b.handles[i]);
        if (!s)
            return fail(inst, XMC_ERR_INVALID_HANDLE, 0, call, "%s: slot %zu (%p) is not a live slot", call, i,
                        static_cast<void *>(b.handles[i]));
        r->slots.push_back(s);
    }
    // VMM-BATCH: a slot named twice is refused before any slot changes.
    std::set<S *> seen;
    for (size_t i = 0; i < b.n; ++i)
        if (!seen.insert(r->slots[i].get()).second)
            return fail(inst, XMC_ERR_DUPLICATE_IN_BATCH, 0, call, "%s: slot %p is named twice", call,
                        static_cast<void *>(b.handles[i]));
    if (b.remap)
        for (size_t i = 0; i < b.n; ++i)
            if (xmc_status st = check_source(inst, call, i, b.srcs[i], b.src_bytes[i], r->slots[i]->size);
                st != XMC_OK)
                return st;
    for (size_t i = 0; i < b.n; ++i) {
        // VMM-STATE: release needs a mapped slot, remap a released or releasing one; otherwise
        // busy, nothing changed.
        const SlotState st = r->slots[i]->state;
        // VMM-DOUBLE: a released slot is never released again (the driver would see a second
        // unmap and release of one mapping): refused busy, with its own message.
        if (!b.remap && (st == SlotState::Released || st == SlotState::ReleasePending))
            return fail(inst, XMC_ERR_BUSY, 0, call,
                        "%s: slot %zu is already released or releasing: its mapping is never released twice", call,
                        i);
        if (!b.remap && st != SlotState::Mapped)
            return fail(inst, XMC_ERR_BUSY, 0, call, "%s: slot %zu is not mapped, or has a release or remap pending",
                        call, i);
        if (b.remap && st != SlotState::ReleasePending && st != SlotState::Released)
            return fail(inst, XMC_ERR_BUSY, 0, call,
                        "%s: slot %zu is neither released nor releasing (mapped, or a remap is pending)", call, i);
    }
    if (b.remap) {
        r->srcs.assign(b.srcs, b.srcs + b.n);
        r->copies.assign(b.n, CopyState::None);
    }
    *out = std::move(r);
    return XMC_OK;
}

// The request's stream point is queued: it takes its slots (VMM-STATE) and gets its handle.
template <class S, class R>
void commit(SlotBook<S, R> &v, const std::shared_ptr<R> &r, xmc_request **out) {
    for (const auto &s : r->slots) {
        s->state = r->remap ? SlotState::RemapPending : SlotState::ReleasePending;
        s->pending = r.get();
        s->mapped_by = r->remap ? r.get() : nullptr;
        if (!r->remap) s->release_queued = true;
        ++s->jobs;
    }
    auto *h = reinterpret_cast<xmc_request *>(next_handle());
    v.requests[h] = r;
    *out = h;
}

// graph_begin on stream s (capability graph): a remap whose worker has not yet enqueued its reload
// copies on s would have them recorded into the graph instead of reloading its slots, so the capture
// is refused (busy) until the remap has run. Caller holds v.mu.
template <class S, class R>
bool copies_to_enqueue_on(const SlotBook<S, R> &v, xmc_stream *s) {
    for (const auto &[h, r] : v.requests)
        if (r->remap && !r->defer && !r->done && r->stream == s) return true;
    return false;
}

// ---- workers --------------------------------------------------------------------------

// VMM-RELEASE-ORDER: a release never unmaps under a copy still running into its slot.
// A remap waits for its slots' releases; a release for the copies into its slots. Nothing else:
// requests of other slots never hold one up, so one worker is enough (VMM-SERIAL).
template <class R>
bool ready(const R &r) {
    for (const auto &s : r.slots)
        if (r.remap ? s->release_queued : s->copies > 0) return false;
    return true;
}

// The first fired request that is ready, out of the queue; nullptr if none is.
template <class S, class R>
std::shared_ptr<R> take_ready(SlotBook<S, R> &v) {
    auto it = std::find_if(v.jobs.begin(), v.jobs.end(), [](const auto &j) { return ready(*j); });
    if (it == v.jobs.end()) return nullptr;
    std::shared_ptr<R> r = *it;
    v.jobs.erase(it);
    return r;
}

// A worker thread: run(request) on each request that is ready, under v.mu, until stopped with no
// job left.
template <class S, class R, class F>
void work(SlotBook<S, R> &v, F &&run) {
    std::unique_lock<std::mutex> lock(v.mu);
    for (;;) {
        if (std::shared_ptr<R> r = take_ready(v)) {
            // Another ready job goes to another worker meanwhile (one is woken per change).
            if (std::any_of(v.jobs.begin(), v.jobs.end(), [](const auto &j) { return ready(*j); }))
                v.work_cv.notify_one();
            run(r);
            continue;
        }
        if (v.stop && v.jobs.empty()) return;
        v.work_cv.wait(lock);
    }
}

// vmm_close, once every slot is closed: stops the threads and joins them, the lock released.
template <class S, class R>
void stop_threads(SlotBook<S, R> &v, std::unique_lock<std::mutex> &lock) {
    v.stop = true;
    v.announce();
    lock.unlock();
    for (auto &t : v.threads) t.join();
}

// ---- copies into slots ------------------------------------------------------------------

// VMM-UNMAPPED-FAULTS: a copy may only name a slot that has memory mapped at the moment it is
// enqueued (has_memory(slot), read under v.mu, which the workers hold while they map and unmap):
// one released, whose release has already unmapped it, or whose remap has not mapped yet (or
// failed) is refused busy before anything is enqueued. Without this, cuMemcpyAsync into a released
// slot's range crashed the real CUDA driver (SIGSEGV, H200), and the host backend's memcpy too.
// A slot whose release is still queued holds its memory: a copy ordered before the unmap, or one
// told to wait for a remap's copy (VMM-EVENT-WAIT), is the caller's to order. [first, last]: the
// described bytes of the source and the destination.
template <class S, class R, class F>
xmc_status check_copy_slots(xmc_instance *inst, SlotBook<S, R> &v, const uintptr_t (&first)[2],
                            const uintptr_t (&last)[2], F &&has_memory) {
    static const char *const side[2] = {"source", "destination"};
    std::lock_guard<std::mutex> lock(v.mu);
    for (const auto &[h, s] : v.slots) {
        if (has_memory(*s)) continue;
        const auto lo = static_cast<uintptr_t>(s->addr), hi = lo + s->size - 1;
        for (int i = 0; i < 2; ++i)
            if (first[i] <= hi && lo <= last[i])
                return fail(inst, XMC_ERR_BUSY, 0, "copy",
                            "copy: the %s overlaps slot %p [%p, %p], which has no memory mapped now (released, "
                            "or its remap has not mapped it yet)",
                            side[i], static_cast<void *>(h), reinterpret_cast<void *>(lo),
                            reinterpret_cast<void *>(hi));
    }
    return XMC_OK;
}

// ---- request calls ----------------------------------------------------------------------

// request_launch_copy's argument check.
template <class R>
xmc_status check_launch(xmc_instance *inst, const char *call, const R &r, uint32_t index) {
    if (!r.remap || !r.defer || index >= r.slots.size())
        return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call,
                    "%s: needs a deferred-copy remap request and a slot index below %zu (got %u)", call,
                    r.slots.size(), index);
    return XMC_OK;
}

// request_launch_copy, past its checks: once per slot (VMM-DEFERRED), claimed (as `claim`, see
// CopyState) before waiting, so that a concurrent second launch is refused too; then the launch
// waits for the remap itself and gives the claim back. Refuses only before waiting.
template <class S, class R>
xmc_status claim_copy(xmc_instance *inst, const char *call, SlotBook<S, R> &v, std::unique_lock<std::mutex> &lock,
                      R &r, uint32_t index, CopyState claim) {
    if (r.copies[index] != CopyState::None)
        return fail(inst, XMC_ERR_BUSY, 0, call, "%s: the copy of slot %u was already launched", call, index);
    r.copies[index] = claim;
    v.cv.wait(lock, [&] { return r.done; });
    r.copies[index] = CopyState::None;
    return XMC_OK;
}

// request_launch_copy, after claim_copy: a mapping to copy into.
template <class R>
xmc_status check_target(xmc_instance *inst, const char *call, const R &r, uint32_t index) {
    if (r.status != XMC_OK)
        return fail(inst, XMC_ERR_BUSY, r.native, call, "%s: the remap failed (%s): nothing to copy into", call,
                    r.what.c_str());
    // VMM-DEFERRED: the copy goes only into this request's own mapping.
    if (!holds(*r.slots[index], r))
        return fail(inst, XMC_ERR_BUSY, 0, call,
                    "%s: slot %u no longer holds this request's mapping (closed, or released since)", call, index);
    return XMC_OK;
}

template <class S, class R>
xmc_status wait_request(xmc_instance *inst, SlotBook<S, R> &v, xmc_request *h, uint32_t timeout_ms) {
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<R> r = find_request(v, h);
    if (!r) return bad_request(inst, "request_wait", h);
    // VMM-ASYNC-ERROR: the wait returns a worker's failure with the driver's code.
    if (!v.cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return r->finished(); }))
        return fail(inst, XMC_ERR_TIMEOUT, 0, "request_wait", "request_wait: not finished after %u ms (%s)",
                    timeout_ms, r->fired ? "a worker has it" : "its stream has not reached it");
    if (r->status != XMC_OK)
        return fail(inst, r->status, r->native, "request_wait", "request_wait: %s", r->what.c_str());
    return XMC_OK;
}

template <class S, class R>
xmc_status adopt_request(xmc_instance *inst, SlotBook<S, R> &v, xmc_request *h) {
    const char *call = "request_adopt";
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<R> r = find_request(v, h);
    if (!r) return bad_request(inst, call, h);
    if (!r->remap) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: a release request maps nothing", call);
    v.cv.wait(lock, [&] { return r->done; });  // the mapping must exist to change owner
    if (r->adopted) return fail(inst, XMC_ERR_BUSY, 0, call, "%s: already adopted", call);
    if (r->status != XMC_OK)
        return fail(inst, XMC_ERR_BUSY, r->native, call, "%s: the remap failed (%s): nothing to adopt", call,
                    r->what.c_str());
    for (const auto &s : r->slots)
        if (pending_remap(*s, *r)) {
            s->state = SlotState::Mapped;  // the slot's own now: destroying the request leaves it (VMM-ADOPT)
            s->pending = nullptr;
        }
    r->adopted = true;
    return XMC_OK;
}

template <class S, class R>
xmc_status query_request(xmc_instance *inst, SlotBook<S, R> &v, xmc_request *h, xmc_request_info *out) {
    if (!out) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "request_query", "request_query: NULL result");
    std::lock_guard<std::mutex> lock(v.mu);
    std::shared_ptr<R> r = find_request(v, h);
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

// request_destroy, once the request is found: its handle goes at once, then the call waits for
// its work.
template <class S, class R>
void forget_request(SlotBook<S, R> &v, std::unique_lock<std::mutex> &lock, xmc_request *h, const R &r) {
    v.requests.erase(h);
    v.cv.wait(lock, [&] { return r.finished(); });
}

// request_destroy of a remap never adopted: its mapping goes with it (VMM-ADOPT). unmap(slot)
// undoes the slot's mapping and says whether it went; if not, it stays as the slot's own.
// VMM-ASYNC-ERROR: also a remap that failed after mapping (its reload copy failed): skipping it
// left the slot remap-pending on a destroyed request, refusing every later release and remap
// (the fault sweep caught it); a remap rolled back by its worker has no slot pending on it.
template <class R, class F>
void drop_unadopted(R &r, F &&unmap) {
    if (!r.remap || r.adopted) return;
    for (const auto &s : r.slots)
        if (pending_remap(*s, r)) {
            s->state = unmap(*s) ? SlotState::Released : SlotState::Mapped;
            s->pending = nullptr;
            s->mapped_by = nullptr;
        }
}

} // namespace xmc::be
