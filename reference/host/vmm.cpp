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
#include "vmm_steps.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace xmc::host {

namespace {

constexpr size_t kGranularity = size_t{64} << 10;    // above a page (so rounding is exercised), not 2 MiB: the slot tests move data in granules
constexpr uint64_t kDeviceBytes = uint64_t{1} << 30;  // the host device's memory (declared, fixed)

// One device per process, shared by every instance, as a GPU is.
std::mutex g_device_mu;
uint64_t g_device_used = 0;

} // namespace

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

VmmSteps &vmm_steps() {
    static VmmSteps steps{map_backing, worker, stream_point, close_wait};
    return steps;
}

std::shared_ptr<Vmm> vmm_create() { return std::make_shared<Vmm>(); }

bool vmm_option(Instance *in, const std::string &key, const std::string &value, xmc_status *st) {
    if (be::workers_option(key, value, &in->vmm->workers, st)) return true;
    uint64_t *target = key == "vmm_fail_map" ? &in->vmm->fail_map : key == "vmm_fail_unmap" ? &in->vmm->fail_unmap
                                                                                             : nullptr;
    if (!target) return false;
    uint64_t v = 0;
    *st = be::option_number(value, &v) && v >= 1 ? XMC_OK : XMC_ERR_INVALID_ARGUMENT;
    if (*st == XMC_OK) *target = v;
    return true;
}

namespace {
Vmm &vmm_of(xmc_instance *inst) { return *static_cast<Instance *>(inst)->vmm; }
} // namespace

// ---- the host "driver": physical memory of a slot -------------------------

// Fresh memory at the slot's address. The injected failure (a test-only open
// option) comes after the memfd exists, so its undoing is exercised too.
int map_backing(Vmm &v, Slot &s, bool counted) {
    if (!take_device_memory(s.size)) return ENOMEM;
    const int fd = memfd_create("xmc-slot", MFD_CLOEXEC);
    int err = fd < 0 ? errno : 0;
    if (!err && ftruncate(fd, static_cast<off_t>(s.size)) != 0) err = errno;
    if (!err && counted && ++v.maps == v.fail_map) err = ENOMEM;
    // VMM-STABLE: MAP_FIXED at the slot's own address, never elsewhere.
    if (!err && mmap(reinterpret_cast<void *>(s.addr), s.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                     0) == MAP_FAILED)
        err = errno;
    if (err) {
        if (fd >= 0) ::close(fd);
        give_device_memory(s.size);
        return err;
    }
    s.fd = fd;
    return 0;
}

namespace {

// PROT_NONE back over the range in one step, then the memfd goes (its memory
// with it: the mapping was its last user).
int unmap_backing(Vmm &v, Slot &s, bool counted) {
    if (counted && ++v.unmaps == v.fail_unmap) return ENOMEM;
    // VMM-UNMAPPED-FAULTS: PROT_NONE in one step: an access faults, and no other
    // mapping can take the range.
    if (mmap(reinterpret_cast<void *>(s.addr), s.size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
        return errno;
    // VMM-RELEASE-ORDER: the memfd goes with its last mapping: memory returned.
    ::close(s.fd);
    s.fd = -1;
    give_device_memory(s.size);
    return 0;
}

std::string errno_text(const char *op, const Slot &s, int err) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s of slot %#lx failed: %s", op, static_cast<unsigned long>(s.addr),
                  std::strerror(err));
    return buf;
}

// ---- workers --------------------------------------------------------------

xmc_status start_copy(xmc_instance *inst, const std::shared_ptr<Request> &r, size_t i, xmc_stream *stream,
                      const char *call);

void run_release(Vmm &v, Request &r) {
    for (size_t i = 0; i < r.slots.size(); ++i) {
        const auto &s = r.slots[i];
        if (int err = unmap_backing(v, *s, true)) {
            // VMM-ASYNC-ERROR: the request records errno; the slot stays mapped.
            r.record(XMC_ERR_DRIVER, err, errno_text("mmap(PROT_NONE)", *s, err) + be::batch_index(i));
            s->release_status = XMC_ERR_DRIVER;
            s->release_native = err;
        }
        be::release_ran(*s, r, s->fd >= 0);
    }
}

void run_remap(xmc_instance *inst, Vmm &v, const std::shared_ptr<Request> &r) {
    size_t mapped = 0;
    for (const auto &s : r->slots) {
        // VMM-ASYNC-ERROR: a remap waiting on a failed release fails too.
        if (s->fd >= 0) {  // its release failed: the slot was never unmapped
            r->record(s->release_status, s->release_native,
                      "the release this remap waited for failed; slot still holds its old mapping" +
                          be::batch_index(mapped));
            break;
        }
        if (int err = vmm_steps().map_backing(v, *s, true)) {
            r->record(XMC_ERR_DRIVER, err, errno_text("memfd mmap(MAP_FIXED)", *s, err) + be::batch_index(mapped));
            break;
        }
        ++mapped;
    }
    if (r->status != XMC_OK) {
        // VMM-ASYNC-ERROR: slots back to what the model says (slot_book.hpp).
        // Roll back every mapping this request made: none was adopted.
        for (size_t i = 0; i < mapped; ++i) unmap_backing(v, *r->slots[i], false);
        be::remap_failed(*r, [](const Slot &s) { return s.fd >= 0; });
    } else if (!r->defer) {
        for (size_t i = 0; i < r->slots.size(); ++i)
            if (xmc_status st = start_copy(inst, r, i, r->stream, "slot_remap"); st != XMC_OK)
                r->record(st, 0, "the reload copy could not be enqueued: the remap's stream is gone");
    }
    for (const auto &s : r->slots) --s->jobs;
}

} // namespace

