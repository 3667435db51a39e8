// Initialisation, version, error strings, cuGetProcAddress, devices and
// contexts (primary contexts, created contexts, the per-thread current-context
// stack, peer access).
//
// Answers on misuse follow the probe's recording on a real driver
// (hardware/probe/cuda_driver_580_h200.tsv), e.g.:
//   cuDeviceGetCount before cuInit          CUDA_ERROR_NOT_INITIALIZED
//   cuDeviceGet(ordinal >= count)           CUDA_ERROR_INVALID_DEVICE
//   cuDevicePrimaryCtxRelease, not retained CUDA_ERROR_INVALID_CONTEXT
//   cuCtxPopCurrent with an empty stack     CUDA_ERROR_INVALID_CONTEXT
//   cuCtxPushCurrent(NULL)                  CUDA_ERROR_INVALID_VALUE
//   cuCtxPushCurrent of a primary context
//     released to no retains                CUDA_SUCCESS; calls in it answer
//                                           CUDA_ERROR_CONTEXT_IS_DESTROYED
//   cuCtxEnablePeerAccess(NULL)             CUDA_ERROR_INVALID_CONTEXT
//   cuCtxEnablePeerAccess of itself         CUDA_ERROR_PEER_ACCESS_UNSUPPORTED

#include <cstdio>
#include <cstring>

#include "fake_cuda_internal.h"

