// libxmc_cuda_interpose.so: the fake CUDA driver's fault scripts and ledger over a REAL driver
// (issue 28). It exports every driver entry point the CUDA backend resolves (the XMC_CU_* lists
// of reference/cuda/cuda.hpp, included: one list, never a copy), by the same versioned names,
// forwards each to the library named by XMC_CUDA_INTERPOSE_REAL (default libcuda.so.1, opened
// when this library loads), applies the fault scripts of fakes/README.md through the one parser
// of fakes/common, and keeps a ledger of what the calls that succeeded left open. Its control
// API is the fake's (fake_cuda_control.h, same symbols), so the conformance harness and the test
// bodies run on it as they run on the fake.
//
// How an entry point is exported without writing its parameter list: the symbol is a
// two-instruction trampoline (top-level asm) that jumps through a hidden slot holding
// Fwd<id, decltype(&::name)>::call, a C++ function with exactly the driver's signature. So an
// entry point added to cuda.hpp is forwarded with no change here.
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda.hpp"  // reference/cuda: XMC_CU_* (the backend's entry points), nothing else is used
#include "fake_cuda_control.h"
#include "fault_script.hpp"

// Every group the backend resolves. tests: cuda_interpose.covers_every_group (covers.sh) checks that no
// XMC_CU_* group of cuda.hpp is missing here.
// Besides them, what xmc_gpu_bench resolves for its raw peaks (hardware/gpu_bench.cpp), so that
// `xmc bench` runs through the interposer too and its overhead is measured there (issue 28), and
// what the conformance harness asks the driver itself (PIN-KINDS's lock state).
// tests: cuda_interpose.covers_entries (covers.sh) checks that every entry point they load is here.
#define XMC_IP_BENCH(X)                                                                                      \
    X(cuDriverGetVersion) X(cuCtxSetCurrent) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemcpyDtoHAsync)     \
    X(cuMemcpyDtoDAsync) X(cuEventElapsedTime)
#define XMC_IP_HARNESS(X) X(cuMemHostGetFlags)
#define XMC_IP_ALL(X)                                                                                         \
    XMC_CU_CORE(X) XMC_CU_REGISTER(X) XMC_CU_STREAM(X) XMC_CU_COPY(X) XMC_CU_VMM(X) XMC_CU_TRANSFER(X)    \
    XMC_CU_IPC(X) XMC_CU_IPC_VMM(X) XMC_CU_GRAPH(X) XMC_CU_OPTIONAL(X) XMC_IP_BENCH(X) XMC_IP_HARNESS(X)

#define XMC_IP_STR2(x) #x
#define XMC_IP_STR(x) XMC_IP_STR2(x)  // expands cuda.h's version macro first: "cuMemAlloc_v2"

namespace xmc_ip {

// id_<cuda.h name>: the index of each entry point.
enum Id : int {
#define XMC_IP_ID(name) id_##name,
    XMC_IP_ALL(XMC_IP_ID)
#undef XMC_IP_ID
    kEntries
};

const char* const kSymbols[kEntries] = {
#define XMC_IP_SYM(name) XMC_IP_STR(name),
    XMC_IP_ALL(XMC_IP_SYM)
#undef XMC_IP_SYM
};

// ---- result names (the fake's table, included, for the parser and for messages) ----------

struct ResultInfo {
    CUresult code;
    const char* name;
};
const ResultInfo kResults[] = {
#define XMC_CU_RESULT(name, text) {name, #name},
#include "fake_cuda_results.inc"
#undef XMC_CU_RESULT
};

const char* result_name(CUresult r) {
    for (const ResultInfo& i : kResults)
        if (i.code == r) return i.name;
    return nullptr;
}

// ---- state ----------------------------------------------------------------------------------

struct Reg {
    size_t size = 0;
    unsigned flags = 0;
    int dev = -1;
    CUcontext ctx = nullptr;
    uint64_t offset = 0;  // nonidentity: the device address the queries report is base + offset
};
struct Alloc {
    size_t size = 0;
    int dev = -1;
    CUcontext ctx = nullptr;
};
struct Handle {
    size_t size = 0;  // 0: imported (its size is the exporter's)
    int dev = -1;
    int refs = 1;       // cuMemRetainAllocationHandle holds it once more
    int map_count = 0;
    bool released = false;  // released while mapped: gone for the program, freed with its last mapping
};
struct Mapping {
    size_t size = 0;
    CUmemGenericAllocationHandle handle = 0;
    size_t offset = 0;
};
struct InCtx {
    CUcontext ctx = nullptr;
    int dev = -1;
};
struct Primary {
    CUcontext ctx = nullptr;
    int refs = 0;
};

struct State {
    std::mutex mu;
    // Set up when this library loads; a non-empty error makes every entry point answer
    // error_code (the fake answers a malformed configuration the same way, at cuInit).
    std::string real_path;
    void* real_lib = nullptr;
    void* real[kEntries] = {};
    CUresult (*ctx_get_current)(CUcontext*) = nullptr;  // the interposer's own questions
    CUresult (*ctx_get_device)(CUdevice*) = nullptr;
    std::string init_error;
    CUresult error_code = CUDA_SUCCESS;
    bool script_error = false;  // the error is XMC_FAKE_CUDA_FAULTS's (a reset re-reads it)
    std::string last_error;
    bool trace = false;
    // The fake's configuration where the driver beneath is real (over the fake, the fake reads it):
    // the hidings the conformance harness asks for (absent_platform.cpp), emulated.
    bool no_devices = false;      // XMC_FAKE_CUDA_DEVICES=0: cuInit answers CUDA_ERROR_NO_DEVICE
    bool hide_register = false;   // XMC_FAKE_CUDA_ATTRS=host_register_supported=0
    bool hide_vmm = false;        // XMC_FAKE_CUDA_ATTRS=virtual_memory_management_supported=0

