// Fixed-address slots (capability `vmm`, SPEC 5 VMM-*), written once over a platform's driver
// steps: slot_create's order, the workers' release and remap (with their roll-back and sticky
// failures, VMM-ASYNC-ERROR), the stream point's hand-off (VMM-CALLBACK), request_launch_copy,
// request_wait, request_destroy, slot_close and the close of every slot (VMM-CLOSE), over the
// bookkeeping of slot_book.hpp. A platform supplies only VmmOps: reserving and freeing a range,
// making and dropping a slot's memory, its reload copy, the stream point, close's wait, the
// native error's name.
//
// A broken backend of the self-test replaces one step of a platform's table
// (conformance/broken/vmm/vmm_steps.hpp) before its first open: the bug sits in that step and
// nowhere else, so the rest stays the reference's and cannot drift from it.
//
// The platform's book V extends SlotBook<V::SlotType, V::RequestType> and holds `ops`, a copy of
// the platform's process-wide table taken when the instance opens.
#pragma once
#include "memory_book.hpp"
#include "slot_book.hpp"

#include <cinttypes>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

namespace xmc::be {

template <class V>
struct VmmOps {
    using Slot = typename V::SlotType;
    using Request = typename V::RequestType;
    // The driver calls a worker's failure names ("<map_call> of slot 0x... failed with <name>").
    const char *map_call;
    const char *unmap_call;
    // The driver is there to make slots (UNSUPPORTED recorded otherwise); nullptr: always.
    xmc_status (*available)(xmc_instance *inst, const char *call);
    // slot_create after its NULL check: the device and size checks, s's range reserved (s.addr,
    // s.size rounded up to the granularity, s.device) and its first memory mapped read/write
    // (VMM-CREATE); XMC_OK, or the refusal recorded with nothing left behind.
    xmc_status (*create)(xmc_instance *inst, int32_t device, size_t bytes, Slot &s);
    // Fresh memory at s.addr, read/write for s's device (VMM-STABLE); `worker`: a worker's remap
    // (not create's first mapping). 0, or the driver's code (nothing mapped).
    int64_t (*map)(V &v, Slot &s, bool worker);
    // The memory unmapped and returned (VMM-UNMAPPED-FAULTS, VMM-RELEASE-ORDER); `worker` as
    // above. 0, or the driver's code (VMM-ASYNC-ERROR: the slot stays mapped, its bytes intact).
    int64_t (*unmap)(V &v, Slot &s, bool worker);
    // Memory is mapped at the slot now.
    bool (*mapped)(const Slot &s);
    // A driver code's status (XMC_ERR_DRIVER unless it says more) and name.
    xmc_status (*status_of)(int64_t native);
    std::string (*native_name)(int64_t native);
    // VMM-REMAP-COPY: enqueues the reload copy of slot i of r on `stream` and marks it launched
    // (RequestBase::copy_launched); `call` is slot_remap (a worker) or request_launch_copy.
    // Caller holds v.mu.
    xmc_status (*copy)(xmc_instance *inst, V &v, const std::shared_ptr<Request> &r, size_t i, xmc_stream *stream,
                       const char *call);
    // request_launch_copy: what its claim shows as (CopyState) while it waits for the remap.
    CopyState claim;
    // request_launch_copy's checks of its stream, before the claim; nullptr: none.
    xmc_status (*launch_check)(xmc_instance *inst, V &v, Request &r, xmc_stream *stream);
    // request_launch_copy's end, whatever its status `st`; nullptr: nothing.
    void (*launched)(V &v, Request &r, xmc_status st);
    // VMM-RELEASE-ORDER: r's point on the caller's stream, after its prior work, whose arrival
    // hands r to the workers; nothing changes if it is refused. Caller holds v.mu.
    xmc_status (*enqueue_point)(xmc_instance *inst, const char *call, xmc_stream *stream,
                                const std::shared_ptr<V> &v, const std::shared_ptr<Request> &r);
    // After the request counts (commit), under v.mu; nullptr: nothing.
    void (*committed)(xmc_instance *inst, V &v, const std::shared_ptr<Request> &r);
    // VMM-CALLBACK: on the stream's callback thread once the stream reaches r: hands r to the
    // workers and does nothing else.
    void (*point_reached)(xmc_instance *inst, const std::shared_ptr<V> &v, const std::shared_ptr<Request> &r);
    // A worker thread: runs each request once it is ready, until stopped (VMM-SERIAL).
    void (*worker)(xmc_instance *inst, V *v);
    // A remap undone by its worker before any copy (a map failed, or a release it waited for):
    // none of its copies will run; nullptr: nothing.
    void (*undone)(V &v, Request &r);
    // A thread beside the workers that sees events finish (never a callback); nullptr: none.
    void (*watcher)(V *v);
    // After a worker ran r (done), under v.mu; nullptr: nothing.
    void (*ran)(V &v, Request &r);
    // request_wait, before it waits on the book; nullptr: nothing.
    void (*before_wait)(V &v, xmc_request *h, uint32_t timeout_ms);
    // request_destroy, after the request's mapping went (unless adopted); nullptr: nothing.
    void (*destroyed)(V &v, const std::shared_ptr<Request> &r);
    // VMM-CLOSE: before close unmaps s (lock held): waits for its requests and the copies into it.
    void (*close_wait)(V &v, std::unique_lock<std::mutex> &lock, Slot &s);
    // Close's driver part: s's memory (if mapped) and its range go; 0, or the driver's code with
    // *what the call that failed (the slot then stays open, closing again finishes).
    int64_t (*close_free)(V &v, Slot &s, const char **what);
};

// ---- the default steps, shared by every platform --------------------------------------

// VMM-CALLBACK: the stream reached r: it goes to the workers, nothing else.
template <class V>
void hand_to_workers(xmc_instance *, const std::shared_ptr<V> &vp, const std::shared_ptr<typename V::RequestType> &r) {
    V &v = *vp;
    std::lock_guard<std::mutex> lock(v.mu);
    r->fired = true;
    v.jobs.push_back(r);
    v.announce();
}

// VMM-CLOSE: nothing may unmap a slot while a worker still runs one of its requests or a stream
// still copies into it (a copy into unmapped memory).
template <class V>
void wait_idle(V &v, std::unique_lock<std::mutex> &lock, typename V::SlotType &s) {
    v.cv.wait(lock, [&] { return s.jobs == 0 && s.copies == 0; });
}

// ---- workers ----------------------------------------------------------------------------

template <class V>
std::string driver_text(const V &v, const char *call, const typename V::SlotType &s, int64_t native) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " of slot %#" PRIxPTR " failed with ", static_cast<uintptr_t>(s.addr));
    return call + (buf + v.ops.native_name(native));
}

