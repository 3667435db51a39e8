// Streams on the host (capability `stream`, COPY-ORDER): one worker thread per
// stream runs its operations strictly in the order they were enqueued.
// Events count generations: a record enqueued on a stream issues generation
// g and completes it when the stream reaches it; a wait captures the
// generation issued at the time of the call and blocks its stream until that
// generation completes (an event never recorded is complete, as in CUDA).
// Device memory is host memory standing in for device 0's.
// Capture (capability `graph`, GRAPH-CAPTURE): while a stream records, the ops
// of its copies and host callbacks go into its recording instead of its queue;
// every other op is refused (enqueue), so nothing that cannot be replayed is
// ever recorded.
#include "host.hpp"

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <thread>

namespace xmc::host {

struct Stream {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> queue;
    uint64_t enqueued = 0;  // operations ever enqueued
    uint64_t finished = 0;  // operations that have run, in order
    std::unique_ptr<Recording> capture;  // non-null while the stream records (graph.cpp)
    bool stop = false;
    std::thread worker;

    void run() {
        std::unique_lock<std::mutex> lock(mu);
        for (;;) {
            cv.wait(lock, [&] { return stop || !queue.empty(); });
            if (queue.empty()) return;  // stop with nothing left: drained
            // COPY-ORDER: one worker runs the operations in enqueue order.
            std::function<void()> op = std::move(queue.front());
            queue.pop_front();
            lock.unlock();  // an operation may block (a wait, a sleeping callback)
            op();
            lock.lock();
            ++finished;
            cv.notify_all();
        }
    }
};

struct Event {
    std::mutex mu;
    std::condition_variable cv;
    uint64_t issued = 0;     // generations issued by event_record
    uint64_t completed = 0;  // highest generation whose record has run
};

Instance::Instance() = default;

void Instance::stop_streams() {
    // close: no other call is in flight (backend.h); work still queued runs
    // to the end so that no callback is dropped silently.
    for (auto &[handle, s] : streams) {
        {
            std::lock_guard<std::mutex> lock(s->mu);
            s->stop = true;
        }
        s->cv.notify_all();
        s->worker.join();
    }
    streams.clear();
}

Instance::~Instance() {
    stop_streams();
    for (auto &[base, bytes] : dev_allocs) std::free(reinterpret_cast<void *>(base));
}

static Instance *as_host(xmc_instance *inst) { return static_cast<Instance *>(inst); }

// The live stream behind a handle, or nullptr (a stale or foreign handle is
// never dereferenced).
static Stream *find_stream(Instance *in, xmc_stream *s) {
    std::lock_guard<std::mutex> lock(in->mu);
    auto it = in->streams.find(s);
    return it == in->streams.end() ? nullptr : it->second.get();
}

static std::shared_ptr<Event> find_event(Instance *in, xmc_event *e) {
    std::lock_guard<std::mutex> lock(in->mu);
    auto it = in->events.find(e);
    return it == in->events.end() ? nullptr : it->second;
}

static xmc_status check_device(xmc_instance *inst, int32_t device, const char *call) {
    if (device != 0)
        return be::fail(inst, XMC_ERR_NO_DEVICE, 0, call, "%s: no device %d (the host backend has device 0 only)",
                        call, device);
    return XMC_OK;
}

using be::bad_event;
using be::bad_stream;

// VMM-GRAPH-ORDER, GRAPH-CAPTURE: a call that may not join a capture, refused with nothing changed.
static xmc_status refuse_capturing(xmc_instance *inst, const char *call) {
    return be::fail(inst, XMC_ERR_CAPTURING, 0, call,
                    "%s: the stream is capturing a graph (graph_begin), which this call may not join", call);
}

// Appends op to s, or records it while s captures and `record` allows it.
static xmc_status push(xmc_instance *inst, xmc_stream *handle, const char *call, std::function<void()> op,
                       bool record) {
    Stream *s = inst ? find_stream(as_host(inst), handle) : nullptr;
    if (!s) return bad_stream(inst, call, handle);
    {
        std::lock_guard<std::mutex> lock(s->mu);
        if (s->capture && !record) return refuse_capturing(inst, call);
        if (s->capture) {
            s->capture->push_back(std::move(op));  // GRAPH-CAPTURE: recorded, run by each launch
            return XMC_OK;
        }
        s->queue.push_back(std::move(op));
        ++s->enqueued;
    }
    s->cv.notify_all();
    return XMC_OK;
}

xmc_status enqueue(xmc_instance *inst, xmc_stream *handle, const char *call, std::function<void()> op) {
    return push(inst, handle, call, std::move(op), false);
}

xmc_status enqueue_or_record(xmc_instance *inst, xmc_stream *handle, const char *call, std::function<void()> op) {
    return push(inst, handle, call, std::move(op), true);
}

xmc_status begin_capture(xmc_instance *inst, xmc_stream *handle, const char *call) {
    Stream *s = find_stream(as_host(inst), handle);
    if (!s) return bad_stream(inst, call, handle);
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->capture)
        return be::fail(inst, XMC_ERR_CAPTURING, 0, call, "%s: the stream is capturing already", call);
    s->capture = std::make_unique<Recording>();
    return XMC_OK;
}