    std::vector<xmc_faults::Rule> rules;
    uint64_t calls[kEntries] = {};
    uint64_t total_calls = 0;
    std::vector<xmc_fake_cuda_call_record> records;
    size_t records_seen = 0;

    std::map<uintptr_t, Reg> regs;
    std::map<CUdeviceptr, Alloc> allocs;
    std::map<CUdeviceptr, size_t> reservations;
    std::map<CUmemGenericAllocationHandle, Handle> handles;
    std::set<CUmemGenericAllocationHandle> gone_handles;  // released and freed (VMM-DOUBLE)
    std::map<CUdeviceptr, Mapping> mappings;
    std::set<CUdeviceptr> unmapped;  // addresses of mappings unmapped since, nothing mapped there again
    std::map<CUdeviceptr, int> ipc_opened;
    std::map<CUdevice, Primary> primaries;
    std::map<CUstream, InCtx> streams;
    std::map<CUevent, InCtx> events;
    std::map<CUgraph, InCtx> graphs;
    std::map<CUgraphExec, InCtx> execs;
    size_t reclaimed = 0;
    size_t second_releases = 0;

    // XMC_CUDA_INTERPOSE_ANSWERS: every answer other than success the driver beneath gave (not one
    // the script injected), once per (test, entry point, code), so that a recording on the real
    // driver can be set beside one over the fake (hardware/compare_answers.sh, issue 28).
    FILE* answers = nullptr;
    std::string mark;  // the running test (xmc_cuda_interpose_mark)
    std::set<std::string> answered;

