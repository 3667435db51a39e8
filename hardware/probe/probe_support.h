// What the probe's case files share: outcomes, the Cleanup that undoes what a
// case created, and short set-up helpers (host pages, registrations, device
// memory, streams, events, VMM ranges, a gate that holds a stream, a second
// process for IPC). Set-up calls go through TRY, so a failure before the call
// under test records SETUP_FAILED instead of a wrong answer.
#ifndef XMC_PROBE_SUPPORT_H
#define XMC_PROBE_SUPPORT_H

#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "probe_cases.h"

namespace xmc::probe {

// ---- outcomes ------------------------------------------------------------------

// A case that is a shared body with its arguments fixed, for the case table:
// `with<c_copy_2d, 3>` runs c_copy_2d(p, 3).
template <auto Body, auto... Args>
Outcome with(P& p) {
    return Body(p, Args...);
}


inline Outcome res(const P& p, CUresult r, std::string note = {}) {
    return Outcome{result_name(p.d, r), static_cast<int64_t>(r), std::move(note)};
}
inline Outcome value(int64_t v, std::string note = {}) { return Outcome{"value", v, std::move(note)}; }
inline Outcome yes_no(bool b, std::string note = {}) {
    return Outcome{b ? "yes" : "no", b ? 1 : 0, std::move(note)};
}
inline Outcome identity(bool same, std::string note = {}) {
    return Outcome{same ? "identity" : "non_identity", same ? 0 : 1, std::move(note)};
}
inline std::string hex(uint64_t v) {
    char b[32];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return b;
}

// A case whose entry point the driver does not export records `missing_entry`
// (probe_format.h) instead of failing to load: NEED(cuGraphLaunch) at the top
// of the case, for every optional entry point it calls.
#define NEED(name)                                                                              \
    do {                                                                                        \
        if (p.d.name == nullptr) throw ::xmc::probe::MissingEntry{XMC_PROBE_SYM(name)};         \
    } while (0)

// Milliseconds since `t0`.
inline int64_t ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
}

// ---- cleanup -------------------------------------------------------------------

// Cleanup actions, run in reverse order when the case returns (or throws), so
// every case leaves the driver as it found it.
class Cleanup {
public:
    Cleanup() = default;
    Cleanup(const Cleanup&) = delete;
    Cleanup& operator=(const Cleanup&) = delete;
    ~Cleanup() {
        for (auto it = fns_.rbegin(); it != fns_.rend(); ++it) (*it)();
    }
    void add(std::function<void()> f) { fns_.push_back(std::move(f)); }

private:
    std::vector<std::function<void()>> fns_;
};

// ---- host memory and registration ----------------------------------------------------