xmc_status end_capture(xmc_instance *inst, xmc_stream *handle, const char *call, Recording *out) {
    Stream *s = find_stream(as_host(inst), handle);
    if (!s) return bad_stream(inst, call, handle);
    std::lock_guard<std::mutex> lock(s->mu);
    if (!s->capture)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: the stream is not capturing (no graph_begin)",
                        call);
    *out = std::move(*s->capture);
    s->capture.reset();
    return XMC_OK;
}

// The stream records a graph now (a capture begun on it and not ended).
static bool capturing(Stream &s) {
    std::lock_guard<std::mutex> lock(s.mu);
    return s.capture != nullptr;
}

static xmc_status create_stream(xmc_instance *inst, int32_t, xmc_stream **out) {
    auto s = std::make_unique<Stream>();
    s->worker = std::thread([p = s.get()] { p->run(); });
    auto *handle = reinterpret_cast<xmc_stream *>(s.get());
    std::lock_guard<std::mutex> lock(as_host(inst)->mu);
    as_host(inst)->streams[handle] = std::move(s);
    *out = handle;
    return XMC_OK;
}

xmc_status stream_destroy(xmc_instance *inst, xmc_stream *handle) {
    Instance *in = as_host(inst);
    std::unique_ptr<Stream> s;
    {
        std::lock_guard<std::mutex> lock(in->mu);
        auto it = in->streams.find(handle);
        if (it == in->streams.end())
            return bad_stream(inst, "stream_destroy", handle);
        // From the stream's own callback the join below would wait for itself.
        if (it->second->worker.get_id() == std::this_thread::get_id())
            return be::fail(inst, XMC_ERR_BUSY, 0, "stream_destroy",
                            "stream_destroy: called from a host callback of the stream being destroyed");
        if (capturing(*it->second)) return refuse_capturing(inst, "stream_destroy");
        s = std::move(it->second);
        in->streams.erase(it);
    }
    {
        std::lock_guard<std::mutex> lock(s->mu);
        s->stop = true;
    }
    s->cv.notify_all();
    s->worker.join();  // enqueued work completes first, as cuStreamDestroy lets it
    return XMC_OK;
}

xmc_status stream_synchronize(xmc_instance *inst, xmc_stream *handle) {
    Stream *s = find_stream(as_host(inst), handle);
    if (!s)
        return bad_stream(inst, "stream_synchronize", handle);
    if (s->worker.get_id() == std::this_thread::get_id())
        return be::fail(inst, XMC_ERR_BUSY, 0, "stream_synchronize",
                        "stream_synchronize: called from a host callback of the same stream (would wait for itself)");
    std::unique_lock<std::mutex> lock(s->mu);
    // GRAPH-CAPTURE: nothing of a capture runs until a launch; waiting for it is refused.
    if (s->capture) return refuse_capturing(inst, "stream_synchronize");
    const uint64_t target = s->enqueued;  // the work enqueued before this call
    s->cv.wait(lock, [&] { return s->finished >= target; });
    return XMC_OK;
}

static xmc_status create_event(xmc_instance *inst, int32_t, xmc_event **out) {
    auto e = std::make_shared<Event>();
    auto *handle = reinterpret_cast<xmc_event *>(e.get());
    std::lock_guard<std::mutex> lock(as_host(inst)->mu);
    as_host(inst)->events[handle] = std::move(e);
    *out = handle;
    return XMC_OK;
}