    // cuLaunchHostFunc's wrapped callbacks, kept for good: a captured one runs at every launch.
    std::map<std::pair<CUhostFn, void*>, std::pair<CUhostFn, void*>*> cookies;
};

State& state() {
    static State* g = new State;  // never destroyed: driver threads may still call in at exit
    return *g;
}

thread_local bool t_in_host_callback = false;
thread_local bool t_on_callback_thread = false;
thread_local uint64_t t_nonidentity = 0;  // the decision of this thread's current call
thread_local uint64_t t_exec_delay_us = 0;

// ---- what fault scripts may do to each entry point -----------------------------------------

// The argument holding the call's byte count (size_limit), or -1.
template <int Id> constexpr int kSizeArg = -1;
template <> constexpr int kSizeArg<id_cuMemAlloc> = 1;
template <> constexpr int kSizeArg<id_cuMemHostRegister> = 1;
template <> constexpr int kSizeArg<id_cuMemAddressReserve> = 1;
template <> constexpr int kSizeArg<id_cuMemCreate> = 1;
template <> constexpr int kSizeArg<id_cuMemMap> = 1;
template <> constexpr int kSizeArg<id_cuMemcpyAsync> = 2;
template <> constexpr int kSizeArg<id_cuMemcpyHtoDAsync> = 2;
template <> constexpr int kSizeArg<id_cuMemcpyPeerAsync> = 4;

// Copies that queue work on the stream given as their last argument (exec_delay).
template <int Id> constexpr bool kQueued = false;
template <> constexpr bool kQueued<id_cuMemcpyAsync> = true;
template <> constexpr bool kQueued<id_cuMemcpyHtoDAsync> = true;
template <> constexpr bool kQueued<id_cuMemcpy2DAsync> = true;
template <> constexpr bool kQueued<id_cuMemcpy3DAsync> = true;
template <> constexpr bool kQueued<id_cuMemcpyPeerAsync> = true;
template <> constexpr bool kQueued<id_cuMemcpy3DPeerAsync> = true;

// What exhaust counts: the live objects each entry point made (lock held), as the ledger lists.
uint64_t live_regs() { return state().regs.size(); }
uint64_t live_allocs() { return state().allocs.size(); }
uint64_t live_reservations() { return state().reservations.size(); }
uint64_t live_mappings() { return state().mappings.size(); }
uint64_t live_streams() { return state().streams.size(); }
uint64_t live_events() { return state().events.size(); }
uint64_t live_execs() { return state().execs.size(); }
uint64_t live_ipc() { return state().ipc_opened.size(); }
uint64_t live_handles() {
    uint64_t n = 0;
    for (auto& [h, p] : state().handles) n += p.released ? 0 : 1;
    return n;
}
uint64_t live_primary_retains() {
    uint64_t n = 0;
    for (auto& [d, p] : state().primaries) n += static_cast<uint64_t>(p.refs);
    return n;
}

template <int Id> constexpr uint64_t (*kLive)() = nullptr;
template <> constexpr uint64_t (*kLive<id_cuMemHostRegister>)() = live_regs;
template <> constexpr uint64_t (*kLive<id_cuMemAlloc>)() = live_allocs;
template <> constexpr uint64_t (*kLive<id_cuMemAddressReserve>)() = live_reservations;
template <> constexpr uint64_t (*kLive<id_cuMemCreate>)() = live_handles;
template <> constexpr uint64_t (*kLive<id_cuMemImportFromShareableHandle>)() = live_handles;
template <> constexpr uint64_t (*kLive<id_cuMemMap>)() = live_mappings;
template <> constexpr uint64_t (*kLive<id_cuStreamCreate>)() = live_streams;
template <> constexpr uint64_t (*kLive<id_cuEventCreate>)() = live_events;
template <> constexpr uint64_t (*kLive<id_cuGraphInstantiate>)() = live_execs;
template <> constexpr uint64_t (*kLive<id_cuIpcOpenMemHandle>)() = live_ipc;
template <> constexpr uint64_t (*kLive<id_cuDevicePrimaryCtxRetain>)() = live_primary_retains;

std::string_view base_name(std::string_view name) {  // strips "_v<digits>"
    size_t u = name.rfind("_v");
    if (u == std::string_view::npos || u + 2 >= name.size()) return name;
    for (size_t i = u + 2; i < name.size(); ++i)
        if (name[i] < '0' || name[i] > '9') return name;
    return name.substr(0, u);
}

bool code_by_name(std::string_view name, int64_t* value) {
    for (const ResultInfo& i : kResults)
        if (name == i.name) {
            *value = i.code;
            return true;
        }
    return false;
}

template <int Id>
xmc_faults::Entry entry_of() {
    xmc_faults::Entry e;
    e.name = nullptr;  // filled by the caller (base name of the symbol)
    e.takes_size = kSizeArg<Id> >= 0;
    e.enqueues = kQueued<Id>;
    e.nonidentity = Id == id_cuMemHostRegister;
    e.live = kLive<Id>;
    return e;
}

const xmc_faults::Dialect& dialect() {
    static const std::vector<std::string>* names = [] {
        auto* v = new std::vector<std::string>;
        for (const char* s : kSymbols) v->emplace_back(base_name(s));
        return v;
    }();
    static const xmc_faults::Dialect d = [] {
        xmc_faults::Dialect d;
        d.fake = "the CUDA interposer libxmc_cuda_interpose.so, which forwards only the entry points the CUDA "
                 "backend resolves,";
        const xmc_faults::Entry all[kEntries] = {
#define XMC_IP_ENTRY(name) entry_of<id_##name>(),
            XMC_IP_ALL(XMC_IP_ENTRY)
#undef XMC_IP_ENTRY
        };
        for (int i = 0; i < kEntries; ++i) {
            xmc_faults::Entry e = all[i];
            e.name = (*names)[static_cast<size_t>(i)].c_str();
            d.entries.push_back(e);
        }
        d.canonical = base_name;
        d.code_by_name = code_by_name;
        d.code_type = "CUresult";
        d.max_code = 1023;
        d.nonidentity_offset = true;
        return d;
    }();
    return d;
}

// ---- the entry guard -----------------------------------------------------------------------

// Counts and records the call, and decides what the rules do to it. false: answer *out
// without calling the driver (a scripted failure, or the interposer could not be set up).
bool enter(int id, bool has_size, uint64_t size, CUresult* out) {
    State& g = state();
    xmc_faults::Decision d;
    {
        std::lock_guard<std::mutex> lk(g.mu);
        ++g.calls[id];
        ++g.total_calls;
        const std::string_view base = dialect().entries[static_cast<size_t>(id)].name;
        if (g.records.size() < XMC_FAKE_CUDA_CALL_RECORDS) {
            // Cheap, as every forwarded call pays it: the thread's id asked once per thread (gettid
            // is a system call), the name copied, not formatted. With a snprintf and a gettid per
            // call, a 4 KiB register+unregister through the interposer took 15-27% longer on the
            // H200 (its backend makes about ten driver calls for it).
            thread_local const int64_t tid = static_cast<int64_t>(gettid());
            xmc_fake_cuda_call_record rec{};
            std::memcpy(rec.entry, base.data(), std::min(base.size(), sizeof rec.entry - 1));
            rec.tid = tid;
            rec.in_host_callback = t_in_host_callback;
            rec.on_callback_thread = t_on_callback_thread;
            g.records.push_back(rec);
        }
        ++g.records_seen;
        if (g.trace)
            std::fprintf(stderr, "xmc_cuda_interpose: %s%s\n", kSymbols[id],
                         t_in_host_callback ? " (in a host function)" : "");
        if (!g.init_error.empty()) {
            *out = g.error_code;
            return false;
        }
        if (g.real[id] == nullptr) {  // the real driver lacks it (reported at load)
            *out = CUDA_ERROR_NOT_FOUND;
            return false;
        }
        // As over the fake, a call made inside a host function is not counted by rules (the
        // driver refuses it there), so a fault sweep sees the same sites.
        if (!t_in_host_callback) d = xmc_faults::decide(g.rules, {base, has_size, size});
    }
    t_nonidentity = d.nonidentity ? d.offset : 0;
    t_exec_delay_us = d.exec_delay_us;
    if (d.delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(d.delay_us));
    if (d.fail) {
        *out = static_cast<CUresult>(d.code);
        return false;
    }
    return true;
}

// The device and context the calling thread's current context gives (-1, null if it cannot say).
InCtx current() {
    State& g = state();
    InCtx c;
    CUdevice dev = 0;
    if (g.ctx_get_current) g.ctx_get_current(&c.ctx);
    if (g.ctx_get_device && g.ctx_get_device(&dev) == CUDA_SUCCESS) c.dev = static_cast<int>(dev);
    return c;
}

template <class M, class K>
typename M::iterator containing(M& m, K addr) {  // the entry of an address map whose range holds addr
    auto it = m.upper_bound(addr);
    if (it == m.begin()) return m.end();
    --it;
    return addr < it->first + it->second.size ? it : m.end();
}

// The context's objects go with it (as the driver frees them): counted as reclaimed.
void reclaim_context_locked(CUcontext ctx) {
    State& g = state();
    auto drop = [&](auto& m) {
        for (auto it = m.begin(); it != m.end();) {
            if (it->second.ctx == ctx) {
                ++g.reclaimed;
                it = m.erase(it);
            } else {
                ++it;
            }
        }
    };
    drop(g.regs);
    drop(g.allocs);
    drop(g.streams);
    drop(g.events);
    drop(g.graphs);
    drop(g.execs);
}

void unmap_locked(CUdeviceptr ptr, size_t size) {
    State& g = state();
    for (auto it = g.mappings.lower_bound(ptr); it != g.mappings.end() && it->first < ptr + size;) {
        g.unmapped.insert(it->first);
        auto h = g.handles.find(it->second.handle);
        if (h != g.handles.end() && --h->second.map_count <= 0 && h->second.released) g.handles.erase(h);
        it = g.mappings.erase(it);
    }
}

void CUDA_CB sleep_fn(void* us) {
    std::this_thread::sleep_for(std::chrono::microseconds(reinterpret_cast<uintptr_t>(us)));
}

void CUDA_CB host_trampoline(void* cookie) {
    auto* c = static_cast<std::pair<CUhostFn, void*>*>(cookie);
    t_on_callback_thread = true;
    t_in_host_callback = true;
    c->first(c->second);
    t_in_host_callback = false;
}

// The calling thread's current context, asked before the ledger's lock is taken (never a driver
// call under it) for the entry points whose objects belong to a context.
template <int Id> constexpr bool kNeedsCtx = false;
template <> constexpr bool kNeedsCtx<id_cuMemHostRegister> = true;
template <> constexpr bool kNeedsCtx<id_cuMemAlloc> = true;
template <> constexpr bool kNeedsCtx<id_cuStreamCreate> = true;
template <> constexpr bool kNeedsCtx<id_cuEventCreate> = true;
template <> constexpr bool kNeedsCtx<id_cuStreamEndCapture> = true;
template <> constexpr bool kNeedsCtx<id_cuGraphInstantiate> = true;
thread_local InCtx t_current;

// ---- per entry point: what a call does to the ledger ---------------------------------------
// Hook<id>::pre runs before the driver call (whatever its outcome), post after one that
// succeeded, with the lock held; both take the call's arguments.

template <int Id>
struct Hook {
    static constexpr bool kPre = false, kPost = false;
};
#define XMC_IP_POST(name, ...)                             \
    template <>                                            \
    struct Hook<id_##name> {                               \
        static constexpr bool kPre = false, kPost = true; \
        static void post(__VA_ARGS__);                     \
    };                                                     \
    void Hook<id_##name>::post(__VA_ARGS__)

