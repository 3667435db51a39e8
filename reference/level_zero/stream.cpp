// Streams through Level Zero (capability `stream`, COPY-ORDER). A stream is an
// immediate command list of its device, in order, in the device's own
// context; appends to it are serialised (a command list is not thread-safe).
//   - synchronize: append a signal of the stream's own event and wait for it
//     on the host (the Debian loader has no zeCommandListHostSynchronize);
//   - events: one event of a host-visible pool each; the first record resets
//     it and appends a signal; each later record takes a fresh event of its
//     own and keeps the old one until event_destroy (COPY-REUSE: resetting the
//     one event let a wait appended after a re-record see the previous record's
//     signal, or lose it, so a pinned buffer was overwritten while another
//     stream's copy still read it); wait = append a wait on the event of the
//     latest record; an event never recorded is complete (as in CUDA);
//   - host callbacks: Level Zero has none. The list signals `reached`, then
//     waits for `done`; the stream's callback thread waits for `reached`,
//     calls the function and signals `done`. The function runs on that
//     backend thread and the driver is never called from inside it
//     (VMM-CALLBACK); work enqueued after the callback waits for it to return.
//     Its two events are destroyed by the next synchronize that passes it.
// Device memory: zeMemAllocDevice in the device's context, freed in the same.
// Capture (capability `graph`, graph.cpp): while a stream captures, its copies
// and host callbacks are appended to the graph's regular list (append_target)
// and its callbacks kept by the graph; every other call naming it is refused.
#include "ze.hpp"

#include <new>

