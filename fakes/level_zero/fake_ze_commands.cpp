// Command queues, command lists, copies and events.
//
// Execution model. Every immediate command list and every command queue owns an
// Engine: an in-order queue of tasks and one worker thread. An append checks its
// arguments and the memory it names at once (so a registration that is not mapped for
// the list's device fails the append, as it fails on real hardware), then queues one
// task: wait for the listed events, run the copy (if any), signal the event (if any).
// Regular command lists record tasks; zeCommandQueueExecuteCommandLists queues copies
// of them. Synchronous-mode queues and lists wait for their work before returning.
// Work on different engines runs concurrently and is ordered only by events.
//
// The Debian loader (spec 1.4) has no zeCommandListHostSynchronize; to wait for an
// immediate list, append a signal event and call zeEventHostSynchronize.
#include "fake_ze_entries.h"
#include "fake_ze_internal.h"

#include <chrono>
#include <cstring>

namespace xmc_fake_ze {

namespace {

using Lock = std::unique_lock<std::mutex>;

CmdList* list_of(ze_command_list_handle_t h) {
    auto it = S().lists.find(handle_id(h, Kind::List));
    return it == S().lists.end() ? nullptr : it->second.get();
}

Queue* queue_of(ze_command_queue_handle_t h) {
    auto it = S().queues.find(handle_id(h, Kind::Queue));
    return it == S().queues.end() ? nullptr : it->second.get();
}

Event* event_of(ze_event_handle_t h) {
    auto it = S().events.find(handle_id(h, Kind::Event));
    return it == S().events.end() ? nullptr : &it->second;
}

// Waits on S().cv until pred() holds; timeout in nanoseconds, UINT64_MAX = forever.
template <class Pred>
bool wait_for(Lock& lock, uint64_t timeout_ns, Pred pred) {
    if (timeout_ns == UINT64_MAX) {
        S().cv.wait(lock, pred);
        return true;
    }
    return S().cv.wait_for(lock, std::chrono::nanoseconds(timeout_ns), pred);
}

// Copies one region: depth slices of height rows of width bytes.
void run_copy(const CopyOp& c) {
    for (size_t z = 0; z < c.depth; ++z)
        for (size_t y = 0; y < c.height; ++y)
            std::memmove(reinterpret_cast<void*>(c.dst + z * c.dst_slice + y * c.dst_pitch),
                         reinterpret_cast<const void*>(c.src + z * c.src_slice + y * c.src_pitch), c.width);
}

// The worker of one engine. Holds the lock except while sleeping for an exec_delay.
void worker(Engine* e) {
    State& s = S();
    Lock lock(s.mu);
    for (;;) {
        s.cv.wait(lock, [&] { return e->abort || e->stop || !e->pending.empty(); });
        if (e->abort || e->pending.empty()) break;
        Task t = std::move(e->pending.front());
        e->pending.pop_front();
        e->busy = true;
        // Wait for the events; a destroyed event counts as signalled (and as a fault).
        auto ready = [&] {
            for (uint64_t id : t.waits) {
                auto it = s.events.find(id);
                if (it != s.events.end() && !it->second.signaled) return false;
            }
            return true;
        };
        s.cv.wait(lock, [&] { return e->abort || e->stop || ready(); });
        if (!ready()) {  // destroyed or reset while blocked: give up on the rest
            e->dropped += 1 + e->pending.size();
            e->pending.clear();
            e->busy = false;
            e->done = e->submitted;
            s.cv.notify_all();
            break;
        }
        for (uint64_t id : t.waits)
            if (s.events.count(id) == 0)
                note_device_fault(e->name + ": " + t.what + " waited on an event destroyed before it ran");
        if (t.exec_delay_us > 0) {
            lock.unlock();
            std::this_thread::sleep_for(std::chrono::microseconds(t.exec_delay_us));
            lock.lock();
            if (e->abort) break;
        }
        bool faulted = false;
        if (t.has_copy) {
            std::string why;
            if (recheck_range(t.copy.src_ref, why) && recheck_range(t.copy.dst_ref, why)) {
                run_copy(t.copy);
            } else {
                note_device_fault(e->name + ": " + t.what + ": " + why);
                e->sticky = ZE_RESULT_ERROR_DEVICE_LOST;
                faulted = true;
            }
        }
        if (t.signal != 0) {
            auto it = s.events.find(t.signal);
            if (it != s.events.end()) {
                it->second.signaled = true;
                it->second.faulted = faulted;
            }
        }
        e->busy = false;
        e->done = t.seq;
        s.cv.notify_all();
    }
    e->busy = false;
    s.cv.notify_all();
}

std::unique_ptr<Engine> start_engine(const std::string& name, uint32_t device, bool synchronous) {
    auto e = std::make_unique<Engine>();
    e->name = name;
    e->device = device;
    e->synchronous = synchronous;
    e->thread = std::thread(worker, e.get());
    return e;
}

// Queues tasks on an engine (lock held); waits for them when the engine is synchronous.
void submit(Lock& lock, Engine& e, std::vector<Task> tasks) {
    for (Task& t : tasks) {
        t.seq = ++e.submitted;
        e.pending.push_back(std::move(t));
    }
    S().cv.notify_all();
    if (e.synchronous) {
        const uint64_t last = e.submitted;
        S().cv.wait(lock, [&] { return e.done >= last || e.abort; });
    }
}

// Stops an engine and joins its worker with the lock released; work that is blocked
// on an unsignalled event is dropped.
void stop_engine(Lock& lock, Engine& e) {
    e.stop = true;
    S().cv.notify_all();
    lock.unlock();
    if (e.thread.joinable()) e.thread.join();
    lock.lock();
}

// Checks the wait list and the signal event of an append (lock held).
ze_result_t event_args(ze_event_handle_t hSignal, uint32_t numWait, ze_event_handle_t* phWait, Task& t) {
    if (numWait > 0 && phWait == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    for (uint32_t i = 0; i < numWait; ++i) {
        Event* ev = event_of(phWait[i]);
        if (ev == nullptr) return bad_handle(phWait[i]);
        t.waits.push_back(ev->id);
    }
    if (hSignal != nullptr) {
        Event* ev = event_of(hSignal);
        if (ev == nullptr) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
        t.signal = ev->id;
    }
    return ZE_RESULT_SUCCESS;
}

// Appends a task to a list (lock held): recorded on a regular list, queued on an
// immediate one. An immediate list that hit a device fault refuses further work with
// ZE_RESULT_ERROR_DEVICE_LOST.
ze_result_t append(Lock& lock, CmdList& l, Task t) {
    if (l.immediate && l.engine->sticky != ZE_RESULT_SUCCESS) return l.engine->sticky;
    if (!l.immediate) {
        if (l.closed) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
        l.recorded.push_back(std::move(t));
        return ZE_RESULT_SUCCESS;
    }
    std::vector<Task> one;
    one.push_back(std::move(t));
    submit(lock, *l.engine, std::move(one));
    return ZE_RESULT_SUCCESS;
}

ze_result_t check_queue_desc(const ze_command_queue_desc_t* desc) {
    if (desc == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (desc->ordinal != 0 || desc->index != 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;  // one group, one queue
    return ZE_RESULT_SUCCESS;
}

// The append-time memory check of one copy (lock held).
ze_result_t prepare_copy(const CmdList& l, CopyOp& c, size_t dst_extent, size_t src_extent) {
    ze_result_t r = check_range(c.dst, dst_extent, l.device, true, c.dst_ref);
    if (r != ZE_RESULT_SUCCESS) return r;
    return check_range(c.src, src_extent, l.device, false, c.src_ref);
}

}  // namespace

// ---------------------------------------------------------------------------------
// Command queues.
ze_result_t ZE_APICALL CommandQueueCreate(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                          const ze_command_queue_desc_t* desc, ze_command_queue_handle_t* phCommandQueue) {
    FaultOutcome f = enter("zeCommandQueueCreate");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    const auto [looked_up, c, d] = context_and_device(hContext, hDevice);
    if (looked_up != ZE_RESULT_SUCCESS) return looked_up;
    if (phCommandQueue == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (ze_result_t r = check_queue_desc(desc); r != ZE_RESULT_SUCCESS) return r;
    if (!context_has(*c, d->native)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    auto q = std::make_unique<Queue>();
    q->id = s.next_id++;
    q->ctx = c->id;
    q->device = d->native;
    q->engine = start_engine("command queue " + std::to_string(q->id), d->native,
                             desc->mode == ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
    *phCommandQueue = make_handle<ze_command_queue_handle_t>(Kind::Queue, q->id);
    s.queues[q->id] = std::move(q);
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL CommandQueueDestroy(ze_command_queue_handle_t hCommandQueue) {
    FaultOutcome f = enter("zeCommandQueueDestroy");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    Lock lock(s.mu);
    Queue* q = queue_of(hCommandQueue);
    if (q == nullptr) return bad_handle(hCommandQueue);
    const uint64_t id = q->id;
    stop_engine(lock, *q->engine);
    s.queues.erase(id);
    return ZE_RESULT_SUCCESS;
}

// Fences are not modelled: a non-null fence gives ZE_RESULT_ERROR_UNSUPPORTED_FEATURE.
ze_result_t ZE_APICALL CommandQueueExecuteCommandLists(ze_command_queue_handle_t hCommandQueue, uint32_t numCommandLists,
                                                       ze_command_list_handle_t* phCommandLists, ze_fence_handle_t hFence) {
    FaultOutcome f = enter("zeCommandQueueExecuteCommandLists");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    Lock lock(s.mu);
    Queue* q = queue_of(hCommandQueue);
    if (q == nullptr) return bad_handle(hCommandQueue);
    if (hFence != nullptr) return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
    if (numCommandLists == 0) return ZE_RESULT_ERROR_INVALID_SIZE;
    if (phCommandLists == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    std::vector<Task> tasks;
    for (uint32_t i = 0; i < numCommandLists; ++i) {
        CmdList* l = list_of(phCommandLists[i]);
        if (l == nullptr) return bad_handle(phCommandLists[i]);
        if (l->immediate || !l->closed || l->device != q->device) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
        tasks.insert(tasks.end(), l->recorded.begin(), l->recorded.end());
    }
    submit(lock, *q->engine, std::move(tasks));
    return ZE_RESULT_SUCCESS;
}

// Waits until everything submitted so far has run: ZE_RESULT_NOT_READY on timeout,
// ZE_RESULT_ERROR_DEVICE_LOST after a device fault on this queue.
ze_result_t ZE_APICALL CommandQueueSynchronize(ze_command_queue_handle_t hCommandQueue, uint64_t timeout) {
    FaultOutcome f = enter("zeCommandQueueSynchronize");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    Lock lock(s.mu);
    Queue* q = queue_of(hCommandQueue);
    if (q == nullptr) return bad_handle(hCommandQueue);
    Engine* e = q->engine.get();
    const uint64_t target = e->submitted;
    if (!wait_for(lock, timeout, [&] { return e->done >= target; })) return ZE_RESULT_NOT_READY;
    return e->sticky;
}

// ---------------------------------------------------------------------------------
// Command lists.
ze_result_t ZE_APICALL CommandListCreate(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                         const ze_command_list_desc_t* desc, ze_command_list_handle_t* phCommandList) {
    FaultOutcome f = enter("zeCommandListCreate");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    const auto [looked_up, c, d] = context_and_device(hContext, hDevice);
    if (looked_up != ZE_RESULT_SUCCESS) return looked_up;
    if (desc == nullptr || phCommandList == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (desc->commandQueueGroupOrdinal != 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (!context_has(*c, d->native)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    auto l = std::make_unique<CmdList>();
    l->id = s.next_id++;
    l->ctx = c->id;
    l->device = d->native;
    *phCommandList = make_handle<ze_command_list_handle_t>(Kind::List, l->id);
    s.lists[l->id] = std::move(l);
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL CommandListCreateImmediate(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                                  const ze_command_queue_desc_t* altdesc,
                                                  ze_command_list_handle_t* phCommandList) {
    FaultOutcome f = enter("zeCommandListCreateImmediate");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    const auto [looked_up, c, d] = context_and_device(hContext, hDevice);
    if (looked_up != ZE_RESULT_SUCCESS) return looked_up;
    if (phCommandList == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (ze_result_t r = check_queue_desc(altdesc); r != ZE_RESULT_SUCCESS) return r;
    if (!context_has(*c, d->native)) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    auto l = std::make_unique<CmdList>();
    l->id = s.next_id++;
    l->ctx = c->id;
    l->device = d->native;
    l->immediate = true;
    l->engine = start_engine("immediate command list " + std::to_string(l->id), d->native,
                             altdesc->mode == ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS);
    *phCommandList = make_handle<ze_command_list_handle_t>(Kind::List, l->id);
    s.lists[l->id] = std::move(l);
    return ZE_RESULT_SUCCESS;
}

// An immediate list finishes the work that can run, then stops; work blocked on an
// event that is never signalled is dropped (counted in the ledger).
ze_result_t ZE_APICALL CommandListDestroy(ze_command_list_handle_t hCommandList) {
    FaultOutcome f = enter("zeCommandListDestroy");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    Lock lock(s.mu);
    CmdList* l = list_of(hCommandList);
    if (l == nullptr) return bad_handle(hCommandList);
    const uint64_t id = l->id;
    if (l->engine) stop_engine(lock, *l->engine);
    s.lists.erase(id);
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL CommandListClose(ze_command_list_handle_t hCommandList) {
    FaultOutcome f = enter("zeCommandListClose");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    CmdList* l = list_of(hCommandList);
    if (l == nullptr) return bad_handle(hCommandList);
    l->closed = true;  // no effect on an immediate list
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL CommandListReset(ze_command_list_handle_t hCommandList) {
    FaultOutcome f = enter("zeCommandListReset");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    CmdList* l = list_of(hCommandList);
    if (l == nullptr) return bad_handle(hCommandList);
    l->recorded.clear();
    l->closed = false;
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL CommandListAppendMemoryCopy(ze_command_list_handle_t hCommandList, void* dstptr,
                                                   const void* srcptr, size_t size, ze_event_handle_t hSignalEvent,
                                                   uint32_t numWaitEvents, ze_event_handle_t* phWaitEvents) {
    FaultOutcome f = enter_sized("zeCommandListAppendMemoryCopy", size);
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    Lock lock(S().mu);
    CmdList* l = list_of(hCommandList);
    if (l == nullptr) return bad_handle(hCommandList);
    if (dstptr == nullptr || srcptr == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    Task t;
    t.what = "zeCommandListAppendMemoryCopy";
    t.exec_delay_us = f.exec_delay_us;
    if (ze_result_t r = event_args(hSignalEvent, numWaitEvents, phWaitEvents, t); r != ZE_RESULT_SUCCESS) return r;
    t.has_copy = true;
    t.copy.dst = reinterpret_cast<uintptr_t>(dstptr);
    t.copy.src = reinterpret_cast<uintptr_t>(srcptr);
    t.copy.width = size;
    if (ze_result_t r = prepare_copy(*l, t.copy, size, size); r != ZE_RESULT_SUCCESS) return r;
    return append(lock, *l, std::move(t));
}

// Region copies. Width is in bytes; depth 0 means a 2-D copy (originZ and the slice
// pitches are then ignored); width 0 or height 0 copies nothing. Source and
// destination must have the same width, height and depth; a row must fit in the row
// pitch (originX + width <= pitch) whenever more than one row is addressed, and a
// slice in the slice pitch whenever more than one slice is addressed
// (else ZE_RESULT_ERROR_INVALID_ARGUMENT).
ze_result_t ZE_APICALL CommandListAppendMemoryCopyRegion(
    ze_command_list_handle_t hCommandList, void* dstptr, const ze_copy_region_t* dstRegion, uint32_t dstPitch,
    uint32_t dstSlicePitch, const void* srcptr, const ze_copy_region_t* srcRegion, uint32_t srcPitch,
    uint32_t srcSlicePitch, ze_event_handle_t hSignalEvent, uint32_t numWaitEvents, ze_event_handle_t* phWaitEvents) {
    FaultOutcome f = enter("zeCommandListAppendMemoryCopyRegion");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    Lock lock(S().mu);
    CmdList* l = list_of(hCommandList);
    if (l == nullptr) return bad_handle(hCommandList);
    if (dstptr == nullptr || srcptr == nullptr || dstRegion == nullptr || srcRegion == nullptr)
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    const ze_copy_region_t& dr = *dstRegion;
    const ze_copy_region_t& sr = *srcRegion;
    if (dr.width != sr.width || dr.height != sr.height || dr.depth != sr.depth) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    Task t;
    t.what = "zeCommandListAppendMemoryCopyRegion";
    t.exec_delay_us = f.exec_delay_us;
    if (ze_result_t r = event_args(hSignalEvent, numWaitEvents, phWaitEvents, t); r != ZE_RESULT_SUCCESS) return r;
    const bool three_d = sr.depth != 0;
    // Offset of the region's first byte and the extent of the bytes it spans, for one
    // side; false when the pitches cannot hold the region.
    auto side = [&](const ze_copy_region_t& g, uint64_t pitch, uint64_t slice, uint64_t& first, uint64_t& extent) {
        const uint64_t rows = g.height, slices = three_d ? g.depth : 1;
        const uint64_t oz = three_d ? g.originZ : 0;
        if ((rows > 1 || g.originY > 0) && uint64_t(g.originX) + g.width > pitch) return false;
        const uint64_t slice_span = (uint64_t(g.originY) + rows - 1) * pitch + g.originX + g.width;
        if ((slices > 1 || oz > 0) && slice_span > slice) return false;
        first = oz * slice + uint64_t(g.originY) * pitch + g.originX;
        extent = (slices - 1) * slice + (rows - 1) * pitch + g.width;
        return true;
    };
    uint64_t dfirst = 0, dext = 0, sfirst = 0, sext = 0;
    const bool empty = sr.width == 0 || sr.height == 0;
    if (!empty && (!side(dr, dstPitch, dstSlicePitch, dfirst, dext) || !side(sr, srcPitch, srcSlicePitch, sfirst, sext)))
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (!empty) {
        t.has_copy = true;
        CopyOp& c = t.copy;
        c.dst = reinterpret_cast<uintptr_t>(dstptr) + dfirst;
        c.src = reinterpret_cast<uintptr_t>(srcptr) + sfirst;
        c.width = sr.width;
        c.height = sr.height;
        c.depth = three_d ? sr.depth : 1;
        c.dst_pitch = dstPitch;
        c.src_pitch = srcPitch;
        c.dst_slice = dstSlicePitch;
        c.src_slice = srcSlicePitch;
        if (ze_result_t r = prepare_copy(*l, c, dext, sext); r != ZE_RESULT_SUCCESS) return r;
    }
    return append(lock, *l, std::move(t));
}

// The lists are in order, so a barrier only waits and signals.
ze_result_t ZE_APICALL CommandListAppendBarrier(ze_command_list_handle_t hCommandList, ze_event_handle_t hSignalEvent,
                                                uint32_t numWaitEvents, ze_event_handle_t* phWaitEvents) {
    FaultOutcome f = enter("zeCommandListAppendBarrier");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    Lock lock(S().mu);
    CmdList* l = list_of(hCommandList);
    if (l == nullptr) return bad_handle(hCommandList);
    Task t;
    t.what = "zeCommandListAppendBarrier";
    t.exec_delay_us = f.exec_delay_us;
    if (ze_result_t r = event_args(hSignalEvent, numWaitEvents, phWaitEvents, t); r != ZE_RESULT_SUCCESS) return r;
    return append(lock, *l, std::move(t));
}

ze_result_t ZE_APICALL CommandListAppendSignalEvent(ze_command_list_handle_t hCommandList, ze_event_handle_t hEvent) {
    FaultOutcome f = enter("zeCommandListAppendSignalEvent");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    Lock lock(S().mu);
    CmdList* l = list_of(hCommandList);
    if (l == nullptr) return bad_handle(hCommandList);
    if (hEvent == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    Task t;
    t.what = "zeCommandListAppendSignalEvent";
    t.exec_delay_us = f.exec_delay_us;
    if (ze_result_t r = event_args(hEvent, 0, nullptr, t); r != ZE_RESULT_SUCCESS) return r;
    return append(lock, *l, std::move(t));
}

ze_result_t ZE_APICALL CommandListAppendWaitOnEvents(ze_command_list_handle_t hCommandList, uint32_t numEvents,
                                                     ze_event_handle_t* phEvents) {
    FaultOutcome f = enter("zeCommandListAppendWaitOnEvents");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    Lock lock(S().mu);
    CmdList* l = list_of(hCommandList);
    if (l == nullptr) return bad_handle(hCommandList);
    Task t;
    t.what = "zeCommandListAppendWaitOnEvents";
    t.exec_delay_us = f.exec_delay_us;
    if (ze_result_t r = event_args(nullptr, numEvents, phEvents, t); r != ZE_RESULT_SUCCESS) return r;
    return append(lock, *l, std::move(t));
}

// ---------------------------------------------------------------------------------
// Events.
ze_result_t ZE_APICALL EventPoolCreate(ze_context_handle_t hContext, const ze_event_pool_desc_t* desc,
                                       uint32_t numDevices, ze_device_handle_t* phDevices,
                                       ze_event_pool_handle_t* phEventPool) {
    FaultOutcome f = enter("zeEventPoolCreate");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    Context* c = context_of(hContext);
    if (c == nullptr) return bad_handle(hContext);
    if (desc == nullptr || phEventPool == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    if (numDevices > 0 && phDevices == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    for (uint32_t i = 0; i < numDevices; ++i)
        if (device_of(phDevices[i]) == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (desc->count == 0) return ZE_RESULT_ERROR_INVALID_SIZE;
    EventPool p;
    p.id = s.next_id++;
    p.ctx = c->id;
    p.count = desc->count;
    p.slots.assign(desc->count, 0);
    s.pools[p.id] = p;
    *phEventPool = make_handle<ze_event_pool_handle_t>(Kind::EventPool, p.id);
    return ZE_RESULT_SUCCESS;
}

// Refused with ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE while events of the pool live.
ze_result_t ZE_APICALL EventPoolDestroy(ze_event_pool_handle_t hEventPool) {
    FaultOutcome f = enter("zeEventPoolDestroy");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.pools.find(handle_id(hEventPool, Kind::EventPool));
    if (it == s.pools.end()) return bad_handle(hEventPool);
    for (uint64_t id : it->second.slots)
        if (id != 0) return ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
    s.pools.erase(it);
    return ZE_RESULT_SUCCESS;
}

// An index outside the pool or already in use: ZE_RESULT_ERROR_INVALID_ARGUMENT.
ze_result_t ZE_APICALL EventCreate(ze_event_pool_handle_t hEventPool, const ze_event_desc_t* desc,
                                   ze_event_handle_t* phEvent) {
    FaultOutcome f = enter("zeEventCreate");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.pools.find(handle_id(hEventPool, Kind::EventPool));
    if (it == s.pools.end()) return bad_handle(hEventPool);
    if (desc == nullptr || phEvent == nullptr) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    EventPool& p = it->second;
    if (desc->index >= p.count || p.slots[desc->index] != 0) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    Event e;
    e.id = s.next_id++;
    e.pool = p.id;
    e.index = desc->index;
    p.slots[desc->index] = e.id;
    s.events[e.id] = e;
    *phEvent = make_handle<ze_event_handle_t>(Kind::Event, e.id);
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL EventDestroy(ze_event_handle_t hEvent) {
    FaultOutcome f = enter("zeEventDestroy");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    Event* e = event_of(hEvent);
    if (e == nullptr) return bad_handle(hEvent);
    auto p = s.pools.find(e->pool);
    if (p != s.pools.end()) p->second.slots[e->index] = 0;
    s.events.erase(e->id);
    s.cv.notify_all();
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL EventHostSignal(ze_event_handle_t hEvent) {
    FaultOutcome f = enter("zeEventHostSignal");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    Event* e = event_of(hEvent);
    if (e == nullptr) return bad_handle(hEvent);
    e->signaled = true;
    e->faulted = false;
    S().cv.notify_all();
    return ZE_RESULT_SUCCESS;
}

// Timeout in nanoseconds (UINT64_MAX waits forever); ZE_RESULT_NOT_READY on timeout;
// ZE_RESULT_ERROR_DEVICE_LOST when the work that signalled it hit a device fault.
ze_result_t ZE_APICALL EventHostSynchronize(ze_event_handle_t hEvent, uint64_t timeout) {
    FaultOutcome f = enter("zeEventHostSynchronize");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    State& s = S();
    Lock lock(s.mu);
    if (event_of(hEvent) == nullptr) return bad_handle(hEvent);
    const uint64_t id = handle_id(hEvent, Kind::Event);
    bool ok = wait_for(lock, timeout, [&] {
        auto it = s.events.find(id);
        return it == s.events.end() || it->second.signaled;
    });
    if (!ok) return ZE_RESULT_NOT_READY;
    auto it = s.events.find(id);
    if (it == s.events.end()) return ZE_RESULT_ERROR_INVALID_ARGUMENT;  // destroyed meanwhile
    return it->second.faulted ? ZE_RESULT_ERROR_DEVICE_LOST : ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL EventQueryStatus(ze_event_handle_t hEvent) {
    FaultOutcome f = enter("zeEventQueryStatus");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    Event* e = event_of(hEvent);
    if (e == nullptr) return bad_handle(hEvent);
    if (!e->signaled) return ZE_RESULT_NOT_READY;
    return e->faulted ? ZE_RESULT_ERROR_DEVICE_LOST : ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL EventHostReset(ze_event_handle_t hEvent) {
    FaultOutcome f = enter("zeEventHostReset");
    if (f.result != ZE_RESULT_SUCCESS) return f.result;
    std::lock_guard<std::mutex> lock(S().mu);
    Event* e = event_of(hEvent);
    if (e == nullptr) return bad_handle(hEvent);
    e->signaled = false;
    e->faulted = false;
    return ZE_RESULT_SUCCESS;
}

// ---------------------------------------------------------------------------------
// Reset support and the ledger.
void stop_engines_locked(std::vector<std::thread>& threads) {
    auto stop = [&](Engine& e) {
        e.abort = true;
        e.pending.clear();
        e.done = e.submitted;
        if (e.thread.joinable()) threads.push_back(std::move(e.thread));
    };
    for (auto& [id, l] : S().lists)
        if (l->engine) stop(*l->engine);
    for (auto& [id, q] : S().queues) stop(*q->engine);
}

void release_commands_locked() {
    State& s = S();
    s.lists.clear();
    s.queues.clear();
    s.events.clear();
    s.pools.clear();
}

size_t count_command_objects_locked() {
    const State& s = S();
    return s.lists.size() + s.queues.size() + s.pools.size() + s.events.size();
}

void ledger_commands_locked(std::string& out) {
    const State& s = S();
    auto engine_state = [](const Engine& e) {
        return " pending=" + std::to_string(e.pending.size() + (e.busy ? 1 : 0)) +
               " dropped=" + std::to_string(e.dropped) +
               (e.sticky != ZE_RESULT_SUCCESS ? std::string(" error=") + result_name(e.sticky) : std::string());
    };
    for (const auto& [id, q] : s.queues)
        out += "command queue " + std::to_string(id) + " context=" + std::to_string(q->ctx) +
               " device=" + std::to_string(q->device) + engine_state(*q->engine) + "\n";
    for (const auto& [id, l] : s.lists) {
        out += std::string(l->immediate ? "immediate command list " : "command list ") + std::to_string(id) +
               " context=" + std::to_string(l->ctx) + " device=" + std::to_string(l->device);
        out += l->engine ? engine_state(*l->engine) : " recorded=" + std::to_string(l->recorded.size());
        out += "\n";
    }
    for (const auto& [id, p] : s.pools)
        out += "event pool " + std::to_string(id) + " context=" + std::to_string(p.ctx) +
               " count=" + std::to_string(p.count) + "\n";
    for (const auto& [id, e] : s.events)
        out += "event " + std::to_string(id) + " pool=" + std::to_string(e.pool) + " index=" +
               std::to_string(e.index) + (e.signaled ? " signalled" : " not signalled") + "\n";
}

}  // namespace xmc_fake_ze
