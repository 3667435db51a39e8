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
#include "interpose.hpp"

namespace xmc_ip {

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

// Keeps the call's record (fake_cuda_control.h's call records), lock-free: the VMM watcher polls
// cuEventQuery while the program calls, and with both behind one lock every forwarded call paid
// for the other's (a 2-D copy or a slot's graph through the interposer took 3-6% longer on the
// H200 than straight, with no fault scripted).
void record_call(State& g, std::string_view base) {
    const uint64_t c = g.cursor.fetch_add(1, std::memory_order_acq_rel);
    const uint64_t i = c & 0xffffffffu, gen = c >> 32;
    if (i >= XMC_FAKE_CUDA_CALL_RECORDS) return;  // counted, not kept
    State::Slot& s = g.slots[i];
    const uint64_t writing = 2 * gen + 1;
    for (uint64_t cur = s.stamp.load(std::memory_order_acquire);;) {
        if (cur >= writing) return;  // a later generation has the slot: this call's records were reset
        if (cur & 1) {               // an earlier generation's writer is still at it: wait for it
            std::this_thread::yield();
            cur = s.stamp.load(std::memory_order_acquire);
            continue;
        }
        if (s.stamp.compare_exchange_weak(cur, writing, std::memory_order_acq_rel)) break;
    }
    // The thread's id asked once per thread (gettid is a system call), the name copied, not
    // formatted: with a snprintf and a gettid per call, a 4 KiB register+unregister through the
    // interposer took 15-27% longer on the H200 (its backend makes about ten driver calls for it).
    thread_local const int64_t tid = static_cast<int64_t>(gettid());
    xmc_fake_cuda_call_record rec{};
    std::memcpy(rec.entry, base.data(), std::min(base.size(), sizeof rec.entry - 1));
    rec.tid = tid;
    rec.in_host_callback = t_in_host_callback;
    rec.on_callback_thread = t_on_callback_thread;
    s.rec = rec;
    s.stamp.store(writing + 1, std::memory_order_release);
}

// Copies the records of the current generation (lock held: no reset meanwhile); a slot claimed
// but not yet written is waited for (its writer is between two instructions), at most a second.
size_t read_records(State& g, xmc_fake_cuda_call_record* out, size_t n) {
    const uint64_t c = g.cursor.load(std::memory_order_acquire);
    const uint64_t seen = c & 0xffffffffu, whole = 2 * (c >> 32) + 2;
    const size_t k = std::min<uint64_t>({n, seen, XMC_FAKE_CUDA_CALL_RECORDS});
    for (size_t i = 0; i < k; ++i) {
        State::Slot& s = g.slots[i];
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        while (s.stamp.load(std::memory_order_acquire) != whole && std::chrono::steady_clock::now() < until)
            std::this_thread::yield();
        out[i] = s.rec;
    }
    return seen;
}

void reset_records_locked(State& g) {
    g.cursor.store(((g.cursor.load() >> 32) + 1) << 32, std::memory_order_release);
}

// Whether a call may skip the lock (State::quiet); called under it wherever rules, trace or the
// load error change.
void requiet_locked(State& g) {
    g.quiet.store(g.rules.empty() && g.init_error.empty() && !g.trace, std::memory_order_release);
}

// Counts and records the call, and decides what the rules do to it. false: answer *out
// without calling the driver (a scripted failure, or the interposer could not be set up).
bool enter(int id, bool has_size, uint64_t size, CUresult* out) {
    State& g = state();
    g.calls[id].fetch_add(1, std::memory_order_relaxed);
    const std::string_view base = dialect().entries[static_cast<size_t>(id)].name;
    record_call(g, base);
    if (g.real[id] == nullptr && g.quiet.load(std::memory_order_acquire)) {
        *out = CUDA_ERROR_NOT_FOUND;  // the real driver lacks it (reported at load)
        return false;
    }
    t_nonidentity = 0;
    t_exec_delay_us = 0;
    if (g.quiet.load(std::memory_order_acquire)) return true;  // nothing scripted: forward
    xmc_faults::Decision d;
    {
        std::lock_guard<std::mutex> lk(g.mu);
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
    requiet_locked(g);
    std::fprintf(stderr, "xmc_cuda_interpose: %s; every driver call will answer %s\n", why.c_str(),
                 result_name(code));
}

// Reads XMC_FAKE_CUDA_FAULTS (lock held); false when it is malformed.
bool load_faults_locked(State& g) {
    g.rules.clear();
    const char* v = std::getenv("XMC_FAKE_CUDA_FAULTS");
    std::string err;
    const bool ok = v == nullptr || *v == '\0' || xmc_faults::parse(dialect(), v, g.rules, err);
    requiet_locked(g);
    if (ok) return true;
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
    requiet_locked(g);
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