template <class V>
void run_release(V &v, typename V::RequestType &r) {
    const bool point_failed = r.status != XMC_OK;
    for (size_t i = 0; i < r.slots.size(); ++i) {
        const auto &s = r.slots[i];
        if (point_failed) {
            // VMM-ASYNC-ERROR: its stream point failed: nothing is unmapped, the slot stays mapped
            // (it unmapped under a failed request before: the fault sweep caught it).
            s->release_status = r.status;
            s->release_native = r.native;
            release_ran(*s, r, true);
            continue;
        }
        if (int64_t native = v.ops.unmap(v, *s, true)) {
            // VMM-ASYNC-ERROR: the driver's code is the request's; the slot stays mapped.
            r.record(v.ops.status_of(native), native, driver_text(v, v.ops.unmap_call, *s, native) + batch_index(i));
            s->release_status = v.ops.status_of(native);
            s->release_native = native;
        }
        release_ran(*s, r, v.ops.mapped(*s));
        // AFF-PREPARED-FOLLOW: a transfer prepared over it refuses to run until it is remapped.
        if (!v.ops.mapped(*s)) book_slot_released(uintptr_t(s->addr));
    }
}

template <class V>
void run_remap(xmc_instance *inst, V &v, const std::shared_ptr<typename V::RequestType> &r) {
    size_t mapped = 0;
    const bool point_failed = r->status != XMC_OK;  // then nothing is mapped
    for (const auto &s : r->slots) {
        if (point_failed) break;
        // VMM-ASYNC-ERROR: a remap waiting on a failed release fails too.
        if (v.ops.mapped(*s)) {  // its release failed: the slot was never unmapped
            r->record(s->release_status, s->release_native,
                      "the release this remap waited for failed; the slot still holds its old mapping" +
                          batch_index(mapped));
            break;
        }
        if (int64_t native = v.ops.map(v, *s, true)) {
            r->record(v.ops.status_of(native), native,
                      driver_text(v, v.ops.map_call, *s, native) + batch_index(mapped));
            break;
        }
        ++mapped;
    }
    if (r->status != XMC_OK) {
        // VMM-ASYNC-ERROR: slots back to what the model says (slot_book.hpp).
        // Roll back every mapping this request made: none was adopted.
        for (size_t i = 0; i < mapped; ++i) v.ops.unmap(v, *r->slots[i], false);
        remap_failed(*r, v.ops.mapped);
        if (v.ops.undone) v.ops.undone(v, *r);
    } else {
        // AFF-PREPARED-FOLLOW: the same slot, a new backing (a transfer prepared over it follows).
        for (const auto &s : r->slots) book_slot_remapped(uintptr_t(s->addr));
    }
    if (r->status == XMC_OK && !r->defer) {
        for (size_t i = 0; i < r->slots.size(); ++i)
            if (xmc_status st = v.ops.copy(inst, v, r, i, r->stream, "slot_remap"); st != XMC_OK)
                r->record(st, 0, "the reload copy could not be enqueued: the remap's stream is gone" + batch_index(i));
    }
    for (const auto &s : r->slots) --s->jobs;
}