XMC_IP_POST(cuMemHostRegister, void* p, size_t n, unsigned flags) {
    state().regs[reinterpret_cast<uintptr_t>(p)] = Reg{n, flags, t_current.dev, t_current.ctx, t_nonidentity};
}
XMC_IP_POST(cuMemHostUnregister, void* p) { state().regs.erase(reinterpret_cast<uintptr_t>(p)); }
// nonidentity: the registration's device address is reported moved by its offset, as the fake
// does (a copy through the moved address would not reach the memory on a real device; the
// backend must refuse such a registration before any copy: REG-IDENTITY).
XMC_IP_POST(cuMemHostGetDevicePointer, CUdeviceptr* out, void* p, unsigned) {
    auto it = containing(state().regs, reinterpret_cast<uintptr_t>(p));
    if (out && it != state().regs.end()) *out += it->second.offset;
}
XMC_IP_POST(cuPointerGetAttribute, void* data, CUpointer_attribute attr, CUdeviceptr p) {
    auto it = containing(state().regs, static_cast<uintptr_t>(p));
    if (data && attr == CU_POINTER_ATTRIBUTE_DEVICE_POINTER && it != state().regs.end())
        *static_cast<CUdeviceptr*>(data) += it->second.offset;
}
XMC_IP_POST(cuMemAlloc, CUdeviceptr* p, size_t n) {
    state().allocs[*p] = Alloc{n, t_current.dev, t_current.ctx};
}
XMC_IP_POST(cuMemFree, CUdeviceptr p) { state().allocs.erase(p); }
XMC_IP_POST(cuMemAddressReserve, CUdeviceptr* p, size_t n, size_t, CUdeviceptr, unsigned long long) {
    state().reservations[*p] = n;
}
XMC_IP_POST(cuMemAddressFree, CUdeviceptr p, size_t) { state().reservations.erase(p); }
XMC_IP_POST(cuMemCreate, CUmemGenericAllocationHandle* h, size_t n, const CUmemAllocationProp* prop,
            unsigned long long) {
    state().handles[*h] = Handle{n, prop ? prop->location.id : -1, 1, 0, false};
    state().gone_handles.erase(*h);
}
XMC_IP_POST(cuMemImportFromShareableHandle, CUmemGenericAllocationHandle* h, void*, CUmemAllocationHandleType) {
    auto [it, fresh] = state().handles.try_emplace(*h, Handle{0, -1, 0, 0, false});
    if (it->second.released) {  // imported again while released and mapped: held again
        it->second.released = false;
        it->second.refs = 0;
    }
    ++it->second.refs;
    (void)fresh;
    state().gone_handles.erase(*h);
}
XMC_IP_POST(cuMemRetainAllocationHandle, CUmemGenericAllocationHandle* h, void*) {
    auto [it, fresh] = state().handles.try_emplace(*h, Handle{0, -1, 0, 0, false});
    if (it->second.released) {  // released while mapped: the program holds it again
        it->second.released = false;
        it->second.refs = 0;
    }
    ++it->second.refs;
    (void)fresh;
}
template <>
struct Hook<id_cuMemRelease> {
    static constexpr bool kPre = true, kPost = true;
    static void pre(CUmemGenericAllocationHandle h) {  // VMM-DOUBLE: a release of a released handle
        auto it = state().handles.find(h);
        if ((it == state().handles.end() || it->second.released) && state().gone_handles.count(h))
            ++state().second_releases;
    }
    static void post(CUmemGenericAllocationHandle h) {
        auto it = state().handles.find(h);
        if (it == state().handles.end() || --it->second.refs > 0) return;
        state().gone_handles.insert(h);
        if (it->second.map_count > 0)
            it->second.released = true;
        else
            state().handles.erase(it);
    }
};
XMC_IP_POST(cuMemMap, CUdeviceptr p, size_t n, size_t offset, CUmemGenericAllocationHandle h, unsigned long long) {
    state().mappings[p] = Mapping{n, h, offset};
    state().unmapped.erase(p);
    if (auto it = state().handles.find(h); it != state().handles.end()) ++it->second.map_count;
}
template <>
struct Hook<id_cuMemUnmap> {
    static constexpr bool kPre = true, kPost = true;
    static void pre(CUdeviceptr p, size_t n) {
        // VMM-DOUBLE: nothing mapped in the range where a mapping was unmapped before (the real
        // driver answers such an unmap CUDA_SUCCESS, so only this count shows it).
        State& g = state();
        auto m = g.mappings.lower_bound(p);
        const bool none = (m == g.mappings.end() || m->first >= p + n) &&
                          containing(g.mappings, p) == g.mappings.end();
        auto u = g.unmapped.lower_bound(p);
        if (none && u != g.unmapped.end() && *u < p + n) ++g.second_releases;
    }
    static void post(CUdeviceptr p, size_t n) { unmap_locked(p, n); }
};
XMC_IP_POST(cuIpcOpenMemHandle, CUdeviceptr* p, CUipcMemHandle, unsigned) { ++state().ipc_opened[*p]; }
XMC_IP_POST(cuIpcCloseMemHandle, CUdeviceptr p) {
    auto it = state().ipc_opened.find(p);
    if (it != state().ipc_opened.end() && --it->second <= 0) state().ipc_opened.erase(it);
}
XMC_IP_POST(cuDevicePrimaryCtxRetain, CUcontext* ctx, CUdevice dev) {
    Primary& p = state().primaries[dev];
    p.ctx = *ctx;
    ++p.refs;
}
XMC_IP_POST(cuDevicePrimaryCtxRelease, CUdevice dev) {
    auto it = state().primaries.find(dev);
    if (it == state().primaries.end() || --it->second.refs > 0) return;
    reclaim_context_locked(it->second.ctx);
    state().primaries.erase(it);
}
XMC_IP_POST(cuDeviceGetAttribute, int* value, CUdevice_attribute attr, CUdevice) {
    if ((attr == CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED && state().hide_register) ||
        (attr == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED && state().hide_vmm))
        *value = 0;
}
XMC_IP_POST(cuStreamCreate, CUstream* s, unsigned) { state().streams[*s] = t_current; }
XMC_IP_POST(cuStreamDestroy, CUstream s) { state().streams.erase(s); }
XMC_IP_POST(cuEventCreate, CUevent* e, unsigned) { state().events[*e] = t_current; }
XMC_IP_POST(cuEventDestroy, CUevent e) { state().events.erase(e); }
XMC_IP_POST(cuStreamEndCapture, CUstream, CUgraph* graph) {
    if (graph && *graph) state().graphs[*graph] = t_current;
}
XMC_IP_POST(cuGraphDestroy, CUgraph graph) { state().graphs.erase(graph); }
XMC_IP_POST(cuGraphInstantiate, CUgraphExec* exec, CUgraph, unsigned long long) {
    state().execs[*exec] = t_current;
}
XMC_IP_POST(cuGraphExecDestroy, CUgraphExec exec) { state().execs.erase(exec); }
// Host functions run through a trampoline that marks their thread, so the call records say
// which driver calls were made inside one (VMM-CALLBACK), as the fake's do.
template <>
struct Hook<id_cuLaunchHostFunc> {
    static constexpr bool kPre = true, kPost = false;
    static void pre(CUstream&, CUhostFn& fn, void*& user) {
        auto& slot = state().cookies[{fn, user}];
        if (slot == nullptr) slot = new std::pair<CUhostFn, void*>(fn, user);
        fn = host_trampoline;
        user = slot;
    }
};
#undef XMC_IP_POST