namespace xmc::ze {

static Instance *as_ze(xmc_instance *inst) { return static_cast<Instance *>(inst); }

// Checks every stream entry point shares: the driver, its stream entry
// points, and the device index.
static xmc_status ready(xmc_instance *inst, int32_t device, const char *call) {
    if (xmc_status st = require(inst, call, Driver::get().missing_stream); st != XMC_OK) return st;
    return check_device(inst, device, call);
}

// A stream or event whose destroy failed part-way (its list or event already
// gone) is no longer live: only stream_destroy / event_destroy (and close)
// still find it, to finish the job.
std::shared_ptr<Stream> find_stream(xmc_instance *inst, xmc_stream *handle) {
    Instance *in = as_ze(inst);
    std::lock_guard<std::mutex> lock(in->mu);
    auto it = in->streams.find(handle);
    return it == in->streams.end() || !it->second->list ? nullptr : it->second;
}

static std::shared_ptr<Event> find_event(xmc_instance *inst, xmc_event *handle) {
    Instance *in = as_ze(inst);
    std::lock_guard<std::mutex> lock(in->mu);
    auto it = in->events.find(handle);
    return it == in->events.end() || !it->second->event ? nullptr : it->second;
}

using be::bad_event;
using be::bad_stream;

bool capturing(Stream &s) {
    std::lock_guard<std::mutex> lock(s.append_mu);
    return s.capture != nullptr;
}


// A host-visible pool of `n` events in ctx, and its events.
ze_result_t make_events(ze_context_handle_t ctx, uint32_t n, ze_event_pool_handle_t *pool,
                        ze_event_handle_t *events) {
    Driver &d = Driver::get();
    ze_event_pool_desc_t pd{ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, nullptr, ZE_EVENT_POOL_FLAG_HOST_VISIBLE, n};
    if (ze_result_t r = d.zeEventPoolCreate(ctx, &pd, 0, nullptr, pool); r != ZE_RESULT_SUCCESS) return r;
    for (uint32_t i = 0; i < n; ++i) {
        ze_event_desc_t ed{ZE_STRUCTURE_TYPE_EVENT_DESC, nullptr, i, ZE_EVENT_SCOPE_FLAG_HOST, ZE_EVENT_SCOPE_FLAG_HOST};
        if (ze_result_t r = d.zeEventCreate(*pool, &ed, &events[i]); r != ZE_RESULT_SUCCESS) {
            while (i > 0) d.zeEventDestroy(events[--i]);
            d.zeEventPoolDestroy(*pool);
            return r;
        }
    }
    return ZE_RESULT_SUCCESS;
}

// Destroys the events, then their pool, clearing each handle the driver
// destroyed. Stops at the first failure: what is left keeps its handle, so
// that calling again finishes the job (and the pool outlives its events).
ze_result_t destroy_events(ze_event_pool_handle_t *pool, ze_event_handle_t *events, uint32_t n) {
    Driver &d = Driver::get();
    for (uint32_t i = 0; i < n; ++i) {
        if (!events[i]) continue;
        if (ze_result_t r = d.zeEventDestroy(events[i]); r != ZE_RESULT_SUCCESS) return r;
        events[i] = nullptr;
    }
    if (*pool) {
        if (ze_result_t r = d.zeEventPoolDestroy(*pool); r != ZE_RESULT_SUCCESS) return r;
        *pool = nullptr;
    }
    return ZE_RESULT_SUCCESS;
}

// The callback thread of one stream: runs its callbacks in order.
static void run_callbacks(Stream *s) {
    Driver &d = Driver::get();
    for (;;) {
        Callback *cb = nullptr;
        {
            std::unique_lock<std::mutex> lock(s->cb_mu);
            s->cb_cv.wait(lock, [&] { return s->stop || !s->queue.empty(); });
            if (s->queue.empty()) return;  // stopping, and nothing left
            cb = s->queue.front();
            s->queue.pop_front();
        }
        // A failed wait (the stream hit a device fault) skips the function but
        // still releases the work behind it. Both are tried again first: a wait
        // that failed once skipped a slot request's stream point, which then
        // never ran, and a `done` whose signal failed held the stream for good
        // (both hangs the fault sweep found).
        constexpr int kTries = 3;
        ze_result_t waited = ZE_RESULT_ERROR_UNKNOWN;
        for (int t = 0; t < kTries && waited != ZE_RESULT_SUCCESS; ++t)
            waited = d.zeEventHostSynchronize(cb->reached, UINT64_MAX);
        if (waited == ZE_RESULT_SUCCESS && cb->fn) cb->fn(cb->user);
        // Done with *cb before the signal: the signal may release its owner, who then frees it
        // (graph_destroy after the launch: ASan saw this thread write `finished` into a freed
        // graph callback). A stream's own callbacks are reclaimed only after a later
        // synchronize, which the signal must come first for.
        const ze_event_handle_t done = cb->done;
        {
            std::lock_guard<std::mutex> lock(s->cb_mu);
            cb->finished = true;
        }
        for (int t = 0; t < kTries && d.zeEventHostSignal(done) != ZE_RESULT_SUCCESS; ++t) {
        }
    }
}

// Destroys the events of callbacks enqueued before `seq`: the list has passed
// their waits once a synchronize appended after them completed. A callback
// whose events the driver failed to destroy keeps what is left, and the next
// reclaim (synchronize, stream_destroy) tries again.
static ze_result_t reclaim_callbacks(Stream &s, uint64_t seq) {
    std::lock_guard<std::mutex> lock(s.cb_mu);
    for (auto it = s.callbacks.begin(); it != s.callbacks.end();) {
        Callback &cb = **it;
        // Not before this thread is done with it: a callback whose wait could not be appended is
        // not waited for by the list, and freeing it while still queued ran the next callback
        // made at its address twice (a use after free the fault sweep crashed on).
        if (cb.seq >= seq || !cb.finished) {
            ++it;
            continue;
        }
        ze_event_handle_t ev[2] = {cb.reached, cb.done};
        const ze_result_t r = destroy_events(&cb.pool, ev, 2);
        cb.reached = ev[0];
        cb.done = ev[1];
        if (r != ZE_RESULT_SUCCESS) return r;
        it = s.callbacks.erase(it);
    }
    return ZE_RESULT_SUCCESS;
}

// Waits for everything enqueued on `s` so far, then reclaims the callbacks
// it passed. A failure returns the driver's code with the failed call in *what.
static ze_result_t synchronize(Stream &s, const char **what) {
    Driver &d = Driver::get();
    std::lock_guard<std::mutex> sync(s.sync_mu);
    uint64_t seq = 0;
    {
        std::lock_guard<std::mutex> lock(s.append_mu);
        *what = "zeEventHostReset";
        if (ze_result_t r = d.zeEventHostReset(s.sync_event); r != ZE_RESULT_SUCCESS) return r;
        *what = "zeCommandListAppendSignalEvent";
        if (ze_result_t r = d.zeCommandListAppendSignalEvent(s.list, s.sync_event); r != ZE_RESULT_SUCCESS) return r;
        seq = s.next_seq;
    }
    *what = "zeEventHostSynchronize";
    if (ze_result_t r = d.zeEventHostSynchronize(s.sync_event, UINT64_MAX); r != ZE_RESULT_SUCCESS) return r;
    // The work is done; a callback event the driver keeps is still a failure
    // to report (never success over a driver failure).
    *what = "zeEventDestroy/zeEventPoolDestroy of a host callback's events";
    return reclaim_callbacks(s, seq);
}

// Destroys the stream's driver objects in order, clearing each handle once the
// driver destroyed it, and stops at the first failure (returned, with the
// failed call in *what): the stream keeps what is left, so that destroying it
// again finishes the job.
//   1. its work is waited for: a failed wait keeps the whole stream, usable;
//   2. its command list is destroyed: a failure keeps it usable too;
//   3. its callback thread is stopped (after 1 it has nothing left to run);
//   4. the events of its callbacks, then its own event and their pools.
// Once its list is gone the stream takes no new work (find_stream refuses it).
// `in` is the stream's instance, whose mu must not be held.
static ze_result_t destroy_stream(Instance &in, Stream &s, const char **what) {
    Driver &d = Driver::get();
    if (s.list) {
        if (ze_result_t r = synchronize(s, what); r != ZE_RESULT_SUCCESS) return r;
        *what = "zeCommandListDestroy";
        if (ze_result_t r = d.zeCommandListDestroy(s.list); r != ZE_RESULT_SUCCESS) return r;
        std::lock_guard<std::mutex> lock(in.mu);
        s.list = nullptr;
    }
    {
        std::lock_guard<std::mutex> lock(s.cb_mu);
        s.stop = true;
    }
    s.cb_cv.notify_all();
    if (s.worker.joinable()) s.worker.join();
    // The list is gone: nothing waits on these events any more.
    *what = "zeEventDestroy/zeEventPoolDestroy of a host callback's events";
    if (ze_result_t r = reclaim_callbacks(s, UINT64_MAX); r != ZE_RESULT_SUCCESS) return r;
    *what = "zeEventDestroy/zeEventPoolDestroy of the stream's own event";
    return destroy_events(&s.sync_pool, &s.sync_event, 1);
}

// Destroys an event, then its pool, clearing each handle once the driver
// destroyed it; a failure (returned, with the failed call in *what) keeps the
// rest, so that destroying it again finishes the job. Once its event is gone
// it can no longer be used (find_event refuses it). `in` is the event's
// instance, whose mu must not be held.
static ze_result_t destroy_event(Instance &in, Event &e, const char **what) {
    Driver &d = Driver::get();
    for (;;) {
        std::pair<ze_event_pool_handle_t, ze_event_handle_t> old{};
        {
            std::lock_guard<std::mutex> lock(in.mu);
            if (e.retired.empty()) break;
            old = e.retired.back();
        }
        *what = "zeEventDestroy/zeEventPoolDestroy of an earlier record's event";
        if (ze_result_t r = destroy_events(&old.first, &old.second, 1); r != ZE_RESULT_SUCCESS) {
            std::lock_guard<std::mutex> lock(in.mu);
            e.retired.back() = old;  // what is left of it, for the retry
            return r;
        }
        std::lock_guard<std::mutex> lock(in.mu);
        e.retired.pop_back();
    }
    if (e.event) {
        *what = "zeEventDestroy";
        if (ze_result_t r = d.zeEventDestroy(e.event); r != ZE_RESULT_SUCCESS) return r;
        std::lock_guard<std::mutex> lock(in.mu);
        e.event = nullptr;
    }
    if (e.pool) {
        *what = "zeEventPoolDestroy";
        if (ze_result_t r = d.zeEventPoolDestroy(e.pool); r != ZE_RESULT_SUCCESS) return r;
        e.pool = nullptr;
    }
    return ZE_RESULT_SUCCESS;
}

// Deleted by a close whose release_all succeeded: nothing is left to release.
Instance::~Instance() = default;

ze_result_t Instance::release_all(const char **what) {
    // close: no other call is in flight; what the user left is released here
    // so nothing stays in the driver. Each object leaves the maps only once
    // the driver destroyed all of it.
    Driver &d = Driver::get();
    while (!streams.empty()) {
        auto it = streams.begin();
        if (ze_result_t r = destroy_stream(*this, *it->second, what); r != ZE_RESULT_SUCCESS) return r;
        be::free_cookie(it->first);
        streams.erase(it);
    }
    while (!events.empty()) {
        auto it = events.begin();
        if (ze_result_t r = destroy_event(*this, *it->second, what); r != ZE_RESULT_SUCCESS) return r;
        be::free_cookie(it->first);
        events.erase(it);
    }
    while (!dev_allocs.empty()) {
        auto it = dev_allocs.begin();
        *what = "zeMemFree";
        if (ze_result_t r = d.zeMemFree(it->second.ctx, reinterpret_cast<void *>(it->first)); r != ZE_RESULT_SUCCESS)
            return r;
        dev_allocs.erase(it);
    }
    return ZE_RESULT_SUCCESS;
}

static xmc_status create_stream(xmc_instance *inst, int32_t device, xmc_stream **out) {
    auto s = std::make_shared<Stream>();
    s->device = device;
    if (xmc_status st = device_context(inst, "stream_create", device, &s->ctx); st != XMC_OK) return st;
    Driver &d = Driver::get();
    // COPY-ORDER: all of a stream's work goes to this one immediate list.
    // Ordinal 0: the first queue group, which copies (compute groups do too).
    ze_command_queue_desc_t qd{ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0,
                               ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS, ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
    if (ze_result_t r = d.zeCommandListCreateImmediate(s->ctx, d.devices[static_cast<size_t>(device)].handle, &qd,
                                                       &s->list);
        r != ZE_RESULT_SUCCESS)
        return driver_fail(inst, r, "stream_create", "zeCommandListCreateImmediate");
    if (ze_result_t r = make_events(s->ctx, 1, &s->sync_pool, &s->sync_event); r != ZE_RESULT_SUCCESS) {
        // Undone; the failure reported is the one that stopped the creation.
        d.zeCommandListDestroy(s->list);
        return driver_fail(inst, r, "stream_create", "zeEventPoolCreate/zeEventCreate");
    }
    s->worker = std::thread(run_callbacks, s.get());
    xmc_stream *h = be::new_cookie<xmc_stream>();
    std::lock_guard<std::mutex> lock(as_ze(inst)->mu);
    as_ze(inst)->streams[h] = s;
    *out = h;
    return XMC_OK;
}

xmc_status stream_destroy(xmc_instance *inst, xmc_stream *handle) {
    Instance *in = as_ze(inst);
    std::shared_ptr<Stream> s;
    {
        // Not find_stream: a stream whose last destroy failed part-way is
        // found here, so that this one finishes the job.
        std::lock_guard<std::mutex> lock(in->mu);
        auto it = in->streams.find(handle);
        if (it == in->streams.end()) return bad_stream(inst, "stream_destroy", handle);
        s = it->second;
    }
    if (capturing(*s)) return refuse_capturing(inst, "stream_destroy");
    const char *what = "";
    if (ze_result_t r = destroy_stream(*in, *s, &what); r != ZE_RESULT_SUCCESS)
        return driver_fail(inst, r, "stream_destroy", what);  // kept: the caller may retry
    std::lock_guard<std::mutex> lock(in->mu);
    in->streams.erase(handle);
    be::free_cookie(handle);
    return XMC_OK;
}

xmc_status stream_synchronize(xmc_instance *inst, xmc_stream *handle) {
    std::shared_ptr<Stream> s = find_stream(inst, handle);
    if (!s) return bad_stream(inst, "stream_synchronize", handle);
    // GRAPH-CAPTURE: the captured work runs only when launched.
    if (capturing(*s)) return refuse_capturing(inst, "stream_synchronize");
    const char *what = "";
    if (ze_result_t r = synchronize(*s, &what); r != ZE_RESULT_SUCCESS)
        return driver_fail(inst, r, "stream_synchronize", what);
    return XMC_OK;
}

static xmc_status create_event(xmc_instance *inst, int32_t device, xmc_event **out) {
    auto e = std::make_shared<Event>();
    e->device = device;
    ze_context_handle_t ctx = nullptr;
    if (xmc_status st = device_context(inst, "event_create", device, &ctx); st != XMC_OK) return st;
    if (ze_result_t r = make_events(ctx, 1, &e->pool, &e->event); r != ZE_RESULT_SUCCESS)
        return driver_fail(inst, r, "event_create", "zeEventPoolCreate/zeEventCreate");
    xmc_event *h = be::new_cookie<xmc_event>();
    std::lock_guard<std::mutex> lock(as_ze(inst)->mu);
    as_ze(inst)->events[h] = e;
    *out = h;
    return XMC_OK;
}

xmc_status event_destroy(xmc_instance *inst, xmc_event *handle) {
    Instance *in = as_ze(inst);
    std::shared_ptr<Event> e;
    {
        // Not find_event: an event whose last destroy failed part-way is
        // found here, so that this one finishes the job.
        std::lock_guard<std::mutex> lock(in->mu);
        auto it = in->events.find(handle);
        if (it == in->events.end()) return bad_event(inst, "event_destroy", handle);
        e = it->second;
    }
    const char *what = "";
    if (ze_result_t r = destroy_event(*in, *e, &what); r != ZE_RESULT_SUCCESS)
        return driver_fail(inst, r, "event_destroy", what);  // kept: the caller may retry
    std::lock_guard<std::mutex> lock(in->mu);
    in->events.erase(handle);
    be::free_cookie(handle);
    return XMC_OK;
}

xmc_status event_record(xmc_instance *inst, xmc_event *eh, xmc_stream *sh) {
    std::shared_ptr<Event> e = find_event(inst, eh);
    if (!e) return bad_event(inst, "event_record", eh);
    std::shared_ptr<Stream> s = find_stream(inst, sh);
    if (!s) return bad_stream(inst, "event_record", sh);
    // The event's pool lives in its device's context; the list signals only
    // events of its own context.
    if (e->device != s->device)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "event_record",
                        "event_record: event of device %d recorded on a stream of device %d", e->device, s->device);
    Driver &d = Driver::get();
    Instance *in = as_ze(inst);
    bool first = false;
    {
        std::lock_guard<std::mutex> il(in->mu);
        first = !e->recorded;
    }
    if (first) {
        std::lock_guard<std::mutex> lock(s->append_mu);
        if (s->capture) return refuse_capturing(inst, "event_record");
        if (ze_result_t r = d.zeEventHostReset(e->event); r != ZE_RESULT_SUCCESS)
            return driver_fail(inst, r, "event_record", "zeEventHostReset");
        if (ze_result_t r = d.zeCommandListAppendSignalEvent(s->list, e->event); r != ZE_RESULT_SUCCESS)
            return driver_fail(inst, r, "event_record", "zeCommandListAppendSignalEvent");
        std::lock_guard<std::mutex> il(in->mu);
        e->recorded = true;
        return XMC_OK;
    }
    // A record after the first: a fresh event, so that the waits appended for
    // the previous record keep waiting for that record's signal, and a wait
    // appended from now on never sees it.
    ze_context_handle_t ctx = nullptr;
    if (xmc_status st = device_context(inst, "event_record", e->device, &ctx); st != XMC_OK) return st;
    ze_event_pool_handle_t pool = nullptr;
    ze_event_handle_t fresh = nullptr;
    if (ze_result_t r = make_events(ctx, 1, &pool, &fresh); r != ZE_RESULT_SUCCESS)
        return driver_fail(inst, r, "event_record", "zeEventPoolCreate/zeEventCreate");
    std::lock_guard<std::mutex> lock(s->append_mu);
    if (s->capture) {
        destroy_events(&pool, &fresh, 1);
        return refuse_capturing(inst, "event_record");
    }
    if (ze_result_t r = d.zeCommandListAppendSignalEvent(s->list, fresh); r != ZE_RESULT_SUCCESS) {
        destroy_events(&pool, &fresh, 1);  // nothing changed: the previous record stays the latest
        return driver_fail(inst, r, "event_record", "zeCommandListAppendSignalEvent");
    }
    std::lock_guard<std::mutex> il(in->mu);
    e->retired.emplace_back(e->pool, e->event);
    e->pool = pool;
    e->event = fresh;
    return XMC_OK;
}

xmc_status event_synchronize(xmc_instance *inst, xmc_event *eh) {
    std::shared_ptr<Event> e = find_event(inst, eh);
    if (!e) return bad_event(inst, "event_synchronize", eh);
    ze_event_handle_t ev = nullptr;
    {
        std::lock_guard<std::mutex> lock(as_ze(inst)->mu);
        if (!e->recorded) return XMC_OK;
        ev = e->event;  // the latest record's
    }
    ze_result_t r = Driver::get().zeEventHostSynchronize(ev, UINT64_MAX);
    return r == ZE_RESULT_SUCCESS ? XMC_OK : driver_fail(inst, r, "event_synchronize", "zeEventHostSynchronize");
}

xmc_status stream_wait_event(xmc_instance *inst, xmc_stream *sh, xmc_event *eh) {
    std::shared_ptr<Event> e = find_event(inst, eh);
    if (!e) return bad_event(inst, "stream_wait_event", eh);
    std::shared_ptr<Stream> s = find_stream(inst, sh);
    if (!s) return bad_stream(inst, "stream_wait_event", sh);
    if (capturing(*s)) return refuse_capturing(inst, "stream_wait_event");
    ze_event_handle_t ev = nullptr;
    {
        std::lock_guard<std::mutex> lock(as_ze(inst)->mu);
        if (!e->recorded) return XMC_OK;  // nothing to wait for
        ev = e->event;                    // the latest record's
    }
    std::lock_guard<std::mutex> lock(s->append_mu);
    if (s->capture) return refuse_capturing(inst, "stream_wait_event");
    // COPY-ORDER: events order work across streams: the list waits for the signal.
    ze_result_t r = Driver::get().zeCommandListAppendWaitOnEvents(s->list, 1, &ev);
    return r == ZE_RESULT_SUCCESS ? XMC_OK : driver_fail(inst, r, "stream_wait_event", "zeCommandListAppendWaitOnEvents");
}

static xmc_status callback_step(xmc_instance *inst, xmc_stream *sh, xmc_host_fn fn, void *user) {
    std::shared_ptr<Stream> s = find_stream(inst, sh);
    if (!s) return bad_stream(inst, "host_callback", sh);
    return enqueue_callback(inst, *s, fn, user, "host_callback");
}

xmc_status enqueue_callback(xmc_instance *inst, Stream &stream, xmc_host_fn fn, void *user, const char *call) {
    Stream *s = &stream;  // host_callback's body, unchanged
    auto cb = std::make_unique<Callback>();
    cb->fn = fn;
    cb->user = user;
    ze_event_handle_t ev[2] = {nullptr, nullptr};
    if (ze_result_t r = make_events(s->ctx, 2, &cb->pool, ev); r != ZE_RESULT_SUCCESS)
        return driver_fail(inst, r, call, "zeEventPoolCreate/zeEventCreate");
    cb->reached = ev[0];
    cb->done = ev[1];
    Driver &d = Driver::get();
    std::lock_guard<std::mutex> lock(s->append_mu);
    if (s->capture) {
        // GRAPH-CAPTURE: recorded into the graph's list; the graph keeps the
        // callback and hands it to the launching stream's thread each launch.
        ze_result_t r = d.zeCommandListAppendSignalEvent(s->capture->list, cb->reached);
        if (r == ZE_RESULT_SUCCESS) r = d.zeCommandListAppendWaitOnEvents(s->capture->list, 1, &cb->done);
        if (r != ZE_RESULT_SUCCESS) {
            // The list holds part of it: the capture cannot give a graph that runs it whole.
            (void)destroy_events(&cb->pool, ev, 2);
            return driver_fail(inst, r, call, "zeCommandListAppendSignalEvent/zeCommandListAppendWaitOnEvents");
        }
        s->capture->callbacks.push_back(std::move(cb));
        return XMC_OK;
    }
    if (ze_result_t r = d.zeCommandListAppendSignalEvent(s->list, cb->reached); r != ZE_RESULT_SUCCESS) {
        // Never enqueued: undone; the failure reported is the append's.
        (void)destroy_events(&cb->pool, ev, 2);
        return driver_fail(inst, r, call, "zeCommandListAppendSignalEvent");
    }
    const ze_result_t waited = d.zeCommandListAppendWaitOnEvents(s->list, 1, &cb->done);
    // `reached` is enqueued either way, so the thread must see the record; if
    // the wait could not be appended, later work would not wait for the
    // function: it is not run, and the failure is reported.
    if (waited != ZE_RESULT_SUCCESS) cb->fn = nullptr;
    cb->seq = s->next_seq++;
    {
        std::lock_guard<std::mutex> cl(s->cb_mu);
        s->queue.push_back(cb.get());
        s->callbacks.push_back(std::move(cb));
    }
    s->cb_cv.notify_all();
    return waited == ZE_RESULT_SUCCESS ? XMC_OK : driver_fail(inst, waited, call, "zeCommandListAppendWaitOnEvents");
}

static xmc_status alloc_device(xmc_instance *inst, int32_t device, size_t bytes, void **out) {
    DevAlloc a;
    a.device = device;
    if (xmc_status st = device_context(inst, "dev_alloc", device, &a.ctx); st != XMC_OK) return st;
    Driver &d = Driver::get();
    ze_device_mem_alloc_desc_t desc{ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
    void *p = nullptr;
    const ze_result_t r = d.zeMemAllocDevice(a.ctx, &desc, bytes, 0, d.devices[static_cast<size_t>(device)].handle, &p);
    // UNSUPPORTED_SIZE: more than the device's maxMemAllocSize, memory that cannot be had, as for cuMemAlloc.
    if (r == ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY || r == ZE_RESULT_ERROR_UNSUPPORTED_SIZE)
        return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, r, "dev_alloc",
                        "dev_alloc: zeMemAllocDevice of %zu bytes on device %d: out of device memory (%s)", bytes,
                        device, r == ZE_RESULT_ERROR_UNSUPPORTED_SIZE ? "more than its maximum allocation" : "exhausted");
    if (r != ZE_RESULT_SUCCESS) return driver_fail(inst, r, "dev_alloc", "zeMemAllocDevice");
    std::lock_guard<std::mutex> lock(as_ze(inst)->mu);
    as_ze(inst)->dev_allocs[reinterpret_cast<uintptr_t>(p)] = a;
    *out = p;
    return XMC_OK;
}

xmc_status dev_free(xmc_instance *inst, void *ptr) {
    Instance *in = as_ze(inst);
    std::lock_guard<std::mutex> lock(in->mu);
    auto it = in->dev_allocs.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == in->dev_allocs.end())
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "dev_free",
                        "dev_free: %p is not a base that dev_alloc of this instance returned", ptr);
    const ze_result_t r = Driver::get().zeMemFree(it->second.ctx, ptr);
    if (r != ZE_RESULT_SUCCESS) return driver_fail(inst, r, "dev_free", "zeMemFree");  // still tracked
    in->dev_allocs.erase(it);
    be::book_remove(reinterpret_cast<uintptr_t>(ptr), be::MemKind::Device);
    return XMC_OK;
}

static xmc_status ready_copy(xmc_instance *inst) { return require(inst, "copy", Driver::get().missing_copy); }
static int32_t devices() { return static_cast<int32_t>(Driver::get().devices.size()); }
static bool live_stream(xmc_instance *inst, xmc_stream *h) { return find_stream(inst, h) != nullptr; }

XMC_STREAM_OPS(ready, ready_copy, devices, live_stream, vmm_copy_check,
               enqueue_copy, create_stream, create_event, alloc_device, callback_step)

} // namespace xmc::ze