namespace xmc_fake {

bool valid_ordinal_locked(int ordinal) {
    return ordinal >= 0 && static_cast<size_t>(ordinal) < state().devices.size();
}

Context* find_ctx_locked(uint64_t handle) {
    State& g = state();
    auto it = g.contexts.find(handle);
    if (it == g.contexts.end() || !it->second->alive) return nullptr;
    return it->second.get();
}

Context* current_ctx_locked(CUresult* err, bool check_sticky) {
    std::vector<uint64_t>& st = ctx_stack();
    State& g = state();
    auto it = st.empty() ? g.contexts.end() : g.contexts.find(st.back());
    if (it == g.contexts.end()) {
        *err = CUDA_ERROR_INVALID_CONTEXT;
        return nullptr;
    }
    Context* c = it->second.get();
    if (!c->alive) {
        // Only a primary context stays known while not alive: released to no
        // retains, and still current (recorded: cuMemAlloc there answers
        // CUDA_ERROR_CONTEXT_IS_DESTROYED, ctx_released_primary_mem_alloc).
        *err = c->primary ? CUDA_ERROR_CONTEXT_IS_DESTROYED : CUDA_ERROR_INVALID_CONTEXT;
        return nullptr;
    }
    if (check_sticky && c->sticky != CUDA_SUCCESS) {
        *err = c->sticky;
        return nullptr;
    }
    *err = CUDA_SUCCESS;
    return c;
}

// Attribute values of the fake devices (an H200-like device), before overrides.
int device_attribute_locked(int ordinal, int attr, bool* known) {
    const Device& d = state().devices[static_cast<size_t>(ordinal)];
    *known = true;
    auto o = d.attr_overrides.find(attr);
    if (o != d.attr_overrides.end()) return o->second;
    switch (attr) {
        case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
        case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
        case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
        case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: return 1;
        case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
        case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
        case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return 1;
        case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return 0x10 + d.physical;
        case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: return 0;
        case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: return 0;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
        case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
        case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 2;
        case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
        case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
        case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
        case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 6144;
        default: *known = false; return 0;
    }
}

namespace {

// Builds the devices and their (not yet active) primary contexts from the configuration.
void build_devices_locked(State& g) {
    g.devices.clear();
    g.primary.clear();
    for (int i = 0; i < g.config.device_count; ++i) {
        Device d;
        d.physical = g.config.order[static_cast<size_t>(i)];
        unsigned char p = static_cast<unsigned char>(d.physical);
        // A fixed, distinct UUID per physical device ("xmc fake" + index).
        const unsigned char base[16] = {0x78, 0x6d, 0x63, 0x2d, 0x66, 0x61, 0x6b, 0x65,
                                        0x2d, 0x67, 0x70, 0x75, 0x00, 0x00, 0x00, 0x00};
        std::memcpy(d.uuid.bytes, base, 16);
        d.uuid.bytes[12] = static_cast<char>(0xa0 ^ p);
        d.uuid.bytes[13] = static_cast<char>(p * 37 + 11);
        d.uuid.bytes[14] = static_cast<char>(0x5c ^ (p * 91));
        d.uuid.bytes[15] = static_cast<char>(p);
        d.name = "XMC Fake CUDA Device (physical " + std::to_string(d.physical) + ")";
        d.total = g.config.mem_bytes[static_cast<size_t>(d.physical)];
        for (auto& [phys, av] : g.config.attrs)
            if (phys < 0 || phys == d.physical) d.attr_overrides[av.first] = av.second;
        g.devices.push_back(d);
        auto c = std::make_shared<Context>();
        c->handle = new_handle_locked();
        c->ordinal = i;
        c->primary = true;
        g.contexts[c->handle] = c;
        g.primary.push_back(c->handle);
    }
}

void push_ctx(uint64_t h) { ctx_stack().push_back(h); }

}  // namespace

void destroy_context_locked(std::unique_lock<std::mutex>& lk, Context* c) {
    State& g = state();
    uint64_t h = c->handle;
    // Streams first: their work finishes (as on the real driver) before anything is freed.
    std::vector<std::shared_ptr<Stream>> mine;
    for (auto it = g.streams.begin(); it != g.streams.end();) {
        if (it->second->ctx == h) {
            mine.push_back(it->second);
            ++g.reclaimed;
            it = g.streams.erase(it);
        } else {
            ++it;
        }
    }
    if (c->null_stream) mine.push_back(c->null_stream);
    c->null_stream.reset();
    for (auto& s : mine) retire_stream_locked(s);
    g.cv.wait(lk, [&] {
        for (auto& s : mine)
            if (!s->exited) return false;
        return true;
    });
    reap_retired_locked();
    for (auto it = g.events.begin(); it != g.events.end();) {
        if (it->second->ctx == h) {
            ++g.reclaimed;
            it = g.events.erase(it);
        } else {
            ++it;
        }
    }
    for (auto it = g.allocations.begin(); it != g.allocations.end();) {
        if (it->second.ctx == h) {
            ++g.reclaimed;
            free_allocation_locked(it++);
        } else {
            ++it;
        }
    }
    for (auto it = g.registrations.begin(); it != g.registrations.end();) {
        if (it->second.ctx == h) {
            ++g.reclaimed;
            it = g.registrations.erase(it);
        } else {
            ++it;
        }
    }
    for (auto& [oh, other] : g.contexts) other->peers.erase(h);
    c->peers.clear();
    c->sticky = CUDA_SUCCESS;
    c->alive = false;
    c->refs = 0;
    g.cv.notify_all();
}

}  // namespace xmc_fake

using namespace xmc_fake;

// ---- initialisation, version, errors ------------------------------------------------