// ---- the driver's own answers ----------------------------------------------------------------

void note_answer(int id, CUresult r) {
    State& g = state();
    const char* name = result_name(r);
    char code[32];
    if (name == nullptr) std::snprintf(code, sizeof code, "%d", static_cast<int>(r));
    std::lock_guard<std::mutex> lk(g.mu);
    std::string line = (g.mark.empty() ? std::string("-") : g.mark) + '\t' +
                       std::string(dialect().entries[static_cast<size_t>(id)].name) + '\t' + (name ? name : code);
    if (!g.answered.insert(line).second) return;
    line += '\n';
    std::fputs(line.c_str(), g.answers);
    std::fflush(g.answers);
}

// ---- the forwarders ------------------------------------------------------------------------

template <int Id, class F>
struct Fwd;
template <int Id, class... A>
struct Fwd<Id, CUresult (*)(A...)> {
    static CUresult CUDAAPI call(A... a) {
        CUresult r = CUDA_SUCCESS;
        uint64_t size = 0;
        if constexpr (kSizeArg<Id> >= 0) size = static_cast<uint64_t>(std::get<kSizeArg<Id>>(std::tie(a...)));
        if (!enter(Id, kSizeArg<Id> >= 0, size, &r)) return r;
        State& g = state();
        // The hidings of the fake's configuration over a real driver, answered as the fake answers
        // (and recorded as the fake's own answers are).
        r = Id == id_cuInit && g.no_devices                 ? CUDA_ERROR_NO_DEVICE
            : Id == id_cuMemHostRegister && g.hide_register ? CUDA_ERROR_NOT_SUPPORTED
            : (Id == id_cuMemCreate || Id == id_cuMemGetAllocationGranularity) && g.hide_vmm ? CUDA_ERROR_NOT_SUPPORTED
                                                                                             : CUDA_SUCCESS;
        if (r != CUDA_SUCCESS) {
            if (g.answers != nullptr) note_answer(Id, r);
            return r;
        }
        if constexpr (Hook<Id>::kPre) {
            std::lock_guard<std::mutex> lk(g.mu);
            Hook<Id>::pre(a...);
        }
        if constexpr (kQueued<Id>) {
            // exec_delay: a host function that sleeps, queued ahead of the copy on its stream.
            if (t_exec_delay_us > 0) {
                auto launch = reinterpret_cast<decltype(&::cuLaunchHostFunc)>(g.real[id_cuLaunchHostFunc]);
                CUstream s = std::get<sizeof...(A) - 1>(std::tie(a...));
                if (launch == nullptr ||
                    launch(s, sleep_fn, reinterpret_cast<void*>(static_cast<uintptr_t>(t_exec_delay_us))) !=
                        CUDA_SUCCESS)
                    std::fprintf(stderr, "xmc_cuda_interpose: exec_delay of %s could not be queued\n", kSymbols[Id]);
            }
        }
        r = reinterpret_cast<CUresult(CUDAAPI*)(A...)>(g.real[Id])(a...);
        if (r != CUDA_SUCCESS && g.answers != nullptr) note_answer(Id, r);
        if constexpr (Hook<Id>::kPost) {
            if (r == CUDA_SUCCESS) {
                if constexpr (kNeedsCtx<Id>) t_current = current();
                std::lock_guard<std::mutex> lk(g.mu);
                Hook<Id>::post(a...);
            }
        }
        return r;
    }
};

