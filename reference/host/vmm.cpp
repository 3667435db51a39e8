// Fixed-address slots on the host (capability `vmm`, VMM-*), after
// reference/model/slot_model.hpp. A slot is a range reserved with
// mmap(PROT_NONE); its physical memory is a memfd mapped over it with
// MAP_FIXED, read/write. Release puts a PROT_NONE mapping back in one step
// (the range is never free for another mapping to take) and closes the memfd,
// so an access while released faults (VMM-UNMAPPED-FAULTS). Remap maps a
// fresh memfd at the same address (VMM-STABLE) and copies from a pinned host
// source on the request's stream (VMM-REMAP-COPY).
//
// Order: release and remap are requests. A host callback on the caller's
// stream marks the point after the stream's prior work (VMM-RELEASE-ORDER) and
// only hands the request to the workers (VMM-CALLBACK). A worker runs only
// requests whose dependencies are met (a remap after its slots' releases, a
// release after the copies into its slots), so no worker ever waits for work
// queued behind it: one worker is enough (VMM-SERIAL).
//
// The "device" is the host: kDeviceBytes of memory that the slots' backing
// draws from, reported by device_free_memory. Everything below runs under one
// lock per instance, except the copies, which the streams run.
#include "host.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace xmc::host {

namespace {

constexpr size_t kGranularity = size_t{2} << 20;     // as cuMemGetAllocationGranularity on an H200
constexpr uint64_t kDeviceBytes = uint64_t{1} << 30;  // the host device's memory (declared, fixed)

// One device per process, shared by every instance, as a GPU is.
std::mutex g_device_mu;
uint64_t g_device_used = 0;

bool take_device_memory(size_t n) {
    std::lock_guard<std::mutex> lock(g_device_mu);
    if (kDeviceBytes - g_device_used < n) return false;
    g_device_used += n;
    return true;
}

void give_device_memory(size_t n) {
    std::lock_guard<std::mutex> lock(g_device_mu);
    g_device_used -= n;
}

struct Request;

enum class SlotState { Mapped, ReleasePending, Released, RemapPending };

struct Slot {
    uintptr_t addr = 0;
    size_t size = 0;
    int fd = -1;  // the memfd mapped now, or -1 while released
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

enum class CopyState : uint8_t { None, Launched, Done };

struct Request {
    bool remap = false;
    bool defer = false;
    xmc_stream *stream = nullptr;
    std::vector<std::shared_ptr<Slot>> slots;
    std::vector<const void *> srcs;
    std::vector<CopyState> copies;  // per slot
    bool fired = false;             // the stream reached it
    bool done = false;              // a worker ran it
    bool adopted = false;
    xmc_status status = XMC_OK;     // the first failure
    int64_t native = 0;
    std::string what;
    uint32_t copies_launched = 0;
    uint32_t copies_done = 0;
};

} // namespace

struct Vmm {
    unsigned workers = 4;
    uint64_t fail_map = 0, fail_unmap = 0;  // test only: the K-th worker map / unmap fails (VMM-ASYNC-ERROR)
    uint64_t maps = 0, unmaps = 0;          // worker maps and unmaps so far