void run(xmc_instance *inst, Vmm &v, const std::shared_ptr<Request> &r) {
    if (r->remap) run_remap(inst, v, r);
    else run_release(v, *r);
    r->done = true;
    v.cv.notify_all();
}

void worker(xmc_instance *inst, Vmm *v) {
    be::work(*v, [&](const std::shared_ptr<Request> &r) { run(inst, *v, r); });
}

// The stream reached the request: hand it to the workers, and nothing else
// (VMM-CALLBACK: a driver call here may be refused, or stall the stream).
void stream_point(xmc_instance *, const std::shared_ptr<Vmm> &vp, const std::shared_ptr<Request> &r) {
    Vmm &v = *vp;
    std::lock_guard<std::mutex> lock(v.mu);
    r->fired = true;
    v.jobs.push_back(r);
    v.cv.notify_all();
}

// Nothing may unmap a slot while a worker still runs one of its requests or a
// stream still copies into it (VMM-CLOSE: a copy into unmapped memory).
void close_wait(Vmm &v, std::unique_lock<std::mutex> &lock, Slot &s) {
    v.cv.wait(lock, [&] { return s.jobs == 0 && s.copies == 0; });
}

namespace {

void start_workers(xmc_instance *inst, Vmm &v) {
    if (!v.threads.empty()) return;
    // VMM-SERIAL: vmm_workers threads (1: serial), running ready requests only.
    for (unsigned i = 0; i < v.workers; ++i) v.threads.emplace_back(vmm_steps().worker, inst, &v);
}

// Enqueues the reload copy of slot i of r on `stream`. Caller holds v.mu.
xmc_status start_copy(xmc_instance *inst, const std::shared_ptr<Request> &r, size_t i, xmc_stream *stream,
                      const char *call) {
    std::shared_ptr<Slot> s = r->slots[i];
    const void *src = r->srcs[i];
    std::shared_ptr<Vmm> vp = static_cast<Instance *>(inst)->vmm;
    xmc_status st = enqueue(inst, stream, call, [vp, r, s, src, i] {
        // VMM-REMAP-COPY: the whole slot from its checked pinned source.
        std::memcpy(reinterpret_cast<void *>(s->addr), src, s->size);
        std::lock_guard<std::mutex> lock(vp->mu);
        r->copy_finished(i);
        vp->cv.notify_all();
    });
    if (st != XMC_OK) return st;
    r->copy_launched(i);
    return XMC_OK;
}

// ---- requests -------------------------------------------------------------

// VMM-STATE, VMM-BATCH, VMM-REMAP-COPY: the shared refusals (make_request).
// slot_release, slot_remap and their batches: every refusal before any change,
// in the model's order (arguments, handles, duplicates, sources, states).
xmc_status submit(xmc_instance *inst, const char *call, bool remap, xmc_slot *const *handles, size_t n,
                  xmc_stream *stream, const void *const *srcs, const size_t *src_bytes, uint32_t flags,
                  xmc_request **out) {
    const be::Batch b{call, remap, handles, n, stream, srcs, src_bytes, flags, out};
    if (xmc_status st = be::check_batch(inst, b); st != XMC_OK) return st;
    Vmm &v = vmm_of(inst);
    std::lock_guard<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r;
    if (xmc_status st = be::make_request(inst, v, b, &r); st != XMC_OK) return st;
    std::shared_ptr<Vmm> vp = static_cast<Instance *>(inst)->vmm;
    // VMM-RELEASE-ORDER: a point on the caller's stream, after its prior work.
    if (xmc_status st = enqueue(inst, stream, call, [inst, vp, r] { vmm_steps().stream_point(inst, vp, r); });
        st != XMC_OK)
        return st;  // the stream: the one refusal known only now, before any change
    be::commit(v, r, out);
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
    // VMM-CREATE: rounded up to the granularity, granule-aligned, then mapped
    // read/write (the access grant).
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
    if (int err = vmm_steps().map_backing(v, *s, false)) {
        munmap(reinterpret_cast<void *>(s->addr), s->size);
        return be::fail(inst, err == ENOMEM ? XMC_ERR_OUT_OF_MEMORY : XMC_ERR_DRIVER, err, "slot_create",
                        "slot_create: mapping %zu bytes of device memory: %s", s->size, std::strerror(err));
    }
    std::lock_guard<std::mutex> lock(v.mu);
    start_workers(inst, v);
    *out = be::add_slot(v, s);
    *info = xmc_slot_info{reinterpret_cast<void *>(s->addr), s->size, 0};
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
    // A claim shows as launched, so a stream told to wait meanwhile waits for it.
    if (xmc_status st = be::claim_copy(inst, call, v, lock, *r, index, CopyState::Launched); st != XMC_OK) return st;
    if (xmc_status st = be::check_target(inst, call, *r, index); st != XMC_OK) return st;
    return start_copy(inst, r, index, s, call);
}

xmc_status request_wait(xmc_instance *inst, xmc_request *h, uint32_t timeout_ms) {
    return be::wait_request(inst, vmm_of(inst), h, timeout_ms);
}

// request_adopt and request_query: the book's own (slot_book.hpp).
XMC_SLOT_REQUEST_ENTRIES(vmm_of)

xmc_status request_stream_wait(xmc_instance *inst, xmc_request *h, xmc_stream *s) {
    const char *call = "request_stream_wait";
    Vmm &v = vmm_of(inst);
    std::lock_guard<std::mutex> lock(v.mu);
    std::shared_ptr<Request> r = be::find_request(v, h);
    if (!r) return be::bad_request(inst, call, h);
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
    std::shared_ptr<Request> r = be::find_request(v, h);
    if (!r) return be::bad_request(inst, "request_destroy", h);
    be::forget_request(v, lock, h, *r);
    // VMM-ADOPT: an adopted mapping is the slot's and stays.
    // Never adopted: the request's mapping goes with it (kept, as the slot's
    // own, in the unlikely case the unmap fails).
    be::drop_unadopted(*r, [&](Slot &s) { return unmap_backing(v, s, false) == 0; });
    v.cv.notify_all();
    return XMC_OK;
}

// Unmaps and frees a slot once no work on it is in flight (VMM-CLOSE).
// Caller holds v.mu; the slot has left the handle map.
static void close_slot(Vmm &v, std::unique_lock<std::mutex> &lock, Slot &s) {
    vmm_steps().close_wait(v, lock, s);
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
    std::shared_ptr<Slot> s;
    if (xmc_status st = be::take_slot(inst, v, h, &s); st != XMC_OK) return st;
    close_slot(v, lock, *s);
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
    return be::check_copy_slots(inst, *in->vmm, first, last, [](const Slot &s) { return s.fd >= 0; });
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

size_t vmm_close(Instance *in) {
    Vmm &v = *in->vmm;
    std::unique_lock<std::mutex> lock(v.mu);
    size_t closed = 0;
    while (!v.slots.empty()) {
        std::shared_ptr<Slot> s = v.slots.begin()->second;
        v.slots.erase(v.slots.begin());
        close_slot(v, lock, *s);
        ++closed;
    }
    be::stop_threads(v, lock);
    return closed;
}

} // namespace xmc::host