// ---- load ----------------------------------------------------------------------------------

void fail_init(State& g, CUresult code, const std::string& why) {
    g.init_error = why;
    g.error_code = code;
    g.last_error = why;
    std::fprintf(stderr, "xmc_cuda_interpose: %s; every driver call will answer %s\n", why.c_str(),
                 result_name(code));
}

// Reads XMC_FAKE_CUDA_FAULTS (lock held); false when it is malformed.
bool load_faults_locked(State& g) {
    g.rules.clear();
    const char* v = std::getenv("XMC_FAKE_CUDA_FAULTS");
    if (v == nullptr || *v == '\0') return true;
    std::string err;
    if (xmc_faults::parse(dialect(), v, g.rules, err)) return true;
    g.rules.clear();
    fail_init(g, CUDA_ERROR_INVALID_VALUE, "XMC_FAKE_CUDA_FAULTS: " + err);
    g.script_error = true;
    return false;
}

// The fake's configuration (fake_cuda_control.h) where the driver beneath is real: what the
// conformance harness hides is emulated (every device, host registration, VMM); the rest cannot be
// scripted over a real driver and is refused, naming it, never silently ignored.
void real_driver_config_locked(State& g) {
    auto env = [](const char* k) -> std::string {
        const char* v = std::getenv(k);
        return v ? v : "";
    };
    const std::string devices = env("XMC_FAKE_CUDA_DEVICES");
    if (devices == "0")
        g.no_devices = true;
    else if (!devices.empty())
        return fail_init(g, CUDA_ERROR_INVALID_VALUE,
                         "XMC_FAKE_CUDA_DEVICES='" + devices + "': over a real driver the interposer hides every " +
                             "device (0) and no other count (CUDA_VISIBLE_DEVICES selects real devices)");
    for (const char* k : {"XMC_FAKE_CUDA_ORDER", "XMC_FAKE_CUDA_MEM_BYTES", "XMC_FAKE_CUDA_STREAM_POOL_BYTES"})
        if (!env(k).empty())
            return fail_init(g, CUDA_ERROR_INVALID_VALUE,
                             std::string(k) + "='" + env(k) + "' configures the fake driver; the interposer over the " +
                                 "real driver " + g.real_path + " cannot script it");
    const std::string attrs = env("XMC_FAKE_CUDA_ATTRS");
    for (size_t at = 0; at < attrs.size();) {
        size_t end = attrs.find(',', at);
        if (end == std::string::npos) end = attrs.size();
        std::string part = attrs.substr(at, end - at);
        at = end + 1;
        part.erase(0, part.find_first_not_of(" \t"));
        part.erase(part.find_last_not_of(" \t") + 1);
        if (part.empty()) continue;
        if (part == "host_register_supported=0")
            g.hide_register = true;
        else if (part == "virtual_memory_management_supported=0")
            g.hide_vmm = true;
        else
            return fail_init(g, CUDA_ERROR_INVALID_VALUE,
                             "XMC_FAKE_CUDA_ATTRS: '" + part + "': over a real driver the interposer hides only " +
                                 "host_register_supported=0 and virtual_memory_management_supported=0");
    }
}

