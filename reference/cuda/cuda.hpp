// The CUDA backend (SPEC 4): the driver API only, every entry point resolved
// at run time from the library named by XMC_CUDA_DRIVER (default
// libcuda.so.1), so one binary runs on a real driver or on the fake. cuda.h
// supplies types and the versioned names (cuMemAlloc is cuMemAlloc_v2 there);
// nothing is linked from the toolkit.
#pragma once
#include "backend_table.hpp"
#include "copy_desc.hpp"
#include "errors.hpp"
#include "pin_registry.hpp"
#include "lifecycle.hpp"
#include "registration.hpp"
#include "streams.hpp"

#include <cuda.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace xmc::transfer {
struct Work;  // transfer_protocol.hpp
class Stager;
} // namespace xmc::transfer

namespace xmc::cuda {

// X(name) for every entry point, by group. A group whose entry points are all
// found enables its primitive; a missing one makes that primitive answer
// XMC_ERR_UNSUPPORTED naming it (REG-UNAVAILABLE), never a crash.
#define XMC_CU_CORE(X)                                                                              \
    X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetUuid)              \
    X(cuDeviceTotalMem) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxPushCurrent) \
    X(cuCtxPopCurrent)
#define XMC_CU_REGISTER(X) X(cuMemHostRegister) X(cuMemHostUnregister) X(cuMemHostGetDevicePointer)
#define XMC_CU_STREAM(X)                                                                            \
    X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuEventCreate) X(cuEventDestroy)  \
    X(cuEventRecord) X(cuEventSynchronize) X(cuStreamWaitEvent) X(cuLaunchHostFunc) X(cuMemAlloc)   \
    X(cuMemFree)
#define XMC_CU_COPY(X) X(cuMemcpyAsync) X(cuMemcpy2DAsync) X(cuMemcpy3DAsync)
// Slots (vmm.cpp); cuEventQuery tells the slots' watcher thread a stream point or a copy finished,
// cuStreamQuery that a stream has no work before a request at all.
#define XMC_CU_VMM(X)                                                                               \
    X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate)     \
    X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemcpyHtoDAsync) X(cuEventQuery) \
    X(cuMemGetInfo) X(cuStreamQuery)
// Affine transfer (transfer.cpp): peer copies between the GPUs of one process, and peer access.
#define XMC_CU_TRANSFER(X)                                                                          \
    X(cuMemcpyPeerAsync) X(cuMemcpy3DPeerAsync) X(cuDeviceCanAccessPeer) X(cuCtxEnablePeerAccess)
// Path IPC of affine transfers (transfer_ipc.cpp), between processes of one node: legacy IPC
// handles of cuMemAlloc memory and the pointer queries that tell memory apart and find its base;
// VMM memory goes as POSIX file descriptors (and the VMM group's reserve, map and access). A
// driver lacking either makes that kind of source unsupported on the IPC path, nothing else.
#define XMC_CU_IPC(X) X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle) X(cuIpcCloseMemHandle) X(cuPointerGetAttribute)
#define XMC_CU_IPC_VMM(X) \
    X(cuMemRetainAllocationHandle) X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle)
// Graphs (graph.cpp): stream capture, instantiation, launch and destruction;
// cuStreamIsCapturing says whether a capture the driver refused to end is still open.
#define XMC_CU_GRAPH(X)                                                                             \
    X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuStreamIsCapturing) X(cuGraphInstantiate)     \
    X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy)
// Optional: cuStreamWaitValue32 lets a slot consumer wait GPU-side for a copy
// not issued yet (vmm.cpp, VMM-EVENT-WAIT); only that wait needs it.
#define XMC_CU_OPTIONAL(X) X(cuGetErrorName) X(cuStreamWaitValue32)

struct Device {
    CUdevice dev = 0;
    CUuuid uuid{};
    char name[128] = {};
    size_t total = 0;
    bool posix_fd = false;    // VMM memory can be made exportable as a POSIX fd (slots shared over IPC)
    CUcontext ctx = nullptr;  // primary context, retained while any instance or registration needs it
};

// The process-wide driver: loaded once, shared by every instance (like the
// registries, which must see one driver).
struct Driver {
    // Entry points; the member names are cuda.h's macros, so cuMemAlloc here
    // is cuMemAlloc_v2, exactly the symbol resolved.
#define XMC_CU_MEMBER(name) decltype(&::name) name = nullptr;
    XMC_CU_CORE(XMC_CU_MEMBER)
    XMC_CU_REGISTER(XMC_CU_MEMBER)
    XMC_CU_STREAM(XMC_CU_MEMBER)
    XMC_CU_COPY(XMC_CU_MEMBER)
    XMC_CU_VMM(XMC_CU_MEMBER)
    XMC_CU_TRANSFER(XMC_CU_MEMBER)
    XMC_CU_IPC(XMC_CU_MEMBER)
    XMC_CU_IPC_VMM(XMC_CU_MEMBER)
    XMC_CU_GRAPH(XMC_CU_MEMBER)
    XMC_CU_OPTIONAL(XMC_CU_MEMBER)
#undef XMC_CU_MEMBER

