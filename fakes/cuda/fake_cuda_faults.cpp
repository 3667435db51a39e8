// The table of exported entry points (for cuGetProcAddress, and for fault
// scripts: which entries exist, which take a size, queue a copy or make
// objects), CUresult names, and the fault-script dialect built from both
// (the grammar and its parser: fakes/README.md, fakes/common/).
#include <cstdio>
#include <cstring>

#include "fake_cuda_internal.h"

namespace xmc_fake {

// ---- CUresult names -----------------------------------------------------------

namespace {
struct ResultInfo {
    CUresult code;
    const char* name;
    const char* text;
};
const ResultInfo kResults[] = {
#define XMC_CU_RESULT(name, text) {name, #name, text},
#include "fake_cuda_results.inc"
#undef XMC_CU_RESULT
};
}  // namespace

const char* result_name(CUresult r) {
    for (const ResultInfo& i : kResults)
        if (i.code == r) return i.name;
    return nullptr;
}

const char* result_string(CUresult r) {
    for (const ResultInfo& i : kResults)
        if (i.code == r) return i.text;
    return nullptr;
}

bool result_from_name(std::string_view name, CUresult* out) {
    for (const ResultInfo& i : kResults)
        if (name == i.name) {
            *out = i.code;
            return true;
        }
    return false;
}

// ---- entry points -------------------------------------------------------------------

#define XMC_FAKE_STR2(x) #x
#define XMC_FAKE_STR(x) XMC_FAKE_STR2(x)
// name: the cuda.h name. The symbol and the address go through cuda.h's
// version macros (cuMemAlloc -> cuMemAlloc_v2), so they are what a program
// compiled against cuda.h calls.
#define XMC_FAKE_ENTRY(name) {#name, XMC_FAKE_STR(name), reinterpret_cast<void*>(&name), 0},
// An entry that fault scripts can do more to: `faults` says what (kSized,
// kQueued, kNonIdentity) and `live` counts the objects it made (exhaust).
#define XMC_FAKE_ENTRY_F(name, faults, live) \
    {#name, XMC_FAKE_STR(name), reinterpret_cast<void*>(&name), 0, faults, live},

namespace {

// What exhaust counts: the live objects an entry point made (lock held); the
// same objects the ledger lists.
uint64_t live_registrations() { return state().registrations.size(); }
uint64_t live_allocations() { return state().allocations.size(); }
uint64_t live_reservations() { return state().reservations.size(); }
uint64_t live_mappings() { return state().mappings.size(); }
uint64_t live_ipc_opened() { return state().ipc_opened.size(); }
uint64_t live_streams() { return state().streams.size(); }
uint64_t live_events() { return state().events.size(); }
uint64_t live_execs() { return state().execs.size(); }
uint64_t live_handles() {  // a released handle is gone for the program, even while mapped
    uint64_t n = 0;
    for (auto& [h, p] : state().handles) n += p.released ? 0 : 1;
    return n;
}
uint64_t live_primary_retains() {
    uint64_t n = 0;
    for (auto& [h, c] : state().contexts) n += c->alive && c->primary ? static_cast<uint64_t>(c->refs) : 0;
    return n;
}
uint64_t live_created_contexts() {
    uint64_t n = 0;
    for (auto& [h, c] : state().contexts) n += c->alive && !c->primary ? 1 : 0;
    return n;
}

}  // namespace

const std::vector<EntryPoint>& entry_points() {
    static const std::vector<EntryPoint> k = {
        // device and context (fake_cuda_device.cpp)
        XMC_FAKE_ENTRY(cuInit) XMC_FAKE_ENTRY(cuDriverGetVersion) XMC_FAKE_ENTRY(cuGetErrorName)
        XMC_FAKE_ENTRY(cuGetErrorString) XMC_FAKE_ENTRY(cuGetProcAddress) XMC_FAKE_ENTRY(cuDeviceGetCount)
        XMC_FAKE_ENTRY(cuDeviceGet) XMC_FAKE_ENTRY(cuDeviceGetName)
        {"cuDeviceGetUuid", "cuDeviceGetUuid", reinterpret_cast<void*>(&xmc_fake_cuDeviceGetUuid_v1), 0},
        {"cuDeviceGetUuid", "cuDeviceGetUuid_v2", reinterpret_cast<void*>(&cuDeviceGetUuid_v2), 11040},
        XMC_FAKE_ENTRY(cuDeviceTotalMem) XMC_FAKE_ENTRY(cuDeviceGetAttribute) XMC_FAKE_ENTRY(cuDeviceGetPCIBusId)
        XMC_FAKE_ENTRY(cuDeviceCanAccessPeer) XMC_FAKE_ENTRY_F(cuDevicePrimaryCtxRetain, 0, live_primary_retains)
        XMC_FAKE_ENTRY(cuDevicePrimaryCtxRelease) XMC_FAKE_ENTRY(cuDevicePrimaryCtxGetState)
        {"cuCtxCreate", "cuCtxCreate_v2", reinterpret_cast<void*>(&cuCtxCreate_v2), 0, 0, live_created_contexts},
        {"cuCtxCreate", "cuCtxCreate_v4", reinterpret_cast<void*>(&cuCtxCreate_v4), 12050, 0, live_created_contexts},
        XMC_FAKE_ENTRY(cuCtxDestroy) XMC_FAKE_ENTRY(cuCtxSetCurrent) XMC_FAKE_ENTRY(cuCtxGetCurrent)
        XMC_FAKE_ENTRY(cuCtxGetDevice) XMC_FAKE_ENTRY(cuCtxPushCurrent) XMC_FAKE_ENTRY(cuCtxPopCurrent)
        XMC_FAKE_ENTRY(cuCtxSynchronize) XMC_FAKE_ENTRY(cuCtxEnablePeerAccess)
        XMC_FAKE_ENTRY(cuCtxDisablePeerAccess)
        // memory and registration (fake_cuda_memory.cpp)
        XMC_FAKE_ENTRY_F(cuMemAlloc, kSized, live_allocations) XMC_FAKE_ENTRY(cuMemFree) XMC_FAKE_ENTRY(cuMemGetInfo)
        XMC_FAKE_ENTRY_F(cuMemHostRegister, kSized | kNonIdentity, live_registrations)
        XMC_FAKE_ENTRY(cuMemHostUnregister) XMC_FAKE_ENTRY(cuMemHostGetDevicePointer)
        XMC_FAKE_ENTRY(cuMemHostGetFlags) XMC_FAKE_ENTRY(cuPointerGetAttribute)
        XMC_FAKE_ENTRY_F(cuMemHostAlloc, kSized, live_registrations)
        XMC_FAKE_ENTRY_F(cuMemAllocHost, kSized, live_registrations) XMC_FAKE_ENTRY(cuMemFreeHost)
        // streams, events, copies (fake_cuda_stream.cpp)
        XMC_FAKE_ENTRY_F(cuStreamCreate, 0, live_streams) XMC_FAKE_ENTRY(cuStreamDestroy)
        XMC_FAKE_ENTRY(cuStreamSynchronize) XMC_FAKE_ENTRY(cuStreamQuery) XMC_FAKE_ENTRY(cuStreamWaitEvent)
        XMC_FAKE_ENTRY_F(cuEventCreate, 0, live_events) XMC_FAKE_ENTRY(cuEventRecord) XMC_FAKE_ENTRY(cuEventQuery)
        XMC_FAKE_ENTRY(cuEventSynchronize) XMC_FAKE_ENTRY(cuEventDestroy)
        {"cuEventElapsedTime", "cuEventElapsedTime", reinterpret_cast<void*>(&xmc_fake_cuEventElapsedTime_v1), 0},
        {"cuEventElapsedTime", "cuEventElapsedTime_v2", reinterpret_cast<void*>(&cuEventElapsedTime_v2), 12080},
        XMC_FAKE_ENTRY(cuLaunchHostFunc)
        XMC_FAKE_ENTRY_F(cuMemcpyAsync, kSized | kQueued, nullptr)
        XMC_FAKE_ENTRY_F(cuMemcpyHtoDAsync, kSized | kQueued, nullptr)
        XMC_FAKE_ENTRY_F(cuMemcpyDtoHAsync, kSized | kQueued, nullptr)
        XMC_FAKE_ENTRY_F(cuMemcpyDtoDAsync, kSized | kQueued, nullptr)
        XMC_FAKE_ENTRY_F(cuMemcpy2DAsync, kQueued, nullptr) XMC_FAKE_ENTRY_F(cuMemcpy3DAsync, kQueued, nullptr)
        XMC_FAKE_ENTRY_F(cuMemcpyPeerAsync, kSized | kQueued, nullptr)
        XMC_FAKE_ENTRY_F(cuMemsetD8Async, kSized | kQueued, nullptr)
        XMC_FAKE_ENTRY_F(cuMemcpy3DPeerAsync, kQueued, nullptr)  // fake_cuda_peer.cpp
        XMC_FAKE_ENTRY_F(cuMemcpy, kSized, nullptr) XMC_FAKE_ENTRY_F(cuMemcpyHtoD, kSized, nullptr)
        XMC_FAKE_ENTRY_F(cuMemcpyDtoH, kSized, nullptr) XMC_FAKE_ENTRY_F(cuMemcpyDtoD, kSized, nullptr)
        XMC_FAKE_ENTRY_F(cuMemsetD8, kSized, nullptr)
        // stream memory operations (fake_cuda_stream.cpp): the CUDA 12 _v2 symbols
        {"cuStreamWaitValue32", "cuStreamWaitValue32_v2", reinterpret_cast<void*>(&cuStreamWaitValue32_v2), 11070},
        {"cuStreamWriteValue32", "cuStreamWriteValue32_v2", reinterpret_cast<void*>(&cuStreamWriteValue32_v2), 11070},
        // virtual memory management (fake_cuda_vmm.cpp)
        XMC_FAKE_ENTRY(cuMemGetAllocationGranularity) XMC_FAKE_ENTRY_F(cuMemAddressReserve, kSized, live_reservations)
        XMC_FAKE_ENTRY(cuMemAddressFree) XMC_FAKE_ENTRY_F(cuMemCreate, kSized, live_handles)
        XMC_FAKE_ENTRY(cuMemRelease) XMC_FAKE_ENTRY_F(cuMemMap, kSized, live_mappings) XMC_FAKE_ENTRY(cuMemUnmap)
        XMC_FAKE_ENTRY(cuMemSetAccess) XMC_FAKE_ENTRY(cuMemGetAccess)
        // sharing device memory with another process (fake_cuda_ipc.cpp)
        XMC_FAKE_ENTRY(cuIpcGetMemHandle) XMC_FAKE_ENTRY_F(cuIpcOpenMemHandle, 0, live_ipc_opened)
        XMC_FAKE_ENTRY(cuIpcCloseMemHandle) XMC_FAKE_ENTRY(cuMemExportToShareableHandle)
        XMC_FAKE_ENTRY_F(cuMemImportFromShareableHandle, 0, live_handles) XMC_FAKE_ENTRY(cuMemRetainAllocationHandle)
        // stream capture and graphs (fake_cuda_graph.cpp)
        XMC_FAKE_ENTRY(cuStreamBeginCapture) XMC_FAKE_ENTRY(cuStreamEndCapture) XMC_FAKE_ENTRY(cuStreamIsCapturing)
        XMC_FAKE_ENTRY(cuStreamGetCaptureInfo)
        {"cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags",
         reinterpret_cast<void*>(&cuGraphInstantiateWithFlags), 0, 0, live_execs},
        XMC_FAKE_ENTRY(cuGraphLaunch) XMC_FAKE_ENTRY(cuGraphExecDestroy) XMC_FAKE_ENTRY(cuGraphDestroy)
    };
    return k;
}

std::string_view base_name(std::string_view name) {
    // strip "_v<digits>"
    size_t u = name.rfind("_v");
    if (u == std::string_view::npos || u + 2 >= name.size()) return name;
    for (size_t i = u + 2; i < name.size(); ++i)
        if (name[i] < '0' || name[i] > '9') return name;
    return name.substr(0, u);
}

// ---- the fault-script dialect ---------------------------------------------------------------

namespace {

bool code_by_name(std::string_view name, int64_t* value) {
    CUresult r = CUDA_SUCCESS;
    if (!result_from_name(name, &r)) return false;
    *value = r;
    return true;
}

}  // namespace

const xmc_faults::Dialect& fault_dialect() {
    static const xmc_faults::Dialect d = [] {
        xmc_faults::Dialect d;
        d.fake = "the fake CUDA driver";
        for (const EntryPoint& e : entry_points()) {
            if (d.find(e.base) != nullptr) continue;  // versions of one entry share its name
            xmc_faults::Entry f;
            f.name = e.base;
            f.takes_size = (e.faults & kSized) != 0;
            f.enqueues = (e.faults & kQueued) != 0;
            f.nonidentity = (e.faults & kNonIdentity) != 0;
            f.live = e.live;
            d.entries.push_back(f);
        }
        d.canonical = base_name;
        d.code_by_name = code_by_name;
        d.code_type = "CUresult";
        d.max_code = 1023;  // CUresult's range: no code above 999
        d.nonidentity_offset = true;
        return d;
    }();
    return d;
}

}  // namespace xmc_fake