// A worker's run of request r (release or remap), under v.mu; marks it done.
template <class V>
void run_request(xmc_instance *inst, V &v, const std::shared_ptr<typename V::RequestType> &r) {
    if (r->remap) run_remap(inst, v, r);
    else run_release(v, *r);
    r->done = true;
    if (v.ops.ran) v.ops.ran(v, *r);
    v.announce();
}

// The default worker thread.
template <class V>
void worker_loop(xmc_instance *inst, V *v) {
    work(*v, [&](const std::shared_ptr<typename V::RequestType> &r) { run_request(inst, *v, r); });
}

template <class V>
void start_workers(xmc_instance *inst, V &v) {
    if (!v.threads.empty()) return;
    v.stop = false;  // a close that failed after stopping them keeps the instance open
    // VMM-SERIAL: vmm_workers threads (1: serial), running ready requests only.
    for (unsigned i = 0; i < v.workers; ++i) v.threads.emplace_back(v.ops.worker, inst, &v);
    if (v.ops.watcher) v.threads.emplace_back(v.ops.watcher, &v);
}

// ---- entry points -----------------------------------------------------------------------

template <class V>
xmc_status create_slot(xmc_instance *inst, V &v, int32_t device, size_t bytes, xmc_slot **out,
                       xmc_slot_info *info) {
    if (v.ops.available)
        if (xmc_status st = v.ops.available(inst, "slot_create"); st != XMC_OK) return st;
    if (!out || !info) return fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "slot_create", "slot_create: NULL result");
    auto s = std::make_shared<typename V::SlotType>();
    if (xmc_status st = v.ops.create(inst, device, bytes, *s); st != XMC_OK) return st;
    std::lock_guard<std::mutex> lock(v.mu);
    start_workers(inst, v);
    *out = add_slot(v, s);
    book_add(uintptr_t(s->addr), s->size, MemKind::Slot);
    *info = xmc_slot_info{reinterpret_cast<void *>(s->addr), s->size, s->device};
    return XMC_OK;
}

// VMM-STATE, VMM-BATCH, VMM-REMAP-COPY: the shared refusals (make_request).
// slot_release, slot_remap and their batches: every refusal before any change, in the model's
// order (arguments, handles, duplicates, sources, states), then the stream point.
template <class V>
xmc_status submit(xmc_instance *inst, const std::shared_ptr<V> &vp, const Batch &b) {
    if (vp->ops.available)
        if (xmc_status st = vp->ops.available(inst, b.call); st != XMC_OK) return st;
    if (xmc_status st = check_batch(inst, b); st != XMC_OK) return st;
    V &v = *vp;
    std::lock_guard<std::mutex> lock(v.mu);
    std::shared_ptr<typename V::RequestType> r;
    if (xmc_status st = make_request(inst, v, b, &r); st != XMC_OK) return st;
    // The stream: the one refusal known only now, before any change.
    if (xmc_status st = v.ops.enqueue_point(inst, b.call, b.stream, vp, r); st != XMC_OK) return st;
    commit(v, r, b.out);
    if (v.ops.committed) v.ops.committed(inst, v, r);
    return XMC_OK;
}