inline size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// n pages of fresh, touched, page-aligned host memory, unmapped at cleanup.
inline char* host_pages(Cleanup& cl, size_t n, int prot = PROT_READ | PROT_WRITE) {
    size_t bytes = n * page_size();
    void* p = mmap(nullptr, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw SetupFailed{CUDA_ERROR_OUT_OF_MEMORY, "mmap"};
    if (prot & PROT_WRITE) std::memset(p, 0x5a, bytes);
    cl.add([p, bytes] { munmap(p, bytes); });
    return static_cast<char*>(p);
}

// Registers and arranges the unregistration.
inline void reg(P& p, Cleanup& cl, void* ptr, size_t n, unsigned flags = 0) {
    TRY(p.d.cuMemHostRegister(ptr, n, flags));
    Driver* d = &p.d;
    cl.add([d, ptr] { d->cuMemHostUnregister(ptr); });
}

// Unregisters after a call that may have registered (ignore the result).
inline void unreg_later(P& p, Cleanup& cl, void* ptr) {
    Driver* d = &p.d;
    cl.add([d, ptr] { d->cuMemHostUnregister(ptr); });
}

// A registration under test: its answer, and the unregistration arranged where it succeeded.
inline CUresult try_reg(P& p, Cleanup& cl, void* ptr, size_t n, unsigned flags) {
    CUresult r = p.d.cuMemHostRegister(ptr, n, flags);
    if (r == CUDA_SUCCESS) unreg_later(p, cl, ptr);
    return r;
}

// ---- device memory, streams, events ------------------------------------------------------

inline CUdeviceptr dalloc(P& p, Cleanup& cl, size_t n) {
    CUdeviceptr a = 0;
    TRY(p.d.cuMemAlloc(&a, n));
    Driver* d = &p.d;
    cl.add([d, a] { d->cuMemFree(a); });
    return a;
}

// Device memory of device 1 (Setup::ctx2), allocated in its primary context; device 0's stays
// current. Freed in device 1's context again.
inline CUdeviceptr dalloc_device1(P& p, Cleanup& cl, size_t n) {
    TRY(p.d.cuCtxSetCurrent(p.ctx[1]));
    CUdeviceptr a1 = 0;
    CUresult ar = p.d.cuMemAlloc(&a1, n);
    TRY(p.d.cuCtxSetCurrent(p.ctx[0]));
    if (ar != CUDA_SUCCESS) throw SetupFailed{ar, "cuMemAlloc(device 1)"};
    Driver* d = &p.d;
    cl.add([d, c1 = p.ctx[1], a1] {
        d->cuCtxPushCurrent(c1);
        d->cuMemFree(a1);
        CUcontext x = nullptr;
        d->cuCtxPopCurrent(&x);
    });
    return a1;
}

inline CUstream stream(P& p, Cleanup& cl, unsigned flags = CU_STREAM_NON_BLOCKING) {
    CUstream s = nullptr;
    TRY(p.d.cuStreamCreate(&s, flags));
    Driver* d = &p.d;
    cl.add([d, s] { d->cuStreamSynchronize(s); d->cuStreamDestroy(s); });
    return s;
}

// A stream of device 1's context (Setup::ctx2); device 0's stays current.
inline CUstream stream_device1(P& p, Cleanup& cl) {
    TRY(p.d.cuCtxSetCurrent(p.ctx[1]));
    CUstream s = nullptr;
    CUresult cr = p.d.cuStreamCreate(&s, 0);
    TRY(p.d.cuCtxSetCurrent(p.ctx[0]));
    if (cr != CUDA_SUCCESS) throw SetupFailed{cr, "cuStreamCreate(device 1)"};
    Driver* d = &p.d;
    cl.add([d, s] { d->cuStreamSynchronize(s); d->cuStreamDestroy(s); });
    return s;
}

inline CUevent event(P& p, Cleanup& cl, unsigned flags = CU_EVENT_DEFAULT) {
    CUevent e = nullptr;
    TRY(p.d.cuEventCreate(&e, flags));
    Driver* d = &p.d;
    cl.add([d, e] { d->cuEventDestroy(e); });
    return e;
}

inline size_t free_mem(P& p) {
    size_t fr = 0, total = 0;
    TRY(p.d.cuMemGetInfo(&fr, &total));
    return fr;
}

inline size_t total_mem(P& p) {
    size_t t = 0;
    TRY(p.d.cuDeviceTotalMem(&t, p.dev[0]));
    return t;
}

// The 2-D copies' description: 4 rows of 128 bytes from host memory at `host` (pitch
// `src_pitch`) into device memory at `dst` (pitch 256). A case spoils one field.
inline CUDA_MEMCPY2D rows_htod(const void* host, size_t src_pitch, CUdeviceptr dst) {
    CUDA_MEMCPY2D c;
    std::memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host;
    c.srcPitch = src_pitch;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dst;
    c.dstPitch = 256;
    c.WidthInBytes = 128;
    c.Height = 4;
    return c;
}

// ---- VMM -----------------------------------------------------------------------------

inline CUmemAllocationProp vmm_prop(int device) {
    CUmemAllocationProp prop;
    std::memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
}

inline size_t granularity(P& p) {
    if (p.gran == 0) {
        CUmemAllocationProp prop = vmm_prop(p.dev[0]);
        TRY(p.d.cuMemGetAllocationGranularity(&p.gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    }
    return p.gran;
}

inline CUdeviceptr reserve(P& p, Cleanup& cl, size_t n) {
    CUdeviceptr va = 0;
    TRY(p.d.cuMemAddressReserve(&va, n, 0, 0, 0));
    Driver* d = &p.d;
    cl.add([d, va, n] { d->cuMemAddressFree(va, n); });
    return va;
}

inline CUmemGenericAllocationHandle create(P& p, Cleanup& cl, size_t n,
                                           CUmemAllocationHandleType types = CU_MEM_HANDLE_TYPE_NONE) {
    CUmemGenericAllocationHandle h = 0;
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    prop.requestedHandleTypes = types;
    TRY(p.d.cuMemCreate(&h, n, &prop, 0));
    Driver* d = &p.d;
    cl.add([d, h] { d->cuMemRelease(h); });
    return h;
}

// Maps and arranges the unmapping (cleanup runs unmap before release and
// address free because it was registered after them).
inline void map(P& p, Cleanup& cl, CUdeviceptr va, size_t n, CUmemGenericAllocationHandle h,
                size_t offset = 0) {
    TRY(p.d.cuMemMap(va, n, offset, h, 0));
    Driver* d = &p.d;
    cl.add([d, va, n] { d->cuMemUnmap(va, n); });
}

inline CUmemAccessDesc access_desc(int device, CUmemAccess_flags flags) {
    CUmemAccessDesc a;
    std::memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = device;
    a.flags = flags;
    return a;
}

inline void grant(P& p, CUdeviceptr va, size_t n) {
    CUmemAccessDesc a = access_desc(p.dev[0], CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    TRY(p.d.cuMemSetAccess(va, n, &a, 1));
}

// A reserved, mapped, read/write range of n bytes (a slot with its backing).
inline CUdeviceptr mapped_range(P& p, Cleanup& cl, size_t n) {
    CUdeviceptr va = reserve(p, cl, n);
    CUmemGenericAllocationHandle h = create(p, cl, n);
    map(p, cl, va, n, h);
    grant(p, va, n);
    return va;
}

// As mapped_range, for a case that unmaps the range itself (the unmap is what it probes, or comes
// before it): no unmap is arranged. *h, where given, receives the handle.
inline CUdeviceptr mapping_to_unmap(P& p, Cleanup& cl, size_t n, CUmemGenericAllocationHandle* h = nullptr) {
    CUdeviceptr va = reserve(p, cl, n);
    CUmemGenericAllocationHandle made = create(p, cl, n);
    TRY(p.d.cuMemMap(va, n, 0, made, 0));
    grant(p, va, n);
    if (h) *h = made;
    return va;
}

// Maps a new handle at [va, va + n) for a case that releases the handle itself while it is
// mapped (what it probes): only the unmap is arranged, and the handle is released here where the
// map is refused.
inline CUmemGenericAllocationHandle map_handle_to_release(P& p, Cleanup& cl, CUdeviceptr va, size_t n) {
    CUmemAllocationProp prop = vmm_prop(p.dev[0]);
    CUmemGenericAllocationHandle h = 0;
    TRY(p.d.cuMemCreate(&h, n, &prop, 0));
    CUresult m = p.d.cuMemMap(va, n, 0, h, 0);
    if (m != CUDA_SUCCESS) {
        p.d.cuMemRelease(h);
        throw SetupFailed{m, "cuMemMap"};
    }
    Driver* d = &p.d;
    cl.add([d, va, n] { d->cuMemUnmap(va, n); });
    return h;
}

// ---- a gate that holds a stream ---------------------------------------------------------

// A host function that blocks its stream until the gate opens or `limit_ms`
// pass, so work queued behind it waits (a copy to fault, a launch to be in
// flight). Bounded, so a driver that waits for the stream cannot hang the case.
struct Gate {
    std::atomic<bool> open{false};
    std::atomic<bool> entered{false};
    std::atomic<int> runs{0};   // times it started
    std::atomic<int> done{0};   // times it returned
    int limit_ms = 2000;
};

// Opens the gate and waits (bounded) until it has returned `runs` times: for
// a gate on a stream that was destroyed, which no synchronize can wait for.
void open_and_drain(Gate* g, int runs = 1, int limit_ms = 3000);

void CUDA_CB gate_fn(void* gate);

// Queues a gate on s; the Cleanup opens it before anything registered
// earlier (the stream's synchronize) runs.
inline Gate* hold(P& p, Cleanup& cl, CUstream s, int limit_ms = 2000) {
    auto g = std::make_shared<Gate>();
    g->limit_ms = limit_ms;
    TRY(p.d.cuLaunchHostFunc(s, gate_fn, g.get()));
    cl.add([g] { g->open.store(true); });
    return g.get();
}

// A gate for a captured host node: made like hold() but not queued.
inline Gate* new_gate(Cleanup& cl, int limit_ms = 2000) {
    auto g = std::make_shared<Gate>();
    g->limit_ms = limit_ms;
    cl.add([g] { g->open.store(true); });
    return g.get();
}

// ---- stream capture and graphs ---------------------------------------------------------

// Begins a capture on s and arranges its end (the graph, if any, destroyed):
// a case may end it itself (then the cleanup's end is refused and harmless).
inline void begin_capture(P& p, Cleanup& cl, CUstream s, CUstreamCaptureMode mode) {
    TRY(p.d.cuStreamBeginCapture(s, mode));
    Driver* d = &p.d;
    cl.add([d, s] {
        CUgraph g = nullptr;
        d->cuStreamEndCapture(s, &g);
        if (g != nullptr) d->cuGraphDestroy(g);
    });
}

// Ends the capture on s; the graph is destroyed at cleanup.
inline CUgraph end_capture(P& p, Cleanup& cl, CUstream s) {
    CUgraph g = nullptr;
    TRY(p.d.cuStreamEndCapture(s, &g));
    if (g == nullptr) throw SetupFailed{CUDA_ERROR_UNKNOWN, "cuStreamEndCapture gave no graph"};
    Driver* d = &p.d;
    cl.add([d, g] { d->cuGraphDestroy(g); });
    return g;
}

inline CUgraphExec instantiate(P& p, Cleanup& cl, CUgraph g) {
    CUgraphExec e = nullptr;
    TRY(p.d.cuGraphInstantiate(&e, g, 0));
    Driver* d = &p.d;
    cl.add([d, e] { d->cuGraphExecDestroy(e); });
    return e;
}

// ---- running a call elsewhere ------------------------------------------------------------

// Runs fn on a new thread, with `ctx` current there (as the backends' worker
// threads do), and returns what it returned.
CUresult on_other_thread(P& p, CUcontext ctx, const std::function<CUresult()>& fn);

// ---- a second process (IPC) ----------------------------------------------------------------

// Retains device 0's primary context and makes it current, released at
// cleanup: for cases that start without a context (Setup::none) because they
// fork a peer first.
void own_context(P& p, Cleanup& cl);

// A second process, forked BEFORE this one initialises the driver (a child
// forked after cuInit cannot use it), connected by a UNIX socket pair that
// carries fixed-size messages and, with them, file descriptors (SCM_RIGHTS).
// The peer runs `body` (which initialises the driver itself) and exits; the
// destructor waits for it, killing it if it outlives `limit_ms`.
class Peer {
public:
    struct Link {
        int sock = -1;
        // false on error or when nothing came within limit_ms
        bool send(const void* data, size_t n, int fd = -1) const;
        bool recv(void* data, size_t n, int* fd = nullptr, int limit_ms = 10000) const;
    };
    Peer(P& p, std::function<void(P&, const Link&)> body, int limit_ms = 15000);
    ~Peer();
    Peer(const Peer&) = delete;
    Peer& operator=(const Peer&) = delete;
    const Link& link() const { return link_; }
    bool started() const { return pid_ > 0; }

private:
    Link link_;
    pid_t pid_ = -1;
    int limit_ms_;
};

}  // namespace xmc::probe

#endif
