// Streams, events, host functions, stream memory operations and copies.
//
// Each stream has one worker thread that runs its ops in order. An op stays
// at the front of the queue until it has finished, so "queue empty" means
// "stream idle". Copies and memsets run under the state mutex (so a VMM unmap
// cannot happen in the middle of one).
//
// Host functions (cuLaunchHostFunc) run as on the real driver (measured on
// H200, driver 580): every stream's on ONE process-wide callback thread, one
// at a time, in the order their streams reach them. A host function that
// blocks therefore holds the host functions of every other stream (not their
// copies, records or waits). The stream's worker hands the function to that
// thread and waits for it; the callback thread runs it without the state
// mutex, marked as a host-callback thread (every driver call from it is
// refused with CUDA_ERROR_NOT_PERMITTED).
//
// cuStreamWaitValue32 holds the stream until a 32-bit word at a device
// address (device memory, a VMM mapping, or registered host memory through
// its device address) satisfies the condition; the worker re-reads the word
// every 50 us, as the GPU polls it, so a plain host store releases it.
// cuStreamWriteValue32 stores to such a word in stream order.
//
// Events: cuEventRecord issues a new generation and queues an op that
// completes it; cuStreamWaitEvent waits for the generation issued at the time
// of the call (an event never recorded is no wait at all, as on the real
// driver), so a consumer told to wait before the producer recorded does not wait.
//
// Copies are validated when enqueued (every device-side byte must be in a
// device allocation, a registration (by device address) or a VMM mapping
// with access; recorded: a host pointer as the device side is
// CUDA_ERROR_INVALID_VALUE) and resolved again when they run: if the device
// side is gone by then, the copy is not done and the context gets the sticky
// error CUDA_ERROR_ILLEGAL_ADDRESS, like a GPU fault. After a sticky error,
// copies in that context are skipped; records and host functions still run,
// so nobody waits forever.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>

#include "fake_cuda_internal.h"