    std::mutex mu;
    std::condition_variable cv;  // every change of a slot or request is announced here
    std::map<xmc_slot *, std::shared_ptr<Slot>> slots;
    std::map<xmc_request *, std::shared_ptr<Request>> requests;
    std::deque<std::shared_ptr<Request>> jobs;  // fired, not yet run
    std::vector<std::thread> threads;
    bool stop = false;
};

VmmSeams &vmm_seams() {
    static VmmSeams seams;
    return seams;
}

std::shared_ptr<Vmm> vmm_create() { return std::make_shared<Vmm>(); }

bool vmm_option(Instance *in, const std::string &key, const std::string &value, xmc_status *st) {
    uint64_t *target = key == "vmm_fail_map" ? &in->vmm->fail_map : key == "vmm_fail_unmap" ? &in->vmm->fail_unmap
                                                                                             : nullptr;
    if (key != "vmm_workers" && !target) return false;
    char *end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
    const bool number = !value.empty() && value[0] >= '0' && value[0] <= '9' && *end == 0 && errno == 0;
    if (key == "vmm_workers") {
        *st = number && v >= 1 && v <= 64 ? XMC_OK : XMC_ERR_INVALID_ARGUMENT;
        if (*st == XMC_OK) in->vmm->workers = static_cast<unsigned>(v);
    } else {
        *st = number && v >= 1 ? XMC_OK : XMC_ERR_INVALID_ARGUMENT;
        if (*st == XMC_OK) *target = v;
    }
    return true;
}

namespace {

Vmm &vmm_of(xmc_instance *inst) { return *static_cast<Instance *>(inst)->vmm; }

// Slot and request handles: never reused, and unique across the process, so
// a stale handle or another instance's is refused (a counter per instance
// made slot 1 of one instance slot 1 of every other: test_hostile's VMM_STATE).
uintptr_t next_handle() {
    static std::atomic<uintptr_t> next{1};
    return next.fetch_add(1);
}

// ---- the host "driver": physical memory of a slot -------------------------

// Fresh memory at the slot's address. `counted`: a worker's map, which the
// test-only fault injection may fail (the injected failure comes after the
// memfd exists, so its undoing is exercised too).
int map_backing(Vmm &v, Slot &s, bool counted) {
    if (!take_device_memory(s.size)) return ENOMEM;
    const int fd = memfd_create("xmc-slot", MFD_CLOEXEC);
    int err = fd < 0 ? errno : 0;
    if (!err && ftruncate(fd, static_cast<off_t>(s.size)) != 0) err = errno;
    if (!err && counted && ++v.maps == v.fail_map) err = ENOMEM;
    if (!err && counted && vmm_seams().remap_moves_slot) {
        // Planted bug (self-test only): no MAP_FIXED, so the slot moves.
        void *p = mmap(nullptr, s.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) err = errno;
        else s.addr = reinterpret_cast<uintptr_t>(p);
    } else if (!err && mmap(reinterpret_cast<void *>(s.addr), s.size, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
        err = errno;
    if (err) {
        if (fd >= 0) ::close(fd);
        give_device_memory(s.size);
        return err;
    }
    s.fd = fd;
    return 0;
}

// PROT_NONE back over the range in one step, then the memfd goes (its memory
// with it: the mapping was its last user).
int unmap_backing(Vmm &v, Slot &s, bool counted) {
    if (counted && ++v.unmaps == v.fail_unmap) return ENOMEM;
    if (mmap(reinterpret_cast<void *>(s.addr), s.size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
        return errno;
    ::close(s.fd);
    s.fd = -1;
    give_device_memory(s.size);
    return 0;
}

void record(Request &r, xmc_status st, int64_t native, const std::string &what) {
    if (r.status != XMC_OK) return;  // the first failure is the request's
    r.status = st;
    r.native = native;
    r.what = what;
}

std::string errno_text(const char *op, const Slot &s, int err) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s of slot %#lx failed: %s", op, static_cast<unsigned long>(s.addr),
                  std::strerror(err));
    return buf;
}

// ---- workers --------------------------------------------------------------

// A remap waits for its slots' releases; a release for the copies into its
// slots. Nothing else: requests of other slots never hold one up.
bool ready(const Request &r) {
    for (const auto &s : r.slots)
        if (r.remap ? s->release_queued : s->copies > 0) return false;
    return true;
}

xmc_status start_copy(xmc_instance *inst, const std::shared_ptr<Request> &r, size_t i, xmc_stream *stream,
                      const char *call);

void run_release(Vmm &v, Request &r) {
    for (const auto &s : r.slots) {
        if (int err = unmap_backing(v, *s, true)) {
            record(r, XMC_ERR_DRIVER, err, errno_text("mmap(PROT_NONE)", *s, err));
            s->release_status = XMC_ERR_DRIVER;
            s->release_native = err;
        }
        s->release_queued = false;
        --s->jobs;
        // A remap asked meanwhile finds out for itself; otherwise the slot
        // is released, or still mapped when the unmap failed.
        if (s->state == SlotState::ReleasePending && s->pending == &r) {
            s->state = s->fd >= 0 ? SlotState::Mapped : SlotState::Released;
            s->pending = nullptr;
        }
    }
}

void run_remap(xmc_instance *inst, Vmm &v, const std::shared_ptr<Request> &r) {
    size_t mapped = 0;
    for (const auto &s : r->slots) {
        if (s->fd >= 0) {  // its release failed: the slot was never unmapped
            record(*r, s->release_status, s->release_native,
                   "the release this remap waited for failed; slot still holds its old mapping");
            break;
        }
        if (int err = map_backing(v, *s, true)) {
            record(*r, XMC_ERR_DRIVER, err, errno_text("memfd mmap(MAP_FIXED)", *s, err));
            break;
        }
        ++mapped;
    }
    if (r->status != XMC_OK) {
        // Roll back every mapping this request made: none was adopted.
        for (size_t i = 0; i < mapped; ++i) unmap_backing(v, *r->slots[i], false);
        for (const auto &s : r->slots)
            if (s->state == SlotState::RemapPending && s->pending == r.get()) {
                s->state = s->fd >= 0 ? SlotState::Mapped : SlotState::Released;
                s->pending = nullptr;
                s->mapped_by = nullptr;
            }
    } else if (!r->defer) {
        for (size_t i = 0; i < r->slots.size(); ++i)
            if (xmc_status st = start_copy(inst, r, i, r->stream, "slot_remap"); st != XMC_OK)
                record(*r, st, 0, "the reload copy could not be enqueued: the remap's stream is gone");
    }
    for (const auto &s : r->slots) --s->jobs;
}

void run(xmc_instance *inst, Vmm &v, const std::shared_ptr<Request> &r) {
    if (r->remap) run_remap(inst, v, r);
    else run_release(v, *r);
    r->done = true;
    v.cv.notify_all();
}

void worker_loop(xmc_instance *inst, Vmm *v) {
    std::unique_lock<std::mutex> lock(v->mu);
    for (;;) {
        std::shared_ptr<Request> r;
        if (vmm_seams().serial_remap_blocks_worker && v->workers == 1 && !v->jobs.empty()) {
            // Planted bug (self-test only): the serial worker takes the next
            // request and waits for it to become ready, holding the queue.
            r = v->jobs.front();
            v->jobs.pop_front();
            v->cv.wait(lock, [&] { return ready(*r); });
        } else {
            auto it = std::find_if(v->jobs.begin(), v->jobs.end(), [](const auto &j) { return ready(*j); });
            if (it == v->jobs.end()) {
                if (v->stop && v->jobs.empty()) return;
                v->cv.wait(lock);
                continue;
            }
            r = *it;
            v->jobs.erase(it);
        }
        run(inst, *v, r);
    }
}

void start_workers(xmc_instance *inst, Vmm &v) {
    if (!v.threads.empty()) return;
    for (unsigned i = 0; i < v.workers; ++i) v.threads.emplace_back(worker_loop, inst, &v);
}

// The stream reached the request: hand it to the workers, and nothing else
// (VMM-CALLBACK: a driver call here may be refused, or stall the stream).
void on_stream_point(xmc_instance *inst, const std::shared_ptr<Vmm> &vp, const std::shared_ptr<Request> &r) {
    Vmm &v = *vp;
    std::unique_lock<std::mutex> lock(v.mu);
    r->fired = true;
    if (vmm_seams().work_on_callback_thread) {
        // Planted bug (self-test only): the callback does the work itself.
        v.cv.wait(lock, [&] { return ready(*r); });
        run(inst, v, r);
        return;
    }
    v.jobs.push_back(r);
    v.cv.notify_all();
}

// Enqueues the reload copy of slot i of r on `stream`. Caller holds v.mu.
xmc_status start_copy(xmc_instance *inst, const std::shared_ptr<Request> &r, size_t i, xmc_stream *stream,
                      const char *call) {
    std::shared_ptr<Slot> s = r->slots[i];
    const void *src = r->srcs[i];
    std::shared_ptr<Vmm> vp = static_cast<Instance *>(inst)->vmm;
    xmc_status st = enqueue(inst, stream, call, [vp, r, s, src, i] {
        std::memcpy(reinterpret_cast<void *>(s->addr), src, s->size);
        std::lock_guard<std::mutex> lock(vp->mu);
        r->copies[i] = CopyState::Done;
        ++r->copies_done;
        --s->copies;
        vp->cv.notify_all();
    });
    if (st != XMC_OK) return st;
    r->copies[i] = CopyState::Launched;
    ++r->copies_launched;
    ++s->copies;
    return XMC_OK;
}

// ---- requests -------------------------------------------------------------

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

// A remap source: pinned, starting at its block's base, the block holding at
// least src_bytes >= the slot's size (VMM-REMAP-COPY).
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

// slot_release, slot_remap and their batches: every refusal before any change,
// in the model's order (arguments, handles, duplicates, sources, states).
xmc_status submit(xmc_instance *inst, const char *call, bool remap, xmc_slot *const *handles, size_t n,
                  xmc_stream *stream, const void *const *srcs, const size_t *src_bytes, uint32_t flags,
                  xmc_request **out) {
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
    if (remap) {
        r->srcs.assign(srcs, srcs + n);
        r->copies.assign(n, CopyState::None);
    }
    std::shared_ptr<Vmm> vp = static_cast<Instance *>(inst)->vmm;
    if (xmc_status st = enqueue(inst, stream, call, [inst, vp, r] { on_stream_point(inst, vp, r); }); st != XMC_OK)
        return st;  // the stream: the one refusal known only now, before any change
    for (const auto &s : r->slots) {
        s->state = remap ? SlotState::RemapPending : SlotState::ReleasePending;
        s->pending = r.get();
        s->mapped_by = remap ? r.get() : nullptr;
        if (!remap) s->release_queued = true;
        ++s->jobs;
    }
    auto *h = reinterpret_cast<xmc_request *>(next_handle());
    v.requests[h] = r;
    *out = h;
    return XMC_OK;
}

} // namespace

// ---- entry points -----------------------------------------------------------

xmc_status slot_create(xmc_instance *inst, int32_t device, size_t bytes, xmc_slot **out, xmc_slot_info *info) {
    if (!out || !info) return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "slot_create", "slot_create: NULL result");
    if (device != 0)
        return be::fail(inst, XMC_ERR_NO_DEVICE, 0, "slot_create", "slot_create: no device %d (the host has device 0)",
                        device);
    // The largest size whose rounded-up size plus the granule reserved for
    // trimming (below) does not overflow size_t.
    constexpr size_t kMaxBytes = SIZE_MAX / kGranularity * kGranularity - kGranularity;
    if (bytes == 0 || bytes > kMaxBytes)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "slot_create",
                        "slot_create: size %zu is 0 or overflows when rounded up to the granularity %zu", bytes,
                        kGranularity);
    auto s = std::make_shared<Slot>();
    s->size = (bytes + kGranularity - 1) / kGranularity * kGranularity;
    // Reserve one granule more and trim, so the range is granule-aligned as
    // cuMemAddressReserve's is.
    void *p = mmap(nullptr, s->size + kGranularity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, errno, "slot_create",
                        "slot_create: mmap(PROT_NONE) of %zu bytes: %s", s->size, std::strerror(errno));
    const auto raw = reinterpret_cast<uintptr_t>(p);
    s->addr = (raw + kGranularity - 1) / kGranularity * kGranularity;
    if (s->addr > raw) munmap(p, s->addr - raw);
    munmap(reinterpret_cast<void *>(s->addr + s->size), raw + kGranularity - s->addr);
    Vmm &v = vmm_of(inst);
    if (int err = map_backing(v, *s, false)) {
        munmap(reinterpret_cast<void *>(s->addr), s->size);
        return be::fail(inst, err == ENOMEM ? XMC_ERR_OUT_OF_MEMORY : XMC_ERR_DRIVER, err, "slot_create",
                        "slot_create: mapping %zu bytes of device memory: %s", s->size, std::strerror(err));
    }
    std::lock_guard<std::mutex> lock(v.mu);
    start_workers(inst, v);
    auto *h = reinterpret_cast<xmc_slot *>(next_handle());
    v.slots[h] = s;
    *out = h;
    *info = xmc_slot_info{reinterpret_cast<void *>(s->addr), s->size, 0};
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

xmc_status request_launch_copy(xmc_instance *inst, xmc_request *h, uint32_t index, xmc_stream *s) {
    const char *call = "request_launch_copy";
    Vmm &v = vmm_of(inst);
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r = find_request(v, h);
    if (!r) return bad_request(inst, call, h);
    if (!r->remap || !r->defer || index >= r->slots.size())
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call,
                        "%s: needs a deferred-copy remap request and a slot index below %zu (got %u)", call,
                        r->slots.size(), index);
    // Once per slot (VMM-DEFERRED); claimed before waiting so a concurrent
    // second launch is refused too.
    if (r->copies[index] != CopyState::None)
        return be::fail(inst, XMC_ERR_BUSY, 0, call, "%s: the copy of slot %u was already launched", call, index);
    r->copies[index] = CopyState::Launched;
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
    return start_copy(inst, r, index, s, call);
}

xmc_status request_wait(xmc_instance *inst, xmc_request *h, uint32_t timeout_ms) {
    Vmm &v = vmm_of(inst);
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r = find_request(v, h);
    if (!r) return bad_request(inst, "request_wait", h);
    // The worker's part and every copy started so far.
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
    v.cv.wait(lock, [&] { return r->done; });  // the mapping must exist to change owner
    if (r->adopted) return be::fail(inst, XMC_ERR_BUSY, 0, call, "%s: already adopted", call);
    if (r->status != XMC_OK)
        return be::fail(inst, XMC_ERR_BUSY, r->native, call, "%s: the remap failed (%s): nothing to adopt", call,
                        r->what.c_str());
    for (const auto &s : r->slots)
        if (!s->closed && s->state == SlotState::RemapPending && s->pending == r.get()) {
            s->state = SlotState::Mapped;  // the slot's own now: destroying the request leaves it (VMM-ADOPT)
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

xmc_status request_stream_wait(xmc_instance *inst, xmc_request *h, xmc_stream *s) {
    const char *call = "request_stream_wait";
    Vmm &v = vmm_of(inst);
    std::lock_guard<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r = find_request(v, h);
    if (!r) return bad_request(inst, call, h);
    if (!r->remap)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, call, "%s: a release request has no copies", call);
    // The copies to wait for: all of a remap's own, or the deferred ones
    // launched by now. Decided here, and waited for on the stream whether or
    // not a worker has started them yet (VMM-EVENT-WAIT).
    std::vector<size_t> which;
    for (size_t i = 0; i < r->copies.size(); ++i)
        if (!r->defer || r->copies[i] != CopyState::None) which.push_back(i);
    std::shared_ptr<Vmm> vp = static_cast<Instance *>(inst)->vmm;
    return enqueue(inst, s, call, [vp, r, which] {
        std::unique_lock<std::mutex> lock(vp->mu);
        vp->cv.wait(lock, [&] {
            for (size_t i : which)  // done, or never to start: the remap failed
                if (r->copies[i] != CopyState::Done && !(r->done && r->copies[i] == CopyState::None)) return false;
            return true;
        });
    });
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
                // Never adopted: the request's mapping goes with it (kept,
                // as the slot's own, in the unlikely case the unmap fails).
                s->state = unmap_backing(v, *s, false) == 0 ? SlotState::Released : SlotState::Mapped;
                s->pending = nullptr;
                s->mapped_by = nullptr;
            }
    v.cv.notify_all();
    return XMC_OK;
}

// Unmaps and frees a slot once no work on it is in flight (VMM-CLOSE).
// Caller holds v.mu; the slot has left the handle map.
static void close_slot(Vmm &v, std::unique_lock<std::mutex> &lock, Slot &s) {
    const bool skip_copies = vmm_seams().close_skips_copy_wait;  // planted bug (self-test only)
    v.cv.wait(lock, [&] { return s.jobs == 0 && (skip_copies || s.copies == 0); });
    munmap(reinterpret_cast<void *>(s.addr), s.size);
    if (s.fd >= 0) {
        ::close(s.fd);
        s.fd = -1;
        give_device_memory(s.size);
    }
    s.closed = true;
    v.cv.notify_all();
}

xmc_status slot_close(xmc_instance *inst, xmc_slot *h) {
    Vmm &v = vmm_of(inst);
    std::unique_lock<std::mutex> lock(v.mu);
    std::shared_ptr<Slot> s = find_slot(v, h);
    if (!s)
        return be::fail(inst, XMC_ERR_INVALID_HANDLE, 0, "slot_close", "slot_close: %p is not a live slot",
                        static_cast<void *>(h));
    v.slots.erase(h);
    close_slot(v, lock, *s);
    return XMC_OK;
}

xmc_status device_free_memory(xmc_instance *inst, int32_t device, uint64_t *free_bytes, uint64_t *total_bytes) {
    if (!free_bytes || !total_bytes)
        return be::fail(inst, XMC_ERR_INVALID_ARGUMENT, 0, "device_free_memory", "device_free_memory: NULL result");
    if (device != 0)
        return be::fail(inst, XMC_ERR_NO_DEVICE, 0, "device_free_memory",
                        "device_free_memory: no device %d (the host has device 0)", device);
    std::lock_guard<std::mutex> lock(g_device_mu);
    *free_bytes = kDeviceBytes - g_device_used;
    *total_bytes = kDeviceBytes;
    return XMC_OK;
}

void vmm_close(Instance *in) {
    Vmm &v = *in->vmm;
    std::unique_lock<std::mutex> lock(v.mu);
    while (!v.slots.empty()) {
        std::shared_ptr<Slot> s = v.slots.begin()->second;
        v.slots.erase(v.slots.begin());
        close_slot(v, lock, *s);
    }
    v.stop = true;
    v.cv.notify_all();
    lock.unlock();
    for (auto &t : v.threads) t.join();
}

} // namespace xmc::host
