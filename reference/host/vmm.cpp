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
// draws from, reported by device_free_memory. The slot entry points are
// reference/common/slots.hpp's; this file is the host's steps (be::VmmOps),
// request_stream_wait and device_free_memory.
#include "vmm.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
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

std::shared_ptr<Vmm> vmm_create() {
    auto v = std::make_shared<Vmm>();
    v->ops = vmm_ops();
    return v;
}

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

// ---- the host "driver": physical memory of a slot -------------------------

// Fresh memory at the slot's address. The injected failure (a test-only open
// option) comes after the memfd exists, so its undoing is exercised too.
int64_t map_backing(Vmm &v, Slot &s, bool worker) {
    if (!take_device_memory(s.size)) return ENOMEM;
    const int fd = memfd_create("xmc-slot", MFD_CLOEXEC);
    int err = fd < 0 ? errno : 0;
    if (!err && ftruncate(fd, static_cast<off_t>(s.size)) != 0) err = errno;
    if (!err && worker && ++v.maps == v.fail_map) err = ENOMEM;
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

Instance *instance(xmc_instance *inst) { return static_cast<Instance *>(inst); }
const std::shared_ptr<Vmm> &vmm_ptr(xmc_instance *inst) { return instance(inst)->vmm; }

// PROT_NONE back over the range in one step, then the memfd goes (its memory
// with it: the mapping was its last user).
int64_t unmap_backing(Vmm &v, Slot &s, bool worker) {
    if (worker && ++v.unmaps == v.fail_unmap) return ENOMEM;
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

bool mapped(const Slot &s) { return s.fd >= 0; }
xmc_status status_of(int64_t) { return XMC_ERR_DRIVER; }
std::string native_name(int64_t err) { return std::strerror(static_cast<int>(err)); }

// VMM-CREATE: rounded up to the granularity, granule-aligned, then mapped
// read/write (the access grant).
xmc_status create(xmc_instance *inst, int32_t device, size_t bytes, Slot &s) {
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
    s.size = (bytes + kGranularity - 1) / kGranularity * kGranularity;
    // Reserve one granule more and trim, so the range is granule-aligned as
    // cuMemAddressReserve's is.
    void *p = mmap(nullptr, s.size + kGranularity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return be::fail(inst, XMC_ERR_OUT_OF_MEMORY, errno, "slot_create",
                        "slot_create: mmap(PROT_NONE) of %zu bytes: %s", s.size, std::strerror(errno));
    const auto raw = reinterpret_cast<uintptr_t>(p);
    s.addr = (raw + kGranularity - 1) / kGranularity * kGranularity;
    if (s.addr > raw) munmap(p, s.addr - raw);
    munmap(reinterpret_cast<void *>(s.addr + s.size), raw + kGranularity - s.addr);
    Vmm &v = *vmm_ptr(inst);
    if (int err = static_cast<int>(v.ops.map(v, s, false))) {
        munmap(reinterpret_cast<void *>(s.addr), s.size);
        return be::fail(inst, err == ENOMEM ? XMC_ERR_OUT_OF_MEMORY : XMC_ERR_DRIVER, err, "slot_create",
                        "slot_create: mapping %zu bytes of device memory: %s", s.size, std::strerror(err));
    }
    return XMC_OK;
}

// Enqueues the reload copy of slot i of r on `stream`. Caller holds v.mu.
xmc_status start_copy(xmc_instance *inst, Vmm &, const std::shared_ptr<Request> &r, size_t i, xmc_stream *stream,
                      const char *call) {
    std::shared_ptr<Slot> s = r->slots[i];
    const void *src = r->srcs[i];
    std::shared_ptr<Vmm> vp = vmm_ptr(inst);
    xmc_status st = enqueue(inst, stream, call, [vp, r, s, src, i] {
        // VMM-REMAP-COPY: the whole slot from its checked pinned source.
        std::memcpy(reinterpret_cast<void *>(s->addr), src, s->size);
        std::lock_guard<std::mutex> lock(vp->mu);
        r->copy_finished(i);
        vp->announce();
    });
    if (st != XMC_OK) return st;
    r->copy_launched(i);
    return XMC_OK;
}

// VMM-RELEASE-ORDER: a host callback on the caller's stream, after its prior work.
xmc_status enqueue_point(xmc_instance *inst, const char *call, xmc_stream *stream, const std::shared_ptr<Vmm> &vp,
                         const std::shared_ptr<Request> &r) {
    return enqueue(inst, stream, call, [inst, vp, r] { vp->ops.point_reached(inst, vp, r); });
}

// Nothing is in flight on s (close_wait): unmapped, its memfd and range gone.
int64_t close_free(Vmm &, Slot &s, const char **) {
    munmap(reinterpret_cast<void *>(s.addr), s.size);
    if (s.fd >= 0) {
        ::close(s.fd);
        s.fd = -1;
        give_device_memory(s.size);
    }
    return 0;
}

} // namespace

be::VmmOps<Vmm> &vmm_ops() {
    static be::VmmOps<Vmm> ops{
        .map_call = "memfd mmap(MAP_FIXED)",
        .unmap_call = "mmap(PROT_NONE)",
        .create = create,
        .map = map_backing,
        .unmap = unmap_backing,
        .mapped = mapped,
        .status_of = status_of,
        .native_name = native_name,
        .copy = start_copy,
        .claim = CopyState::Launched,  // a stream told to wait meanwhile waits for the copy
        .enqueue_point = enqueue_point,
        .point_reached = be::hand_to_workers<Vmm>,
        .worker = be::worker_loop<Vmm>,
        .close_wait = be::wait_idle<Vmm>,
        .close_free = close_free,
    };
    return ops;
}

// ---- entry points -----------------------------------------------------------

// slot_create, slot_release, slot_remap and their batches, request_launch_copy, request_wait,
// request_adopt, request_query, request_destroy, slot_close, vmm_before_capture, vmm_copy_check:
// the shared ones (slots.hpp) over the steps above.
XMC_SLOT_ENTRIES(vmm_ptr)

xmc_status request_stream_wait(xmc_instance *inst, xmc_request *h, xmc_stream *s) {
    const char *call = "request_stream_wait";
    Vmm &v = *vmm_ptr(inst);
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
    std::shared_ptr<Vmm> vp = vmm_ptr(inst);
    return enqueue(inst, s, call, [vp, r, which] {
        std::unique_lock<std::mutex> lock(vp->mu);
        vp->cv.wait(lock, [&] {
            for (size_t i : which)  // done, or never to start: the remap failed
                if (r->copies[i] != CopyState::Done && !(r->done && r->copies[i] == CopyState::None)) return false;
            return true;
        });
    });
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
    int64_t failed = 0;  // the host's close never fails
    const char *what = "";
    return be::close_slots(*in->vmm, &failed, &what);
}

} // namespace xmc::host