    std::string library;      // what was loaded (or tried)
    bool usable = false;      // library, core entry points, cuInit and >= 1 device
    std::string why;          // why not usable, or "" when usable
    std::string missing_register, missing_stream, missing_copy;  // first missing entry point, per group
    std::string missing_vmm;
    std::string missing_transfer;
    std::string missing_ipc, missing_ipc_vmm;
    std::string missing_graph;
    std::vector<Device> devices;  // by xmc index = the driver's ordinal

    std::mutex mu;            // guards the fields below and contexts' retains
    int instances = 0;        // open instances
    size_t registrations = 0; // live driver registrations (reg_register and pinned blocks)

    static Driver &get();
    // The primary context of the device whose UUID is `uuid`, retained on
    // first use (REG-UUID: devices are matched by UUID, never by position).
    CUresult context_for(const CUuuid &uuid, CUcontext *out, int32_t *index);
    // Releases every retained context when no instance and no registration
    // needs them any more, so nothing is left in the driver.
    CUresult release_if_idle();
    const char *result_name(CUresult r) const;
};

// Makes a context current for the scope and restores the previous one; the
// backend never leaves a context current on a caller's thread.
class CtxScope {
public:
    CtxScope(Driver &d, CUcontext ctx) : d_(d), result_(d.cuCtxPushCurrent(ctx)) {}
    ~CtxScope() {
        CUcontext popped = nullptr;
        if (result_ == CUDA_SUCCESS) d_.cuCtxPopCurrent(&popped);
    }
    CUresult result() const { return result_; }
    CtxScope(const CtxScope &) = delete;
    CtxScope &operator=(const CtxScope &) = delete;

private:
    Driver &d_;
    CUresult result_;
};

// A failed driver call as an xmc status: the few results that name a refusal
// class map to it, every other one is XMC_ERR_DRIVER; native = the CUresult.
xmc_status status_of(CUresult r);
xmc_status driver_fail(xmc_instance *inst, CUresult r, const char *call, const char *what);
// XMC_OK when the driver is usable and `missing` (a group's first missing
// entry point) is empty; otherwise XMC_ERR_UNSUPPORTED with the reason.
xmc_status require(xmc_instance *inst, const char *call, const std::string &missing);
// XMC_ERR_NO_DEVICE unless 0 <= device < device count.
xmc_status check_device(xmc_instance *inst, int32_t device, const char *call);

// A host callback recorded into a capture (graph.cpp): it runs once per launch,
// so it belongs to the graph, never freed by its trampoline.
struct RecordedCallback {
    xmc_host_fn fn = nullptr;
    void *user = nullptr;
};
// What a capture holds besides the driver's graph: its recorded callbacks.
struct Capture {
    std::mutex mu;
    std::vector<std::unique_ptr<RecordedCallback>> callbacks;
};

struct Stream {
    CUstream stream = nullptr;
    int32_t device = 0;
    CUcontext ctx = nullptr;
    std::shared_ptr<Capture> capture;  // set while the stream captures (graph.cpp)
};
struct Event {
    CUevent event = nullptr;
    int32_t device = 0;
    CUcontext ctx = nullptr;
};
struct DevAlloc {
    int32_t device = 0;
    CUcontext ctx = nullptr;
};

struct Vmm;    // vmm.cpp
struct Graph;  // graph.cpp
struct NcclComms;  // transfer_nccl.cpp

// Streams, events and device allocations belong to the instance that made
// them and go with it; registrations and pinned blocks are process-wide.
struct Instance : xmc_instance {
    Instance();
    ~Instance() override;  // stream.cpp
    // close: releases what the user left; the first failure stops and names
    // its call in *what, and what is left stays for another close (stream.cpp).
    CUresult release_all(const char **what);
    std::mutex mu;
    std::map<xmc_stream *, Stream> streams;  // handle -> stream (handles are heap cookies)
    std::map<xmc_event *, Event> events;
    std::map<uintptr_t, DevAlloc> dev_allocs;
    std::shared_ptr<Vmm> vmm;  // slots, requests and their threads (vmm.cpp)
    std::map<xmc_graph *, std::shared_ptr<Graph>> graphs;  // graph.cpp
    std::shared_ptr<NcclComms> nccl;  // the NCCL path's communicators, one per group (transfer_nccl.cpp)
};

void fill_table(xmc_backend &table);

// The entry points, one group per primitive, each in its file: backend.cpp
// (INSTANCE), pin.cpp (PIN, PIN_REFS), register.cpp, stream.cpp, copy.cpp,
// vmm.cpp, transfer.cpp. Declared from the one list in <xmc/backend.h>.
// ALWAYS_0_2: close_report in backend.cpp, pin_min_alignment in pin.cpp.
#define XMC_CUDA_GROUPS(G) \
    G(INSTANCE) G(PIN) G(PIN_REFS) G(REGISTER) G(STREAM) G(COPY) G(VMM) G(TRANSFER) G(GRAPH) G(ALWAYS_0_2) G(REGISTER_LARGE) \
    G(TRANSFER_PREPARED)