template <class V>
xmc_status launch_copy(xmc_instance *inst, V &v, xmc_request *h, uint32_t index, xmc_stream *s) {
    const char *call = "request_launch_copy";
    std::unique_lock<std::mutex> lock(v.mu);
    auto r = find_request(v, h);
    if (!r) return bad_request(inst, call, h);
    // VMM-DEFERRED: once per slot, after the remap, into its own mapping.
    if (xmc_status st = check_launch(inst, call, *r, index); st != XMC_OK) return st;
    if (v.ops.launch_check)
        if (xmc_status st = v.ops.launch_check(inst, v, *r, s); st != XMC_OK) return st;
    xmc_status st = claim_copy(inst, call, v, lock, *r, index, v.ops.claim);
    if (st == XMC_OK) st = check_target(inst, call, *r, index);
    if (st == XMC_OK) st = v.ops.copy(inst, v, r, index, s, call);
    if (v.ops.launched) v.ops.launched(v, *r, st);
    return st;
}

template <class V>
xmc_status wait_for(xmc_instance *inst, V &v, xmc_request *h, uint32_t timeout_ms) {
    if (v.ops.before_wait) v.ops.before_wait(v, h, timeout_ms);
    return wait_request(inst, v, h, timeout_ms);
}

template <class V>
xmc_status destroy_request(xmc_instance *inst, V &v, xmc_request *h) {
    std::unique_lock<std::mutex> lock(v.mu);
    auto r = find_request(v, h);
    if (!r) return bad_request(inst, "request_destroy", h);
    forget_request(v, lock, h, *r);
    // VMM-ADOPT: an adopted mapping is the slot's and stays. Never adopted: the request's
    // mapping goes with it (kept, as the slot's own, in the unlikely case the unmap fails).
    // An unmap that failed yet left nothing mapped (the memory kept for close) counts as gone.
    drop_unadopted(*r, [&](typename V::SlotType &s) {
        const bool gone = v.ops.unmap(v, s, false) == 0 || !v.ops.mapped(s);
        if (gone) book_slot_released(uintptr_t(s.addr));  // AFF-PREPARED-FOLLOW: no backing again
        return gone;
    });
    if (v.ops.destroyed) v.ops.destroyed(v, r);
    v.announce();
    return XMC_OK;
}

// Unmaps and frees a slot once no work on it is in flight (VMM-CLOSE). Caller holds v.mu; the
// slot has left the handle map. A driver failure stops it there and is returned, the slot still
// open with what is left, so that closing again finishes.
template <class V>
int64_t close_slot(V &v, std::unique_lock<std::mutex> &lock, typename V::SlotType &s, const char **what) {
    v.ops.close_wait(v, lock, s);
    if (int64_t native = v.ops.close_free(v, s, what)) return native;
    s.closed = true;
    book_remove(uintptr_t(s.addr), MemKind::Slot);
    v.announce();
    return 0;
}

template <class V>
xmc_status slot_close(xmc_instance *inst, V &v, xmc_slot *h) {
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<typename V::SlotType> s;
    if (xmc_status st = take_slot(inst, v, h, &s); st != XMC_OK) return st;
    const char *what = "";
    if (int64_t native = close_slot(v, lock, *s, &what)) {
        v.slots[h] = s;  // still open: a second close finishes
        return fail(inst, v.ops.status_of(native), native, "slot_close",
                    "slot_close: %s failed with %s; the slot is still open: closing it again finishes", what,
                    v.ops.native_name(native).c_str());
    }
    return XMC_OK;
}

// Before the instance goes: closes every slot and stops the workers; how many slots it closed.
// A driver failure returns at once (in *failed, *what), with what is left kept for a retry.
template <class V>
size_t close_slots(V &v, int64_t *failed, const char **what) {
    std::unique_lock<std::mutex> lock(v.mu);
    size_t closed = 0;
    *failed = 0;
    while (!v.slots.empty()) {
        auto it = v.slots.begin();
        auto s = it->second;
        xmc_slot *const h = it->first;
        v.slots.erase(it);
        if (int64_t native = close_slot(v, lock, *s, what)) {
            v.slots[h] = s;
            *failed = native;
            return closed;
        }
        ++closed;
    }
    stop_threads(v, lock);
    v.threads.clear();  // joined: a close retried after a failure below joins none twice
    return closed;
}

// graph_begin's guard: busy while a remap on s has reload copies still to enqueue.
template <class V, class F>
xmc_status before_capture(xmc_instance *inst, V &v, xmc_stream *s, const F &begin) {
    std::lock_guard<std::mutex> lock(v.mu);
    if (copies_to_enqueue_on(v, s))
        return fail(inst, XMC_ERR_BUSY, 0, "graph_begin",
                    "graph_begin: a remap on this stream has not enqueued its reload copies yet (wait for it first)");
    return begin();
}

} // namespace xmc::be