namespace xmc_fake {

namespace {

// The process-wide callback thread: runs queued host functions one at a time.
void callback_main() {
    set_on_callback_thread();
    State& g = state();
    std::unique_lock<std::mutex> lk(g.mu);
    for (;;) {
        g.cv.wait(lk, [&] { return g.callback_stop || !g.host_calls.empty(); });
        if (g.callback_stop) return;
        std::shared_ptr<HostCall> call = g.host_calls.front();
        g.host_calls.pop_front();
        if (call->cancelled) continue;
        g.callback_running = true;
        lk.unlock();  // never hold the lock while user code runs
        set_in_host_callback(true);
        call->fn(call->user);
        set_in_host_callback(false);
        lk.lock();
        g.callback_running = false;
        call->done = true;
        g.cv.notify_all();
    }
}

// Runs a host function on the callback thread (started on first use) and
// waits for it, or for the stream to be abandoned.
void run_host_fn_locked(std::unique_lock<std::mutex>& lk, Stream* s, CUhostFn fn, void* user) {
    State& g = state();
    if (!g.callback_thread.joinable()) {
        g.callback_stop = false;
        g.callback_thread = std::thread(callback_main);
    }
    auto call = std::make_shared<HostCall>();
    call->fn = fn;
    call->user = user;
    g.host_calls.push_back(call);
    g.cv.notify_all();
    g.cv.wait(lk, [&] { return call->done || s->abandon; });
    if (!call->done) call->cancelled = true;  // dropped if not started; a running one finishes
}

// True when the word satisfies cuStreamWaitValue32's condition.
bool value_ready(uint32_t word, uint32_t value, unsigned flags) {
    switch (flags & ~static_cast<unsigned>(CU_STREAM_WAIT_VALUE_FLUSH)) {
        case CU_STREAM_WAIT_VALUE_GEQ: return static_cast<int32_t>(word - value) >= 0;
        case CU_STREAM_WAIT_VALUE_EQ: return word == value;
        case CU_STREAM_WAIT_VALUE_AND: return (word & value) != 0;
        default: return ~(word | value) != 0;  // CU_STREAM_WAIT_VALUE_NOR
    }
}

void worker_main(Stream* s) {
    State& g = state();
    std::unique_lock<std::mutex> lk(g.mu);
    for (;;) {
        g.cv.wait(lk, [&] { return s->abandon || s->stop || !s->queue.empty(); });
        if (s->abandon || (s->stop && s->queue.empty())) {
            s->queue.clear();
            s->exited = true;
            g.cv.notify_all();
            return;
        }
        Op& op = s->queue.front();  // deque: stays valid while others push_back
        switch (op.kind) {
            case Op::Kind::wait: {
                std::shared_ptr<Event> ev = op.event;
                uint64_t gen = op.gen;
                g.cv.wait(lk, [&] { return s->abandon || ev->completed >= gen; });
                break;
            }
            case Op::Kind::copy: {
                if (op.exec_delay_us > 0) {  // an exec_delay fault: the stream waits, the caller did not
                    const auto delay = std::chrono::microseconds(op.exec_delay_us);
                    op.exec_delay_us = 0;
                    lk.unlock();
                    std::this_thread::sleep_for(delay);
                    lk.lock();
                    if (s->abandon) continue;  // reset meanwhile: the top of the loop drops the queue
                }
                Context* c = find_ctx_locked(s->ctx);
                if (c != nullptr && c->sticky == CUDA_SUCCESS) {
                    CUresult r = op.copy();
                    if (r != CUDA_SUCCESS) c->sticky = r;
                }
                break;
            }
            case Op::Kind::record:
                if (op.event->completed < op.gen) op.event->completed = op.gen;
                op.event->when = std::chrono::steady_clock::now();
                break;
            case Op::Kind::host_fn:
                run_host_fn_locked(lk, s, op.fn, op.user);
                break;
            case Op::Kind::work: {  // xmc_fake_cuda_stream_enqueue: blocks this stream only
                void (*fn)(void*) = op.work;
                void* user = op.user;
                lk.unlock();
                fn(user);
                lk.lock();
                break;
            }
            case Op::Kind::wait_value:
            case Op::Kind::write_value: {
                // The word is resolved each time (its memory may go away, as
                // on a GPU: then the context gets the sticky fault).
                const uintptr_t addr = op.addr;
                const uint32_t value = op.value;
                const unsigned flags = op.flags;
                const bool write = op.kind == Op::Kind::write_value;
                for (;;) {
                    Context* c = find_ctx_locked(s->ctx);
                    if (s->abandon || c == nullptr || c->sticky != CUDA_SUCCESS) break;
                    const uintptr_t h = device_to_host_locked(addr, sizeof(uint32_t));
                    if (h == 0) {
                        c->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
                        break;
                    }
                    std::atomic_ref<uint32_t> word(*reinterpret_cast<uint32_t*>(h));
                    if (write) {
                        word.store(value, std::memory_order_release);
                        break;
                    }
                    if (value_ready(word.load(std::memory_order_acquire), value, flags)) break;
                    g.cv.wait_for(lk, std::chrono::microseconds(50));
                }
                break;
            }
        }
        if (!s->queue.empty()) s->queue.pop_front();
        g.cv.notify_all();
    }
}

bool is_default_stream(CUstream s) {
    return s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

}  // namespace

std::shared_ptr<Stream> make_stream_locked(uint64_t handle, uint64_t ctx, unsigned flags) {
    auto s = std::make_shared<Stream>();
    s->handle = handle;
    s->ctx = ctx;
    s->flags = flags;
    s->worker = std::thread(worker_main, s.get());
    return s;
}

std::shared_ptr<Stream> find_stream_locked(CUstream hs, CUresult* err) {
    State& g = state();
    if (is_default_stream(hs)) {
        Context* c = current_ctx_locked(err);
        if (c == nullptr) return nullptr;
        if (!c->null_stream) c->null_stream = make_stream_locked(0, c->handle, 0);
        return c->null_stream;
    }
    auto it = g.streams.find(from_handle(hs));
    if (it == g.streams.end()) {
        *err = CUDA_ERROR_INVALID_HANDLE;
        return nullptr;
    }
    Context* c = find_ctx_locked(it->second->ctx);
    if (c == nullptr) {
        *err = CUDA_ERROR_INVALID_CONTEXT;
        return nullptr;
    }
    if (c->sticky != CUDA_SUCCESS) {
        *err = c->sticky;
        return nullptr;
    }
    *err = CUDA_SUCCESS;
    return it->second;
}

void wait_idle_locked(std::unique_lock<std::mutex>& lk, const std::shared_ptr<Stream>& s) {
    state().cv.wait(lk, [&] { return s->queue.empty() || s->abandon || s->exited; });
}

void retire_stream_locked(const std::shared_ptr<Stream>& s) {
    s->stop = true;
    state().retired.push_back(s);
    state().cv.notify_all();
}

void stop_callback_thread_locked(std::unique_lock<std::mutex>& lk, std::chrono::milliseconds timeout) {
    State& g = state();
    if (!g.callback_thread.joinable()) return;
    g.host_calls.clear();  // their streams are being abandoned
    if (!g.cv.wait_for(lk, timeout, [&] { return !g.callback_running; })) {
        g.callback_stop = true;  // it exits when the stuck host function returns
        g.callback_thread.detach();
        g.cv.notify_all();
        return;
    }
    g.callback_stop = true;
    g.cv.notify_all();
    std::thread t = std::move(g.callback_thread);
    lk.unlock();
    t.join();
    lk.lock();
    g.callback_stop = false;
}

void reap_retired_locked() {
    State& g = state();
    for (auto it = g.retired.begin(); it != g.retired.end();) {
        if ((*it)->exited) {
            // The worker set `exited` under the lock we hold and only returns now.
            if ((*it)->worker.joinable()) (*it)->worker.join();
            it = g.retired.erase(it);
        } else {
            ++it;
        }
    }
}

}  // namespace xmc_fake

using namespace xmc_fake;

namespace {

// Result of the stream's context after waiting: its sticky error, if any.
CUresult ctx_result_locked(uint64_t ctx) {
    Context* c = find_ctx_locked(ctx);
    if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    return c->sticky;
}

CUresult push_op(CUstream hs, Op op) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    std::shared_ptr<Stream> s = find_stream_locked(hs, &err);
    if (!s) return err;
    return queue_op_locked(s, std::move(op));  // or into its capture (fake_cuda_graph.cpp)
}

// XMC_FAKE_CUDA_STREAM_POOL_BYTES=<bytes> (test-only, default 0: off): each
// time a context's live streams reach a new high, its device keeps that many
// bytes for good, as the H200 driver (580) keeps 2 MiB on a stream creation.
// A free-memory check that brackets a stream creation then fails here as it
// did on the H200 (the hostile-handles VMM-STATE test did).
void keep_stream_pool_locked(State& g, const Context& c) {
    const size_t bytes = g.config.stream_pool_bytes;
    if (bytes == 0) return;
    size_t live = 0;
    for (const auto& [h, s] : g.streams) live += s && s->ctx == c.handle;
    size_t& high = g.stream_high[c.handle];
    if (live <= high) return;
    high = live;
    Device& d = g.devices[static_cast<size_t>(c.ordinal)];
    d.used = std::min(d.total, d.used + bytes);
}

}  // namespace