__attribute__((constructor)) void on_load() {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    // fork: the child must not find the lock held by a thread it does not have.
    pthread_atfork([] { state().mu.lock(); }, [] { state().mu.unlock(); }, [] { state().mu.unlock(); });
    const char* t = std::getenv("XMC_FAKE_CUDA_TRACE");
    g.trace = t != nullptr && *t != '\0' && std::strcmp(t, "0") != 0;
    const char* env = std::getenv("XMC_CUDA_INTERPOSE_REAL");
    g.real_path = env && *env ? env : "libcuda.so.1";
    // The fault script is the interposer's alone: were the real driver the fake, it would apply
    // it as well and fail other calls. Hidden while that library loads (and reads it).
    const char* faults = std::getenv("XMC_FAKE_CUDA_FAULTS");
    const std::string saved = faults ? faults : "";
    if (faults) unsetenv("XMC_FAKE_CUDA_FAULTS");
    g.real_lib = dlopen(g.real_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    const char* err = g.real_lib ? nullptr : dlerror();
    if (faults) setenv("XMC_FAKE_CUDA_FAULTS", saved.c_str(), 1);
    if (!g.real_lib) {
        fail_init(g, CUDA_ERROR_SHARED_OBJECT_INIT_FAILED,
                  "no real driver: dlopen(" + g.real_path + ") failed: " + (err ? err : "unknown error") +
                      " (XMC_CUDA_INTERPOSE_REAL names it, default libcuda.so.1)");
        return;
    }
    if (dlsym(g.real_lib, "xmc_cuda_interpose_real_driver") != nullptr) {
        fail_init(g, CUDA_ERROR_SHARED_OBJECT_INIT_FAILED,
                  "XMC_CUDA_INTERPOSE_REAL='" + g.real_path + "' is the interposer itself, not a driver");
        return;
    }
    std::string missing;
    for (int i = 0; i < kEntries; ++i) {
        g.real[i] = dlsym(g.real_lib, kSymbols[i]);
        if (!g.real[i]) missing += std::string(missing.empty() ? "" : ", ") + kSymbols[i];
    }
    if (g.real[id_cuInit] == nullptr) {
        fail_init(g, CUDA_ERROR_SHARED_OBJECT_INIT_FAILED,
                  g.real_path + " is not a CUDA driver: it does not export " + kSymbols[id_cuInit]);
        return;
    }
    // An entry point the driver lacks answers CUDA_ERROR_NOT_FOUND (never a silent success).
    if (!missing.empty())
        std::fprintf(stderr, "xmc_cuda_interpose: %s does not export %s; those answer CUDA_ERROR_NOT_FOUND\n",
                     g.real_path.c_str(), missing.c_str());
    g.ctx_get_current = reinterpret_cast<decltype(g.ctx_get_current)>(dlsym(g.real_lib, "cuCtxGetCurrent"));
    g.ctx_get_device = reinterpret_cast<decltype(g.ctx_get_device)>(dlsym(g.real_lib, "cuCtxGetDevice"));
    // Over the fake (the tests here), the fake reads its own configuration.
    if (dlsym(g.real_lib, "xmc_fake_cuda_set_faults") == nullptr) real_driver_config_locked(g);
    if (g.init_error.empty()) load_faults_locked(g);  // malformed: every call answers CUDA_ERROR_INVALID_VALUE
    if (const char* a = std::getenv("XMC_CUDA_INTERPOSE_ANSWERS"); a && *a && g.init_error.empty()) {
        g.answers = std::fopen(a, "a");  // appended: every process of a qualification writes its lines
        if (g.answers == nullptr)
            fail_init(g, CUDA_ERROR_INVALID_VALUE,
                      std::string("XMC_CUDA_INTERPOSE_ANSWERS='") + a + "' cannot be opened to append: " +
                          std::strerror(errno));
    }
}

// ---- ledger --------------------------------------------------------------------------------

std::string ledger_locked(size_t* live_out) {
    State& g = state();
    std::string body;
    size_t live = 0;
    char line[256];
    auto add = [&](const char* fmt, auto... args) {
        std::snprintf(line, sizeof line, fmt, args...);
        body += line;
        body += '\n';
    };
    auto hex = [](const void* p) { return static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)); };
    for (auto& [d, p] : g.primaries) {
        live += static_cast<size_t>(p.refs);
        add("context 0x%llx primary of device %d, retained %d time(s)", hex(p.ctx), static_cast<int>(d), p.refs);
    }
    for (auto& [s, c] : g.streams) {
        ++live;
        add("stream 0x%llx of context 0x%llx", hex(s), hex(c.ctx));
    }
    for (auto& [e, c] : g.events) {
        ++live;
        add("event 0x%llx of context 0x%llx", hex(e), hex(c.ctx));
    }
    for (auto& [b, a] : g.allocs) {
        ++live;
        add("device allocation 0x%llx, %zu bytes, device %d", static_cast<unsigned long long>(b), a.size, a.dev);
    }
    for (auto& [b, r] : g.regs) {
        ++live;
        if (r.offset == 0)
            add("registration 0x%" PRIxPTR ", %zu bytes, flags 0x%x, device %d, context 0x%llx", b, r.size, r.flags,
                r.dev, hex(r.ctx));
        else
            add("registration 0x%" PRIxPTR ", %zu bytes, flags 0x%x, device %d, context 0x%llx, device address "
                "0x%" PRIxPTR,
                b, r.size, r.flags, r.dev, hex(r.ctx), static_cast<uintptr_t>(b + r.offset));
    }
    for (auto& [b, n] : g.reservations) {
        ++live;
        add("address reservation 0x%llx, %zu bytes", static_cast<unsigned long long>(b), n);
    }
    for (auto& [h, p] : g.handles) {
        if (p.released) {
            add("physical handle 0x%llx, %zu bytes, device %d: released, freed when its %d mapping(s) go",
                static_cast<unsigned long long>(h), p.size, p.dev, p.map_count);
        } else {
            ++live;
            add("physical handle 0x%llx, %zu bytes, device %d, mapped %d time(s)", static_cast<unsigned long long>(h),
                p.size, p.dev, p.map_count);
        }
    }
    for (auto& [va, m] : g.mappings) {
        ++live;
        add("mapping 0x%llx, %zu bytes, of handle 0x%llx at offset %zu", static_cast<unsigned long long>(va), m.size,
            static_cast<unsigned long long>(m.handle), m.offset);
    }
    for (auto& [b, n] : g.ipc_opened) {
        ++live;
        add("IPC mapping 0x%llx, opened %d time(s)", static_cast<unsigned long long>(b), n);
    }
    for (auto& [h, c] : g.graphs) {
        ++live;
        add("graph 0x%llx of context 0x%llx", hex(h), hex(c.ctx));
    }
    for (auto& [h, c] : g.execs) {
        ++live;
        add("executable graph 0x%llx of context 0x%llx", hex(h), hex(c.ctx));
    }
    std::string head = "live objects: " + std::to_string(live) + "\n";
    if (g.reclaimed > 0)
        head += "objects freed implicitly by context destruction: " + std::to_string(g.reclaimed) + "\n";
    if (live_out) *live_out = live;
    return head + body;
}

size_t copy_out(const std::string& s, char* buf, size_t n) {
    if (buf != nullptr && n > 0) {
        const size_t k = std::min(s.size(), n - 1);
        std::memcpy(buf, s.data(), k);
        buf[k] = '\0';
    }
    return s.size();
}

}  // namespace xmc_ip

// ---- the exported entry points: trampolines through the slots ------------------------------