XMC_CUDA_GROUPS(XMC_DECLARE_GROUP)

// pin.cpp
void install_pin_hook();

// register.cpp: CUDA's registration steps over reference/common/registration.hpp, and REG-CLOSE's
// release of every registration still held (the last instance's close).
be::Registrations &registrations();
xmc_status reg_release_all(xmc_instance *inst, uint64_t *released);
// Registers [addr, addr+bytes) in ctx (pushed for the call) and checks the mapping is the
// identity, undoing it otherwise. `extra_flags` joins CU_MEMHOSTREGISTER_DEVICEMAP.
xmc_status driver_register_in(xmc_instance *inst, const char *call, CUcontext ctx, void *addr, size_t bytes,
                              CUresult *native, unsigned extra_flags = 0);
// The same in device `index`'s primary context, returned in *ctx_out (pin.cpp's pinned blocks).
xmc_status driver_register(xmc_instance *inst, const char *call, void *addr, size_t bytes, int32_t index,
                           CUcontext *ctx_out, CUresult *native, unsigned extra_flags = 0);
// REG-LARGE: reg_register splits a range into driver calls of at most this many bytes.
constexpr size_t kRegChunkBytes = size_t{1} << 30;

// stream.cpp
// The stream behind a handle of this instance, copied out; false if none.
bool find_stream(xmc_instance *inst, xmc_stream *handle, Stream *out);
// The steps of streams, copies and graphs (reference/common/streams.hpp); copy.cpp's step.
be::StreamOps &stream_ops();
be::GraphOps &graph_ops();
xmc_status enqueue_copy(xmc_instance *inst, const xmc_copy_desc &c, xmc_stream *handle);

// vmm.cpp
std::shared_ptr<Vmm> vmm_create();
// The open option vmm_workers=N (1..64; 1 = serial mode, VMM-SERIAL); false if `key` is another.
bool vmm_option(Instance *in, const std::string &key, const std::string &value, xmc_status *st);
// Before the instance goes: waits for every slot's work, frees the slots, joins the threads.
// Returns the slots it closed; *failed: a driver failure (what: the call), the rest kept for a retry.
size_t vmm_close(Instance *in, CUresult *failed, const char **what);
// graph_begin's guard (graph.cpp): XMC_ERR_BUSY while a remap still has reload copies to enqueue
// on `s` (they would be captured into the graph instead of reloading the slot); otherwise runs
// `begin` under the slots' lock, so that no such remap is submitted meanwhile.
xmc_status vmm_before_capture(xmc_instance *inst, xmc_stream *s, const std::function<xmc_status()> &begin);

// transfer_nccl.cpp: the NCCL path of transfer_execute (transfer.cpp).
// Why this rank cannot take path NCCL ("" when it can: NCCL loaded, nccl.hpp).
std::string nccl_unavailable();
// Whether any rank takes NCCL to any peer in the call's path table (then every rank joins the group's
// communicator).
bool nccl_anywhere(const transfer::Work &w);
// The group's communicator for a call, held or made with every rank, before any write: where a
// rank could not join, every rank refuses (XMC_ERR_REFUSED, NCCL's code as native code).
struct NcclLink {
    void *comm = nullptr;       // ncclComm_t
    std::vector<int64_t> key;   // the instance's cache key
};
xmc_status nccl_join(xmc_instance *inst, const xmc_transfer_args &a, int32_t device, NcclLink *link);
// Whether the instance still holds the communicator `link` names (a failed round of another call
// on the same group aborts and drops it): a prepared transfer keeps its link between runs only then.
bool nccl_held(xmc_instance *inst, const NcclLink &link);
// The NCCL peers' part of a call, through `sg`'s arenas (the device's), on `stream`.
xmc_status nccl_move(xmc_instance *inst, const xmc_transfer_args &a, transfer::Work &w, xmc_transfer_stats &st,
                     transfer::Stager &sg, const NcclLink &link, CUstream stream);
// close: destroys the instance's communicators.
void nccl_close(Instance *in);

// graph.cpp
// GRAPH-CAPTURE, VMM-GRAPH-ORDER: `call` on a capturing stream, refused before the driver sees it
// (which would refuse it with `native` and end the capture, or record it where it cannot be
// replayed): XMC_ERR_CAPTURING, nothing changed, the capture included.
xmc_status refuse_capturing(xmc_instance *inst, const char *call, CUresult native = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
// Before the instance's streams go: ends the captures left open and destroys every graph,
// after waiting for its launches.
void graph_close(Instance *in);
// VMM-UNMAPPED-FAULTS: copy's refusal of bytes in a slot that is not mapped (slot_book.hpp's
// check_copy_slots over this instance's slots); XMC_OK when no described byte lies in one.
xmc_status vmm_copy_check(xmc_instance *inst, const be::CopySpan (&spans)[2]);

} // namespace xmc::cuda