// A platform's slot entry points that are the same on every platform, over its book
// (`vmm_ptr(inst)`: the instance's std::shared_ptr<V>).
#define XMC_SLOT_ENTRIES(vmm_ptr)                                                                         \
    xmc_status slot_create(xmc_instance *inst, int32_t device, size_t bytes, xmc_slot **out,              \
                           xmc_slot_info *info) {                                                         \
        return ::xmc::be::create_slot(inst, *vmm_ptr(inst), device, bytes, out, info);                    \
    }                                                                                                     \
    /* slot_release, slot_remap and their batches: one submit each (a release has no sources) */        \
    xmc_status slot_release(xmc_instance *inst, xmc_slot *slot, xmc_stream *s, xmc_request **out) {       \
        return ::xmc::be::submit(inst, vmm_ptr(inst),                                                     \
                                 {"slot_release", false, &slot, 1, s, nullptr, nullptr, 0, out});         \
    }                                                                                                     \
    xmc_status slot_remap(xmc_instance *inst, xmc_slot *slot, xmc_stream *s, const void *src, size_t bytes, \
                          uint32_t flags, xmc_request **out) {                                            \
        return ::xmc::be::submit(inst, vmm_ptr(inst),                                                     \
                                 {"slot_remap", true, &slot, 1, s, &src, &bytes, flags, out});            \
    }                                                                                                     \
    xmc_status slot_release_batch(xmc_instance *inst, xmc_slot *const *slots, size_t n, xmc_stream *s,    \
                                  xmc_request **out) {                                                    \
        return ::xmc::be::submit(inst, vmm_ptr(inst),                                                     \
                                 {"slot_release_batch", false, slots, n, s, nullptr, nullptr, 0, out});   \
    }                                                                                                     \
    xmc_status slot_remap_batch(xmc_instance *inst, xmc_slot *const *slots, size_t n, xmc_stream *s,      \
                                const void *const *srcs, const size_t *bytes, uint32_t flags,             \
                                xmc_request **out) {                                                      \
        return ::xmc::be::submit(inst, vmm_ptr(inst),                                                     \
                                 {"slot_remap_batch", true, slots, n, s, srcs, bytes, flags, out});       \
    }                                                                                                     \
    xmc_status request_launch_copy(xmc_instance *inst, xmc_request *h, uint32_t index, xmc_stream *s) {   \
        return ::xmc::be::launch_copy(inst, *vmm_ptr(inst), h, index, s);                                 \
    }                                                                                                     \
    xmc_status request_wait(xmc_instance *inst, xmc_request *h, uint32_t timeout_ms) {                    \
        return ::xmc::be::wait_for(inst, *vmm_ptr(inst), h, timeout_ms);                                    \
    }                                                                                                     \
    xmc_status request_adopt(xmc_instance *inst, xmc_request *h) {                                        \
        return ::xmc::be::adopt_request(inst, *vmm_ptr(inst), h);                                         \
    }                                                                                                     \
    xmc_status request_query(xmc_instance *inst, xmc_request *h, xmc_request_info *out) {                 \
        return ::xmc::be::query_request(inst, *vmm_ptr(inst), h, out);                                    \
    }                                                                                                     \
    xmc_status request_destroy(xmc_instance *inst, xmc_request *h) {                                      \
        return ::xmc::be::destroy_request(inst, *vmm_ptr(inst), h);                                       \
    }                                                                                                     \
    xmc_status slot_close(xmc_instance *inst, xmc_slot *h) {                                              \
        return ::xmc::be::slot_close(inst, *vmm_ptr(inst), h);                                            \
    }                                                                                                     \
    xmc_status vmm_before_capture(xmc_instance *inst, xmc_stream *s,                                      \
                                  const std::function<xmc_status()> &begin) {                             \
        return ::xmc::be::before_capture(inst, *vmm_ptr(inst), s, begin);                                 \
    }                                                                                                     \
    xmc_status vmm_copy_check(xmc_instance *inst, const ::xmc::be::CopySpan(&spans)[2]) {                \
        auto vp = vmm_ptr(inst);                                                                          \
        if (!vp) return XMC_OK;                                                                           \
        const uintptr_t first[2] = {spans[0].first, spans[1].first}, last[2] = {spans[0].last, spans[1].last}; \
        return ::xmc::be::check_copy_slots(inst, *vp, first, last, vp->ops.mapped);                       \
    }