#if defined(__x86_64__)
#if defined(__CET__)
#define XMC_IP_LANDING "endbr64\n"
#else
#define XMC_IP_LANDING ""
#endif
#define XMC_IP_JUMP(slot) XMC_IP_LANDING "jmp *" slot "(%rip)\n"
#elif defined(__aarch64__)
#define XMC_IP_JUMP(slot) "adrp x16, " slot "\nldr x16, [x16, :lo12:" slot "]\nbr x16\n"
#else
#error "libxmc_cuda_interpose: no trampoline for this architecture (x86_64 and aarch64 only)"
#endif

extern "C" {
#define XMC_IP_EXPORT(name)                                                                              \
    __attribute__((visibility("hidden"))) decltype(&::name) xmc_ip_slot_##name =                        \
        &xmc_ip::Fwd<xmc_ip::id_##name, decltype(&::name)>::call;                                        \
    asm(".text\n.globl " XMC_IP_STR(name) "\n.type " XMC_IP_STR(name) ", @function\n.p2align 4\n" XMC_IP_STR( \
        name) ":\n" XMC_IP_JUMP("xmc_ip_slot_" #name) ".size " XMC_IP_STR(name) ", .-" XMC_IP_STR(name) "\n");
XMC_IP_ALL(XMC_IP_EXPORT)
#undef XMC_IP_EXPORT
}

// ---- the control API (fake_cuda_control.h) -------------------------------------------------

using xmc_ip::state;
using xmc_ip::State;

XMC_FAKE_CUDA_EXPORT int xmc_fake_cuda_set_faults(const char* script) {
    State& g = state();
    std::vector<xmc_faults::Rule> rules;
    std::string err;
    if (script != nullptr && !xmc_faults::parse(xmc_ip::dialect(), script, rules, err)) {
        std::lock_guard<std::mutex> lk(g.mu);
        g.last_error = err;
        return -1;
    }
    std::lock_guard<std::mutex> lk(g.mu);
    g.rules = std::move(rules);
    g.last_error = g.init_error;
    return 0;
}

XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_last_error(char* buf, size_t n) {
    State& g = state();
    std::string msg;
    {
        std::lock_guard<std::mutex> lk(g.mu);
        msg = g.last_error;
    }
    // Over the fake (the tests here): its configuration error, which the interposer passes on.
    if (msg.empty() && g.real_lib) {
        if (auto real = reinterpret_cast<size_t (*)(char*, size_t)>(dlsym(g.real_lib, "xmc_fake_cuda_last_error"))) {
            std::vector<char> b(real(nullptr, 0) + 1);
            real(b.data(), b.size());
            msg = b.data();
        }
    }
    return xmc_ip::copy_out(msg, buf, n);
}

XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_ledger(char* buf, size_t n) {
    std::lock_guard<std::mutex> lk(state().mu);
    return xmc_ip::copy_out(xmc_ip::ledger_locked(nullptr), buf, n);
}

XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_live_objects(void) {
    std::lock_guard<std::mutex> lk(state().mu);
    size_t live = 0;
    xmc_ip::ledger_locked(&live);
    return live;
}

XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_reclaimed_objects(void) {
    std::lock_guard<std::mutex> lk(state().mu);
    return state().reclaimed;
}

XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_second_releases(void) {
    std::lock_guard<std::mutex> lk(state().mu);
    return state().second_releases;
}

XMC_FAKE_CUDA_EXPORT uint64_t xmc_fake_cuda_call_count(const char* entry) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    if (entry == nullptr) return g.total_calls;
    const std::string_view base = xmc_ip::base_name(entry);
    for (int i = 0; i < xmc_ip::kEntries; ++i)
        if (base == xmc_ip::dialect().entries[static_cast<size_t>(i)].name) return g.calls[i];
    return 0;
}

XMC_FAKE_CUDA_EXPORT size_t xmc_fake_cuda_call_records(xmc_fake_cuda_call_record* out, size_t n) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    const size_t k = std::min(n, g.records.size());
    if (out != nullptr && k > 0) std::memcpy(out, g.records.data(), k * sizeof *out);
    return g.records_seen;
}

XMC_FAKE_CUDA_EXPORT void xmc_fake_cuda_reset_call_records(void) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    g.records.clear();
    g.records_seen = 0;
}

// Over a real driver nothing can be freed behind the program's back: the reset clears the
// rules, the counters and the records and re-reads XMC_FAKE_CUDA_FAULTS; the ledger keeps the
// objects still open in the driver (they are).
XMC_FAKE_CUDA_EXPORT void xmc_fake_cuda_reset(void) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    std::fill(std::begin(g.calls), std::end(g.calls), 0);
    g.total_calls = 0;
    g.records.clear();
    g.records_seen = 0;
    g.reclaimed = 0;
    g.second_releases = 0;
    if (g.script_error) {  // a malformed script was the error
        g.script_error = false;
        g.init_error.clear();
        g.error_code = CUDA_SUCCESS;
        g.last_error.clear();
    }
    if (g.init_error.empty()) xmc_ip::load_faults_locked(g);
}

// The interposer's own: the test now running, which names the answers recorded from here on
// (XMC_CUDA_INTERPOSE_ANSWERS). The conformance harness calls it as each test starts.
extern "C" XMC_FAKE_CUDA_EXPORT void xmc_cuda_interpose_mark(const char* what) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    g.mark = what ? what : "";
    // The test ran: one that the driver answered nothing but success still counts in a comparison.
    if (g.answers != nullptr && !g.mark.empty() && g.answered.insert(g.mark + "\t-\tstarted").second) {
        std::fprintf(g.answers, "%s\t-\tstarted\n", g.mark.c_str());
        std::fflush(g.answers);
    }
}

// The interposer's own: the real driver it forwards to (copied like xmc_fake_cuda_last_error),
// so a harness can tell it runs over the interposer and name the driver beneath.
extern "C" XMC_FAKE_CUDA_EXPORT size_t xmc_cuda_interpose_real_driver(char* buf, size_t n) {
    return xmc_ip::copy_out(state().real_path, buf, n);
}