XMC_FAKE_EXPORT CUresult cuInit(unsigned int flags) {
    FAKE_ENTER_NO_INIT("cuInit");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (!g.config.error.empty()) return CUDA_ERROR_INVALID_VALUE;
    if (g.initialized) return CUDA_SUCCESS;
    if (g.config.device_count == 0) return CUDA_ERROR_NO_DEVICE;
    build_devices_locked(g);
    g.initialized = true;
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuDriverGetVersion(int* version) {
    FAKE_ENTER_NO_INIT("cuDriverGetVersion");
    if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *version = kDriverVersion;
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuGetErrorName(CUresult error, const char** str) {
    FAKE_ENTER_NO_INIT("cuGetErrorName");
    if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *str = result_name(error);
    return *str == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuGetErrorString(CUresult error, const char** str) {
    FAKE_ENTER_NO_INIT("cuGetErrorString");
    if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *str = result_string(error);
    return *str == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

// Gives the newest version of an entry point that `cudaVersion` allows.
XMC_FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                             CUdriverProcAddressQueryResult* status) {
    FAKE_ENTER_NO_INIT("cuGetProcAddress");
    (void)flags;  // per-thread default stream variants are not modelled
    if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const EntryPoint* best = nullptr;
    bool found_any = false;
    for (const EntryPoint& e : entry_points()) {
        if (std::strcmp(e.base, symbol) != 0) continue;
        found_any = true;
        if (e.min_version <= cudaVersion && (best == nullptr || e.min_version > best->min_version)) best = &e;
    }
    *pfn = best != nullptr ? best->fn : nullptr;
    if (status != nullptr)
        *status = best != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS
                  : found_any     ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                  : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return best != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

// ---- devices -------------------------------------------------------------------------------

XMC_FAKE_EXPORT CUresult cuDeviceGetCount(int* count) {
    FAKE_ENTER("cuDeviceGetCount");
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> lk(state().mu);
    *count = static_cast<int>(state().devices.size());
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
    FAKE_ENTER("cuDeviceGet");
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> lk(state().mu);
    if (!valid_ordinal_locked(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
    FAKE_ENTER("cuDeviceGetName");
    std::lock_guard<std::mutex> lk(state().mu);
    if (!valid_ordinal_locked(dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    std::snprintf(name, static_cast<size_t>(len), "%s", state().devices[static_cast<size_t>(dev)].name.c_str());
    return CUDA_SUCCESS;
}

namespace {
CUresult get_uuid(CUuuid* uuid, CUdevice dev) {
    std::lock_guard<std::mutex> lk(state().mu);
    if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ordinal_locked(dev)) return CUDA_ERROR_INVALID_DEVICE;
    *uuid = state().devices[static_cast<size_t>(dev)].uuid;
    return CUDA_SUCCESS;
}
}  // namespace

XMC_FAKE_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
    FAKE_ENTER("cuDeviceGetUuid_v2");
    return get_uuid(uuid, dev);
}

// The older export (symbol "cuDeviceGetUuid"); same answer here.
CUresult xmc_fake_cuDeviceGetUuid_v1(CUuuid* uuid, CUdevice dev) {
    FAKE_ENTER("cuDeviceGetUuid");
    return get_uuid(uuid, dev);
}

XMC_FAKE_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
    FAKE_ENTER("cuDeviceTotalMem_v2");
    std::lock_guard<std::mutex> lk(state().mu);
    if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ordinal_locked(dev)) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = state().devices[static_cast<size_t>(dev)].total;
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attrib, CUdevice dev) {
    FAKE_ENTER("cuDeviceGetAttribute");
    std::lock_guard<std::mutex> lk(state().mu);
    if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ordinal_locked(dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (static_cast<int>(attrib) <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    bool known = false;
    *value = device_attribute_locked(dev, attrib, &known);  // attributes not modelled read 0
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuDeviceGetPCIBusId(char* busid, int len, CUdevice dev) {
    FAKE_ENTER("cuDeviceGetPCIBusId");
    std::lock_guard<std::mutex> lk(state().mu);
    if (busid == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ordinal_locked(dev)) return CUDA_ERROR_INVALID_DEVICE;
    bool known = false;
    int bus = device_attribute_locked(dev, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, &known);
    std::snprintf(busid, static_cast<size_t>(len), "00000000:%02X:00.0", bus & 0xff);
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuDeviceCanAccessPeer(int* can, CUdevice dev, CUdevice peer) {
    FAKE_ENTER("cuDeviceCanAccessPeer");
    std::lock_guard<std::mutex> lk(state().mu);
    if (can == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ordinal_locked(dev) || !valid_ordinal_locked(peer)) return CUDA_ERROR_INVALID_DEVICE;
    *can = dev != peer ? 1 : 0;
    return CUDA_SUCCESS;
}

// ---- primary contexts ------------------------------------------------------------------------

XMC_FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
    FAKE_ENTER("cuDevicePrimaryCtxRetain");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ordinal_locked(dev)) return CUDA_ERROR_INVALID_DEVICE;
    Context& c = *g.contexts[g.primary[static_cast<size_t>(dev)]];
    c.alive = true;
    ++c.refs;
    *pctx = to_handle<CUcontext>(c.handle);
    return CUDA_SUCCESS;
}

// Drops one retain; the last one destroys the context's resources (the real
// driver resets the primary context then). The handle stays the same.
XMC_FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    FAKE_ENTER("cuDevicePrimaryCtxRelease_v2");
    State& g = state();
    std::unique_lock<std::mutex> lk(g.mu);
    if (!valid_ordinal_locked(dev)) return CUDA_ERROR_INVALID_DEVICE;
    Context& c = *g.contexts[g.primary[static_cast<size_t>(dev)]];
    if (!c.alive || c.refs <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--c.refs == 0) destroy_context_locked(lk, &c);
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
    FAKE_ENTER("cuDevicePrimaryCtxGetState");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ordinal_locked(dev)) return CUDA_ERROR_INVALID_DEVICE;
    *flags = 0;
    *active = g.contexts[g.primary[static_cast<size_t>(dev)]]->alive ? 1 : 0;
    return CUDA_SUCCESS;
}

// ---- created contexts -------------------------------------------------------------------------

namespace {
CUresult create_ctx(CUcontext* pctx, unsigned int flags, CUdevice dev) {
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ordinal_locked(dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (flags & ~0x1fu) return CUDA_ERROR_INVALID_VALUE;  // scheduling / map-host / lmem flags
    auto c = std::make_shared<Context>();
    c->handle = new_handle_locked();
    c->ordinal = dev;
    c->primary = false;
    c->refs = 1;
    c->alive = true;
    g.contexts[c->handle] = c;
    push_ctx(c->handle);  // a created context becomes current, like the real one
    *pctx = to_handle<CUcontext>(c->handle);
    return CUDA_SUCCESS;
}
}  // namespace

XMC_FAKE_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
    FAKE_ENTER("cuCtxCreate_v2");
    return create_ctx(pctx, flags, dev);
}

XMC_FAKE_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags,
                                        CUdevice dev) {
    FAKE_ENTER("cuCtxCreate_v4");
    if (params != nullptr && (params->execAffinityParams != nullptr || params->cigParams != nullptr))
        return CUDA_ERROR_NOT_SUPPORTED;
    return create_ctx(pctx, flags, dev);
}

XMC_FAKE_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
    FAKE_ENTER("cuCtxDestroy_v2");
    State& g = state();
    std::unique_lock<std::mutex> lk(g.mu);
    Context* c = find_ctx_locked(from_handle(ctx));
    if (c == nullptr || c->primary) return CUDA_ERROR_INVALID_CONTEXT;
    uint64_t h = c->handle;
    std::shared_ptr<Context> keep = g.contexts[h];
    destroy_context_locked(lk, c);
    g.contexts.erase(h);
    std::vector<uint64_t>& st = ctx_stack();
    if (!st.empty() && st.back() == h) st.pop_back();  // "also popped" if current
    return CUDA_SUCCESS;
}

// ---- the current context ---------------------------------------------------------------------------

XMC_FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    FAKE_ENTER("cuCtxSetCurrent");
    std::lock_guard<std::mutex> lk(state().mu);
    std::vector<uint64_t>& st = ctx_stack();
    if (ctx == nullptr) {  // unbinds: pops the top, if any
        if (!st.empty()) st.pop_back();
        return CUDA_SUCCESS;
    }
    if (find_ctx_locked(from_handle(ctx)) == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    if (st.empty())
        st.push_back(from_handle(ctx));
    else
        st.back() = from_handle(ctx);
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx) {
    FAKE_ENTER("cuCtxGetCurrent");
    std::lock_guard<std::mutex> lk(state().mu);
    if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::vector<uint64_t>& st = ctx_stack();
    *pctx = st.empty() ? nullptr : to_handle<CUcontext>(st.back());
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuCtxGetDevice(CUdevice* dev) {
    FAKE_ENTER("cuCtxGetDevice");
    std::lock_guard<std::mutex> lk(state().mu);
    if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUresult err = CUDA_SUCCESS;
    Context* c = current_ctx_locked(&err, false);
    if (c == nullptr) return err;
    *dev = c->ordinal;
    return CUDA_SUCCESS;
}

// A primary context released to no retains keeps its handle: it is pushed,
// and the calls made in it answer CUDA_ERROR_CONTEXT_IS_DESTROYED (recorded:
// ctx_push_released_primary, ctx_released_primary_mem_alloc).
XMC_FAKE_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    FAKE_ENTER("cuCtxPushCurrent_v2");
    State& g = state();
    std::lock_guard<std::mutex> lk(g.mu);
    if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto it = g.contexts.find(from_handle(ctx));
    if (it == g.contexts.end() || (!it->second->alive && !it->second->primary)) return CUDA_ERROR_INVALID_CONTEXT;
    push_ctx(from_handle(ctx));
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
    FAKE_ENTER("cuCtxPopCurrent_v2");
    std::lock_guard<std::mutex> lk(state().mu);
    std::vector<uint64_t>& st = ctx_stack();
    if (st.empty()) return CUDA_ERROR_INVALID_CONTEXT;
    if (pctx != nullptr) *pctx = to_handle<CUcontext>(st.back());
    st.pop_back();
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuCtxSynchronize(void) {
    FAKE_ENTER("cuCtxSynchronize");
    State& g = state();
    std::unique_lock<std::mutex> lk(g.mu);
    CUresult err = CUDA_SUCCESS;
    Context* c = current_ctx_locked(&err);
    if (c == nullptr) return err;
    uint64_t h = c->handle;
    g.cv.wait(lk, [&] {
        Context* cc = find_ctx_locked(h);
        if (cc == nullptr) return true;
        if (cc->sticky != CUDA_SUCCESS) return true;
        if (cc->null_stream && !cc->null_stream->queue.empty()) return false;
        for (auto& [sh, s] : g.streams)
            if (s->ctx == h && !s->queue.empty()) return false;
        return true;
    });
    Context* cc = find_ctx_locked(h);
    if (cc == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    return cc->sticky;
}

// ---- peer access ----------------------------------------------------------------------------------

XMC_FAKE_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
    FAKE_ENTER("cuCtxEnablePeerAccess");
    std::lock_guard<std::mutex> lk(state().mu);
    CUresult err = CUDA_SUCCESS;
    Context* c = current_ctx_locked(&err);
    if (c == nullptr) return err;
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    // Recorded (enable_peer_access_null, _self): a NULL peer is an invalid
    // context; a device cannot be its own peer (cuDeviceCanAccessPeer(d, d) is 0).
    Context* p = find_ctx_locked(from_handle(peer));
    if (p == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    if (p->ordinal == c->ordinal) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    if (!c->peers.insert(p->handle).second) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    return CUDA_SUCCESS;
}

XMC_FAKE_EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peer) {
    FAKE_ENTER("cuCtxDisablePeerAccess");
    std::lock_guard<std::mutex> lk(state().mu);
    CUresult err = CUDA_SUCCESS;
    Context* c = current_ctx_locked(&err);
    if (c == nullptr) return err;
    Context* p = find_ctx_locked(from_handle(peer));
    if (p == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (c->peers.erase(p->handle) == 0) return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    return CUDA_SUCCESS;
}