// ---- streams -------------------------------------------------------------------------

XMC_FAKE_EXPORT CUresult cuStreamCreate(CUstream* phStream, unsigned int flags) {
    FAKE_ENTER("cuStreamCreate");
    if (phStream == nullptr || (flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    Context* c = current_ctx_locked(&err);
    if (c == nullptr) return err;
    reap_retired_locked();
    uint64_t h = new_handle_locked();
    g.streams[h] = make_stream_locked(h, c->handle, flags);
    keep_stream_pool_locked(g, *c);
    *phStream = to_handle<CUstream>(h);
    return CUDA_SUCCESS;
}

// Returns at once; queued work still runs (as on the real driver), then the
// worker exits and is joined later. A second destroy of the same handle
// crashes the real driver (recorded: SIGSEGV); the fake answers
// CUDA_ERROR_INVALID_HANDLE.
XMC_FAKE_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) {
    FAKE_ENTER("cuStreamDestroy_v2");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    auto it = g.streams.find(from_handle(hStream));
    if (it == g.streams.end()) return CUDA_ERROR_INVALID_HANDLE;
    std::shared_ptr<Stream> s = it->second;
    g.streams.erase(it);
    stream_leaves_capture_locked(*s);
    retire_stream_locked(s);
    reap_retired_locked();
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuStreamSynchronize(CUstream hStream) {
    FAKE_ENTER("cuStreamSynchronize");
    State& g = state();
    std::unique_lock<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    std::shared_ptr<Stream> s = find_stream_locked(hStream, &err);
    if (!s) return err;
    if (s->capture) return refuse_in_capture_locked(*s);  // recorded: capture_stream_synchronize
    // Seen on the H200 (driver 580.159.04): a synchronize of another stream from a
    // thread that captures in thread-local mode (or during a global capture) is
    // refused with 900 and invalidates that capture; relaxed captures allow it.
    if (CUresult r = unsafe_in_capture_locked(); r != CUDA_SUCCESS) return r;
    wait_idle_locked(lk, s);
    return ctx_result_locked(s->ctx);
}

XMC_FAKE_EXPORT CUresult cuStreamQuery(CUstream hStream) {
    FAKE_ENTER("cuStreamQuery");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    std::shared_ptr<Stream> s = find_stream_locked(hStream, &err);
    if (!s) return err;
    if (s->capture) return refuse_in_capture_locked(*s);  // recorded: capture_stream_query
    return s->queue.empty() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

XMC_FAKE_EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int flags) {
    FAKE_ENTER("cuStreamWaitEvent");
    if ((flags & ~static_cast<unsigned>(CU_EVENT_WAIT_EXTERNAL)) != 0) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    std::shared_ptr<Stream> s = find_stream_locked(hStream, &err);
    if (!s) return err;
    auto e = g.events.find(from_handle(hEvent));
    if (e == g.events.end()) return CUDA_ERROR_INVALID_HANDLE;
    bool in_capture = false;  // a join, a fork or a refusal (fake_cuda_graph.cpp)
    if (CUresult r = capture_wait_locked(s, *e->second, &in_capture); in_capture || r != CUDA_SUCCESS) return r;
    uint64_t gen = e->second->recorded;  // what was recorded by now, and nothing later
    if (gen > e->second->completed) {
        Op op;
        op.kind = Op::Kind::wait;
        op.event = e->second;
        op.gen = gen;
        return queue_op_locked(s, std::move(op));
    }
    return CUDA_SUCCESS;
}

namespace {
// Validates and queues a cuStreamWaitValue32 / cuStreamWriteValue32.
CUresult push_value_op(CUstream hs, Op::Kind kind, CUdeviceptr addr, uint32_t value, unsigned flags) {
    // Recorded in cuda.h: the word must be 4-byte aligned.
    if (addr == 0 || addr % 4 != 0) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    std::shared_ptr<Stream> s = find_stream_locked(hs, &err);
    if (!s) return err;
    // The device must reach the word: device memory, a mapping, or host
    // memory registered (by its device address). Plain host memory is refused.
    if (device_to_host_locked(addr, sizeof(uint32_t)) == 0) return CUDA_ERROR_INVALID_VALUE;
    Op op;
    op.kind = kind;
    op.addr = addr;
    op.value = value;
    op.flags = flags;
    return queue_op_locked(s, std::move(op));
}
}  // namespace

XMC_FAKE_EXPORT CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                                unsigned int flags) {
    FAKE_ENTER("cuStreamWaitValue32_v2");
    const unsigned cond = flags & ~static_cast<unsigned>(CU_STREAM_WAIT_VALUE_FLUSH);
    if (cond > CU_STREAM_WAIT_VALUE_NOR) return CUDA_ERROR_INVALID_VALUE;
    return push_value_op(stream, Op::Kind::wait_value, addr, value, flags);
}

XMC_FAKE_EXPORT CUresult cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                                 unsigned int flags) {
    FAKE_ENTER("cuStreamWriteValue32_v2");
    if ((flags & ~static_cast<unsigned>(CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return push_value_op(stream, Op::Kind::write_value, addr, value, flags);
}

XMC_FAKE_EXPORT CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) {
    FAKE_ENTER("cuLaunchHostFunc");
    if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Op op;
    op.kind = Op::Kind::host_fn;
    op.fn = fn;
    op.user = userData;
    return push_op(hStream, std::move(op));
}

// ---- events ---------------------------------------------------------------------------------

XMC_FAKE_EXPORT CUresult cuEventCreate(CUevent* phEvent, unsigned int flags) {
    FAKE_ENTER("cuEventCreate");
    const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (phEvent == nullptr || (flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
    if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    Context* c = current_ctx_locked(&err);
    if (c == nullptr) return err;
    auto e = std::make_shared<Event>();
    e->handle = new_handle_locked();
    e->ctx = c->handle;
    e->flags = flags;
    g.events[e->handle] = e;
    *phEvent = to_handle<CUevent>(e->handle);
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
    FAKE_ENTER("cuEventRecord");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    auto e = g.events.find(from_handle(hEvent));
    if (e == g.events.end()) return CUDA_ERROR_INVALID_HANDLE;
    CUresult err = CUDA_SUCCESS;
    std::shared_ptr<Stream> s = find_stream_locked(hStream, &err);
    if (!s) return err;
    if (s->ctx != e->second->ctx) return CUDA_ERROR_INVALID_HANDLE;  // event and stream of one context
    if (s->capture) return capture_record_locked(*s, *e->second);  // a point of the capture, not an op
    Op op;
    op.kind = Op::Kind::record;
    op.event = e->second;
    op.gen = e->second->recorded + 1;
    if (CUresult r = queue_op_locked(s, std::move(op)); r != CUDA_SUCCESS) return r;
    ++e->second->recorded;
    e->second->captured_in = 0;  // recorded outside a capture now
    return CUDA_SUCCESS;
}

// Recorded: a never-recorded event queries and synchronizes as complete.
XMC_FAKE_EXPORT CUresult cuEventQuery(CUevent hEvent) {
    FAKE_ENTER("cuEventQuery");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    auto e = g.events.find(from_handle(hEvent));
    if (e == g.events.end()) return CUDA_ERROR_INVALID_HANDLE;
    if (CUresult r = captured_event_locked(*e->second); r != CUDA_SUCCESS) return r;  // recorded: capture_event_query_captured
    CUresult sticky = ctx_result_locked(e->second->ctx);
    if (sticky != CUDA_SUCCESS) return sticky;
    return e->second->completed >= e->second->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

XMC_FAKE_EXPORT CUresult cuEventSynchronize(CUevent hEvent) {
    FAKE_ENTER("cuEventSynchronize");
    State& g = state();
    std::unique_lock<std::mutex> lk(g.mu);
    auto it = g.events.find(from_handle(hEvent));
    if (it == g.events.end()) return CUDA_ERROR_INVALID_HANDLE;
    std::shared_ptr<Event> e = it->second;
    if (CUresult r = captured_event_locked(*e); r != CUDA_SUCCESS) return r;  // recorded: capture_event_synchronize_captured
    if (CUresult r = unsafe_in_capture_locked(); r != CUDA_SUCCESS) return r;  // as cuStreamSynchronize, seen on the H200
    uint64_t target = e->recorded;
    g.cv.wait(lk, [&] {
        Context* c = find_ctx_locked(e->ctx);
        return e->completed >= target || c == nullptr || c->sticky != CUDA_SUCCESS;
    });
    return ctx_result_locked(e->ctx);
}

XMC_FAKE_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent) {
    FAKE_ENTER("cuEventDestroy_v2");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    // A record still queued keeps its own reference; destroying is allowed.
    return g.events.erase(from_handle(hEvent)) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

namespace {
// Recorded: never-recorded or DISABLE_TIMING events give CUDA_ERROR_INVALID_HANDLE.
CUresult elapsed(float* ms, CUevent a, CUevent b) {
    if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    auto ea = g.events.find(from_handle(a));
    auto eb = g.events.find(from_handle(b));
    if (ea == g.events.end() || eb == g.events.end()) return CUDA_ERROR_INVALID_HANDLE;
    const Event& x = *ea->second;
    const Event& y = *eb->second;
    if ((x.flags | y.flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    if (x.recorded == 0 || y.recorded == 0) return CUDA_ERROR_INVALID_HANDLE;
    if (x.completed < x.recorded || y.completed < y.recorded) return CUDA_ERROR_NOT_READY;
    *ms = std::chrono::duration<float, std::milli>(y.when - x.when).count();
    return CUDA_SUCCESS;
}
}  // namespace

XMC_FAKE_EXPORT CUresult cuEventElapsedTime_v2(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
    FAKE_ENTER("cuEventElapsedTime_v2");
    return elapsed(pMilliseconds, hStart, hEnd);
}

CUresult xmc_fake_cuEventElapsedTime_v1(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
    FAKE_ENTER("cuEventElapsedTime");
    return elapsed(pMilliseconds, hStart, hEnd);
}

// ---- copies ------------------------------------------------------------------------------------

namespace {

// One side of a copy: where its first byte is, and how rows and slices step.
struct Side {
    uintptr_t start = 0;
    size_t pitch = 0;    // bytes between rows
    size_t slice = 0;    // bytes between slices
    bool device = false; // must be device memory; otherwise host memory, or
                         // device memory reached through a unified address
    size_t span = 0;     // bytes from start to the end of the last row
};

struct Plan {
    Side src, dst;
    size_t width = 0, rows = 1, depth = 1;
    bool is_memset = false;
    unsigned char value = 0;
};

bool compute_span(Side& s, const Plan& p) {
    size_t a = 0, b = 0, t = 0;
    if (__builtin_mul_overflow(p.depth - 1, s.slice, &a)) return false;
    if (__builtin_mul_overflow(p.rows - 1, s.pitch, &b)) return false;
    if (__builtin_add_overflow(a, b, &t) || __builtin_add_overflow(t, p.width, &s.span)) return false;
    uintptr_t end = 0;
    return !__builtin_add_overflow(s.start, s.span, &end);
}

// The host address for a side, or 0 when it cannot be reached now.
uintptr_t resolve(const Side& s) {
    uintptr_t h = device_to_host_locked(s.start, s.span);
    if (h != 0) return h;
    if (s.device || in_device_range_locked(s.start, s.span)) return 0;
    return s.start;  // plain host memory
}

// Runs under the state mutex on the worker.
CUresult execute(const Plan& p) {
    uintptr_t dst = resolve(p.dst);
    uintptr_t src = p.is_memset ? 0 : resolve(p.src);
    if (dst == 0 || (!p.is_memset && src == 0)) return CUDA_ERROR_ILLEGAL_ADDRESS;
    for (size_t z = 0; z < p.depth; ++z)
        for (size_t y = 0; y < p.rows; ++y) {
            auto* d = reinterpret_cast<unsigned char*>(dst + z * p.dst.slice + y * p.dst.pitch);
            if (p.is_memset) {
                std::memset(d, p.value, p.width);
            } else {
                auto* s = reinterpret_cast<const unsigned char*>(src + z * p.src.slice + y * p.src.pitch);
                std::memmove(d, s, p.width);
            }
        }
    return CUDA_SUCCESS;
}

// Validates a plan against the stream and the memory as it is now, then queues it.
CUresult enqueue(CUstream hs, Plan p) {
    // An empty copy has no span (recorded: Height 0 or Depth 0 is CUDA_SUCCESS).
    const bool empty = p.width == 0 || p.rows == 0 || p.depth == 0;
    if (!empty && (!compute_span(p.dst, p) || (!p.is_memset && !compute_span(p.src, p))))
        return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::unique_lock<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    std::shared_ptr<Stream> s = find_stream_locked(hs, &err);
    if (!s) return err;
    if (empty) return CUDA_SUCCESS;
    if (resolve(p.dst) == 0 || (!p.is_memset && resolve(p.src) == 0)) return CUDA_ERROR_INVALID_VALUE;
    // The real driver (580, H200) returns from a copy from device memory into
    // pageable host memory only once the copy is done, so such a copy on a
    // stream held by a blocking host function waits for that function.
    const bool into_pageable = !p.is_memset && !p.dst.device && device_to_host_locked(p.dst.start, p.dst.span) == 0 &&
                               (p.src.device || device_to_host_locked(p.src.start, p.src.span) != 0);
    Op op;
    op.kind = Op::Kind::copy;
    op.copy = [p] { return execute(p); };  // resolved again each time it runs (a graph's too)
    op.exec_delay_us = current_exec_delay_us();
    const bool captured = s->capture != nullptr;
    if (CUresult r = queue_op_locked(s, std::move(op)); r != CUDA_SUCCESS) return r;
    if (into_pageable && !captured) wait_idle_locked(lk, s);
    return CUDA_SUCCESS;
}

// Synchronous variants: the current context's default stream, then wait.
CUresult run_sync(Plan p) {
    CUresult r = enqueue(nullptr, p);
    if (r != CUDA_SUCCESS) return r;
    State& g = state();
    std::unique_lock<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    std::shared_ptr<Stream> s = find_stream_locked(nullptr, &err);
    if (!s) return err;
    wait_idle_locked(lk, s);
    return ctx_result_locked(s->ctx);
}

Plan linear(uintptr_t dst, bool dst_dev, uintptr_t src, bool src_dev, size_t n) {
    Plan p;
    p.dst.start = dst;
    p.dst.device = dst_dev;
    p.src.start = src;
    p.src.device = src_dev;
    p.width = n;
    return p;
}

Plan set_plan(CUdeviceptr dst, unsigned char v, size_t n) {
    Plan p;
    p.dst.start = dst;
    p.dst.device = true;
    p.width = n;
    p.is_memset = true;
    p.value = v;
    return p;
}

// One side of a CUDA_MEMCPY2D/3D: pick the pointer by memory type and add the
// x/y/z offsets. False when the description is invalid.
CUresult side_from(Side& s, CUmemorytype type, const void* host, CUdeviceptr dev, CUarray array, size_t x, size_t y,
                   size_t z, size_t pitch, size_t height) {
    uintptr_t base = 0;
    switch (type) {
        case CU_MEMORYTYPE_HOST:
            base = reinterpret_cast<uintptr_t>(host);
            s.device = false;
            break;
        case CU_MEMORYTYPE_DEVICE:
            base = dev;
            s.device = true;
            break;
        case CU_MEMORYTYPE_UNIFIED:
            base = dev;
            s.device = false;
            break;
        case CU_MEMORYTYPE_ARRAY:
            // CUDA arrays are not modelled; recorded: a NULL one is refused (copy_2d_array_null)
            return array == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
        default:
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (base == 0) return CUDA_ERROR_INVALID_VALUE;
    size_t rows_before = 0, off = 0;
    if (__builtin_mul_overflow(z, height, &rows_before) || __builtin_add_overflow(rows_before, y, &rows_before) ||
        __builtin_mul_overflow(rows_before, pitch, &off) || __builtin_add_overflow(off, x, &off) ||
        __builtin_add_overflow(base, off, &s.start))
        return CUDA_ERROR_INVALID_VALUE;
    s.pitch = pitch;
    if (__builtin_mul_overflow(pitch, height, &s.slice)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult plan_2d(const CUDA_MEMCPY2D* c, Plan& p) {
    if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
    p.width = c->WidthInBytes;
    p.rows = c->Height;
    p.depth = 1;
    // Recorded: a pitch smaller than the width is CUDA_ERROR_INVALID_VALUE,
    // also for a single row (copy_2d_single_row_pitch_smaller).
    if (c->srcPitch < c->WidthInBytes || c->dstPitch < c->WidthInBytes) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = side_from(p.src, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes, c->srcY,
                           0, c->srcPitch, 0);
    if (r != CUDA_SUCCESS) return r;
    return side_from(p.dst, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes, c->dstY, 0,
                     c->dstPitch, 0);
}

CUresult plan_3d(const CUDA_MEMCPY3D* c, Plan& p) {
    if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
    // Recorded: a level of detail is ignored for linear memory (copy_3d_nonzero_lod).
    if (c->reserved0 != nullptr || c->reserved1 != nullptr) return CUDA_ERROR_INVALID_VALUE;
    p.width = c->WidthInBytes;
    p.rows = c->Height;
    p.depth = c->Depth;
    bool multi_row = c->Height > 1 || c->Depth > 1;
    if (multi_row && (c->srcPitch < c->WidthInBytes || c->dstPitch < c->WidthInBytes))
        return CUDA_ERROR_INVALID_VALUE;
    // Recorded: a slice height below Height is refused also for one slice
    // (copy_3d_depth1_*_height_smaller); a height of 0 is taken as unset there.
    if (c->Depth > 1 && (c->srcHeight < c->Height || c->dstHeight < c->Height)) return CUDA_ERROR_INVALID_VALUE;
    if (c->Depth == 1 && ((c->srcHeight != 0 && c->srcHeight < c->Height) ||
                          (c->dstHeight != 0 && c->dstHeight < c->Height)))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = side_from(p.src, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes, c->srcY,
                           c->srcZ, c->srcPitch, c->srcHeight);
    if (r != CUDA_SUCCESS) return r;
    return side_from(p.dst, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes, c->dstY,
                     c->dstZ, c->dstPitch, c->dstHeight);
}

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

XMC_FAKE_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream hStream) {
    FAKE_ENTER_SIZE("cuMemcpyAsync", n);
    return enqueue(hStream, linear(dst, false, src, false, n));
}

XMC_FAKE_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream hStream) {
    FAKE_ENTER_SIZE("cuMemcpyHtoDAsync_v2", n);
    return enqueue(hStream, linear(dst, true, addr(src), false, n));
}

XMC_FAKE_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream hStream) {
    FAKE_ENTER_SIZE("cuMemcpyDtoHAsync_v2", n);
    return enqueue(hStream, linear(addr(dst), false, src, true, n));
}

XMC_FAKE_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream hStream) {
    FAKE_ENTER_SIZE("cuMemcpyDtoDAsync_v2", n);
    return enqueue(hStream, linear(dst, true, src, true, n));
}

// Recorded (driver 580, H100, probe cases copy_2d_rows_*): a 2-D copy whose host side starts in a
// registration and whose rows run past its end (into a touching registration or one a page
// further) is CUDA_ERROR_INVALID_VALUE, as source or destination; rows inside one registration
// copy. The driver bounds the rows by the registration their first byte lies in.
static bool rows_leave_their_registration(const Side& s, size_t width, size_t rows) {
    if (s.device || width == 0 || rows == 0) return false;
    size_t span = 0;
    if (__builtin_mul_overflow(rows - 1, s.pitch, &span) || __builtin_add_overflow(span, width, &span)) return false;
    std::lock_guard<std::mutex> lk(state().mu);
    const auto& regs = state().registrations;
    auto it = regs.upper_bound(s.start);
    if (it == regs.begin()) return false;
    --it;
    const Registration& r = it->second;
    if (s.start >= r.base + r.size) return false;  // not registered: pageable memory copies
    return s.start + span > r.base + r.size;
}

XMC_FAKE_EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* pCopy, CUstream hStream) {
    FAKE_ENTER("cuMemcpy2DAsync_v2");
    Plan p;
    CUresult r = plan_2d(pCopy, p);
    if (r != CUDA_SUCCESS) return r;
    if (rows_leave_their_registration(p.src, p.width, p.rows) || rows_leave_their_registration(p.dst, p.width, p.rows))
        return CUDA_ERROR_INVALID_VALUE;
    return enqueue(hStream, p);
}

XMC_FAKE_EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* pCopy, CUstream hStream) {
    FAKE_ENTER("cuMemcpy3DAsync_v2");
    Plan p;
    CUresult r = plan_3d(pCopy, p);
    return r != CUDA_SUCCESS ? r : enqueue(hStream, p);
}

XMC_FAKE_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src, CUcontext srcCtx,
                                           size_t n, CUstream hStream) {
    FAKE_ENTER_SIZE("cuMemcpyPeerAsync", n);
    {
        // Recorded: a NULL context is no error, the addresses decide (memcpy_peer_null_context).
        std::lock_guard<std::mutex> lk(state().mu);
        const auto dead = [](CUcontext c) { return c != nullptr && find_ctx_locked(from_handle(c)) == nullptr; };
        if (dead(dstCtx) || dead(srcCtx)) return CUDA_ERROR_INVALID_CONTEXT;
    }
    return enqueue(hStream, linear(dst, true, src, true, n));
}

XMC_FAKE_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char uc, size_t n, CUstream hStream) {
    FAKE_ENTER_SIZE("cuMemsetD8Async", n);
    return enqueue(hStream, set_plan(dst, uc, n));
}

XMC_FAKE_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    FAKE_ENTER_SIZE("cuMemcpy", n);
    return run_sync(linear(dst, false, src, false, n));
}

XMC_FAKE_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
    FAKE_ENTER_SIZE("cuMemcpyHtoD_v2", n);
    return run_sync(linear(dst, true, addr(src), false, n));
}

XMC_FAKE_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
    FAKE_ENTER_SIZE("cuMemcpyDtoH_v2", n);
    return run_sync(linear(addr(dst), false, src, true, n));
}

XMC_FAKE_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    FAKE_ENTER_SIZE("cuMemcpyDtoD_v2", n);
    return run_sync(linear(dst, true, src, true, n));
}

XMC_FAKE_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char uc, size_t n) {
    FAKE_ENTER_SIZE("cuMemsetD8_v2", n);
    return run_sync(set_plan(dst, uc, n));
}

// For the other fakes (the fake NCCL): work that runs in stream order, on the stream's own worker
// (not the host-callback thread: a communicator's round that waits for its peer must not hold the
// other streams' host functions), holding back what is queued after it until it returns.
XMC_FAKE_EXPORT int xmc_fake_cuda_stream_enqueue(CUstream hStream, void (*fn)(void*), void* user) {
    if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    std::shared_ptr<Stream> s = find_stream_locked(hStream, &err);
    if (!s) return err;
    if (s->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // not replayable from a graph
    Op op;
    op.kind = Op::Kind::work;
    op.work = fn;
    op.user = user;
    return queue_op_locked(s, std::move(op));
}