xmc_status event_destroy(xmc_instance *inst, xmc_event *handle) {
    Instance *in = as_host(inst);
    std::lock_guard<std::mutex> lock(in->mu);
    // Operations already enqueued hold their own reference to the event.
    if (in->events.erase(handle) == 0)
        return bad_event(inst, "event_destroy", handle);
    return XMC_OK;
}

xmc_status event_record(xmc_instance *inst, xmc_event *handle, xmc_stream *s) {
    std::shared_ptr<Event> e = find_event(as_host(inst), handle);
    if (!e)
        return bad_event(inst, "event_record", handle);
    Stream *st = find_stream(as_host(inst), s);
    if (!st)
        return bad_stream(inst, "event_record", s);
    // Before a generation is issued: a record refused later would leave one never completed.
    if (capturing(*st)) return refuse_capturing(inst, "event_record");
    uint64_t gen = 0;
    {
        std::lock_guard<std::mutex> lock(e->mu);
        gen = ++e->issued;
    }
    return enqueue(inst, s, "event_record", [e, gen] {
        std::lock_guard<std::mutex> lock(e->mu);
        if (gen > e->completed) e->completed = gen;
        e->cv.notify_all();
    });
}

xmc_status event_synchronize(xmc_instance *inst, xmc_event *handle) {
    std::shared_ptr<Event> e = find_event(as_host(inst), handle);
    if (!e)
        return bad_event(inst, "event_synchronize", handle);
    std::unique_lock<std::mutex> lock(e->mu);
    const uint64_t target = e->issued;
    e->cv.wait(lock, [&] { return e->completed >= target; });
    return XMC_OK;
}

xmc_status stream_wait_event(xmc_instance *inst, xmc_stream *s, xmc_event *handle) {
    std::shared_ptr<Event> e = find_event(as_host(inst), handle);
    if (!e)
        return bad_event(inst, "stream_wait_event", handle);
    uint64_t target = 0;
    {
        std::lock_guard<std::mutex> lock(e->mu);
        // COPY-ORDER: the wait orders this stream after the record issued last.
        target = e->issued;  // the record most recently enqueued at this call
    }
    return enqueue(inst, s, "stream_wait_event", [e, target] {
        std::unique_lock<std::mutex> lock(e->mu);
        e->cv.wait(lock, [&] { return e->completed >= target; });
    });
}

static xmc_status enqueue_callback(xmc_instance *inst, xmc_stream *s, xmc_host_fn fn, void *user) {
    return enqueue_or_record(inst, s, "host_callback", [fn, user] { fn(user); });
}

static xmc_status alloc_device(xmc_instance *inst, int32_t, size_t bytes, void **out) {
    void *p = nullptr;
    // 256 bytes: the alignment cuMemAlloc guarantees, so callers see the same.
    if (int rc = posix_memalign(&p, 256, bytes); rc != 0)
        return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, rc, "dev_alloc", "dev_alloc: posix_memalign of %zu bytes failed",
                        bytes);
    std::lock_guard<std::mutex> lock(as_host(inst)->mu);
    as_host(inst)->dev_allocs[reinterpret_cast<uintptr_t>(p)] = bytes;
    *out = p;
    return XMC_OK;
}

xmc_status dev_free(xmc_instance *inst, void *ptr) {
    Instance *in = as_host(inst);
    std::lock_guard<std::mutex> lock(in->mu);
    auto it = in->dev_allocs.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == in->dev_allocs.end())
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "dev_free",
                        "dev_free: %p is not a base that dev_alloc of this instance returned", ptr);
    be::book_remove(reinterpret_cast<uintptr_t>(ptr), be::MemKind::Device);  // before the address is free again
    in->dev_allocs.erase(it);
    std::free(ptr);
    return XMC_OK;
}

static xmc_status ready_copy(xmc_instance *) { return XMC_OK; }  // no driver: always there
static int32_t devices() { return 1; }
static bool live_stream(xmc_instance *inst, xmc_stream *s) { return find_stream(as_host(inst), s) != nullptr; }

XMC_STREAM_OPS(check_device, ready_copy, devices, live_stream, vmm_copy_check,
               enqueue_copy, create_stream, create_event, alloc_device, enqueue_callback)

} // namespace xmc::host
