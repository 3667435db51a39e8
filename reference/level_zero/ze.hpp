// The Level Zero backend (SPEC 4): through the Level Zero loader, every entry
// point resolved at run time from the library named by XMC_ZE_LOADER (default
// libze_loader.so.1), so the backend loads and reports "unsupported" on a
// machine without Level Zero. ze_api.h supplies types only; nothing is linked.
//
// Devices: the xmc index of a device is its rank in the order of UUIDs
// (memcmp of the 16 bytes of zeDeviceGetProperties' uuid), over every driver
// the loader reports. The driver's enumeration order can change from run to
// run (XMC_FAKE_ZE_ORDER permutes it on the fake; ZE_AFFINITY_MASK and
// hot-plug do on hardware), the UUID order cannot, so device d is always the
// same device (REG-UUID).
//
// Contexts: one per device, created with zeContextCreateEx for that device
// alone and cached; every object of device d (registrations, command lists,
// events, device memory) lives in it. A context holding several devices maps
// an external-memmap registration for its first device only (a registration
// bug the suite was built from), so no context here ever holds more than one device (REG-DEVICE).
#pragma once
#include "backend_table.hpp"
#include "copy_desc.hpp"
#include "errors.hpp"
#include "pin_registry.hpp"
#include "lifecycle.hpp"
#include "registration.hpp"
#include "streams.hpp"

#include <level_zero/ze_api.h>
#include <level_zero/zes_api.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace xmc::ze {

// X(name) for every entry point, by group. A group whose entry points are all
// found enables its primitive; a missing one makes that primitive answer
// XMC_ERR_UNSUPPORTED naming it (REG-UNAVAILABLE), never a crash.
#define XMC_ZE_CORE(X)                                                                                  \
    X(zeInit) X(zeDriverGet) X(zeDriverGetExtensionProperties) X(zeDeviceGet) X(zeDeviceGetProperties)  \
    X(zeDeviceGetMemoryProperties) X(zeContextCreateEx) X(zeContextDestroy) X(zeMemFree)
#define XMC_ZE_REGISTER(X) X(zeMemAllocHost)
#define XMC_ZE_STREAM(X)                                                                                \
    X(zeCommandListCreateImmediate) X(zeCommandListDestroy) X(zeCommandListAppendSignalEvent)           \
    X(zeCommandListAppendWaitOnEvents) X(zeEventPoolCreate) X(zeEventPoolDestroy) X(zeEventCreate)      \
    X(zeEventDestroy) X(zeEventHostSynchronize) X(zeEventHostSignal) X(zeEventHostReset)                \
    X(zeMemAllocDevice) X(zeCommandListAppendEventReset)
#define XMC_ZE_COPY(X) X(zeCommandListAppendMemoryCopy) X(zeCommandListAppendMemoryCopyRegion)
// Slots (vmm.cpp). Free device memory comes from Sysman (core Level Zero has
// no such query); on a real driver Sysman answers only with
// ZES_ENABLE_SYSMAN=1 set before zeInit (hardware/run_ze_tier.sh sets it).
#define XMC_ZE_VMM(X)                                                                                   \
    X(zeVirtualMemQueryPageSize) X(zeVirtualMemReserve) X(zeVirtualMemFree) X(zePhysicalMemCreate)      \
    X(zePhysicalMemDestroy) X(zeVirtualMemMap) X(zeVirtualMemUnmap) X(zeEventQueryStatus)               \
    X(zesDeviceEnumMemoryModules) X(zesMemoryGetState)

// Graphs (graph.cpp): a regular command list recorded once, executed on a
// command queue of its own for each launch.
#define XMC_ZE_GRAPH(X)                                                                                 \
    X(zeCommandListCreate) X(zeCommandListClose) X(zeCommandQueueCreate) X(zeCommandQueueDestroy)       \
    X(zeCommandQueueExecuteCommandLists)

struct Device {
    ze_driver_handle_t driver = nullptr;
    ze_device_handle_t handle = nullptr;
    uint8_t uuid[16] = {};
    char name[128] = {};
    uint64_t total = 0;
    uint32_t enum_position = 0;  // where zeDeviceGet listed it (over all drivers); informative only
    bool memmap = false;         // its driver lists ZE_extension_external_memmap_sysmem
    ze_context_handle_t ctx = nullptr;  // its own context, created on first use
};

// The process-wide driver: loaded once, shared by every instance (like the
// registries, which must see one driver).
struct Driver {
#define XMC_ZE_MEMBER(name) decltype(&::name) name = nullptr;
    XMC_ZE_CORE(XMC_ZE_MEMBER)
    XMC_ZE_REGISTER(XMC_ZE_MEMBER)
    XMC_ZE_STREAM(XMC_ZE_MEMBER)
    XMC_ZE_COPY(XMC_ZE_MEMBER)
    XMC_ZE_VMM(XMC_ZE_MEMBER)
    XMC_ZE_GRAPH(XMC_ZE_MEMBER)
#undef XMC_ZE_MEMBER

    std::string library;      // what was loaded (or tried)
    bool usable = false;      // loader, core entry points, zeInit and >= 1 device
    std::string why;          // why not usable, or "" when usable
    std::string missing_register, missing_stream, missing_copy, missing_vmm;  // first missing entry point, per group
    std::string missing_graph;
    std::vector<Device> devices;  // by xmc index: sorted by UUID

    std::mutex mu;            // guards the contexts and the counts below
    int instances = 0;        // open instances
    size_t registrations = 0; // live driver registrations (reg_register and pinned blocks)

    static Driver &get();
    // The context of the device whose UUID is `uuid`, created for that device
    // alone on first use (REG-UUID: found by UUID, never by position).
    ze_result_t context_for(const uint8_t uuid[16], ze_context_handle_t *out);
    // Destroys the contexts when no instance and no registration needs them,
    // so a closed backend leaves nothing in the driver. Returns the first
    // failure of zeContextDestroy; a context the driver refused to destroy
    // stays cached, and the next idle moment tries again (close reports the
    // failure; reg_unregister and pin_free, whose own release succeeded, leave
    // it to that next moment).
    ze_result_t release_if_idle();
};

const char *result_name(ze_result_t r);
// A failed driver call as an xmc status: ZE_RESULT_ERROR_UNSUPPORTED_FEATURE
// is XMC_ERR_UNSUPPORTED, every other result XMC_ERR_DRIVER; native = the ze_result_t.
xmc_status status_of(ze_result_t r);
xmc_status driver_fail(xmc_instance *inst, ze_result_t r, const char *call, const char *what);
// XMC_OK when the driver is usable and `missing` (a group's first missing
// entry point) is empty; otherwise XMC_ERR_UNSUPPORTED with the reason.
xmc_status require(xmc_instance *inst, const char *call, const std::string &missing);
// XMC_ERR_NO_DEVICE unless 0 <= device < device count.
xmc_status check_device(xmc_instance *inst, int32_t device, const char *call);
// The context of device `device` (a valid index), recorded as a failure of `call`.
xmc_status device_context(xmc_instance *inst, const char *call, int32_t device, ze_context_handle_t *ctx);

// ---- streams (stream.cpp) --------------------------------------------------

// A host callback: the list signals `reached` when it gets there, then waits
// for `done`, which the stream's callback thread signals after fn ran.
struct Callback {
    ze_event_pool_handle_t pool = nullptr;
    ze_event_handle_t reached = nullptr, done = nullptr;
    xmc_host_fn fn = nullptr;
    void *user = nullptr;
    uint64_t seq = 0;  // order on the stream; reclaimed once a synchronize passed it
    bool finished = false;  // the stream's callback thread is done with it (under the stream's cb_mu)
};

// A graph (graph.cpp): a regular command list recorded once -- a wait for
// `start`, the captured work, a signal of `end` -- and executed on `queue` for
// each launch. The launching stream's immediate list signals `start` where the
// launch is enqueued, waits for `end`, then signals `passed`; a launch (and
// destroy) waits for the previous launch's `passed` before it resets the
// events, so one graph's launches run one after another. Captured host
// callbacks are the graph's: each launch hands them to the launching stream's
// callback thread again.
struct Graph {
    int32_t device = 0;
    ze_context_handle_t ctx = nullptr;
    ze_command_list_handle_t list = nullptr;
    ze_command_queue_handle_t queue = nullptr;
    ze_event_pool_handle_t pool = nullptr;
    ze_event_handle_t events[3] = {};  // start, end, passed
    std::vector<std::unique_ptr<Callback>> callbacks;
    std::mutex launch_mu;  // one launch (or the destroy) at a time
    bool launched = false;  // `passed` will be signalled by the latest launch
};

struct Stream {
    int32_t device = 0;
    ze_context_handle_t ctx = nullptr;
    std::shared_ptr<Graph> capture;  // under append_mu: the graph being recorded, while the stream captures
    // Immediate, in order. Null once stream_destroy destroyed it (under the
    // instance's mu): a stream whose destroy failed after that takes no work.
    ze_command_list_handle_t list = nullptr;
    ze_event_pool_handle_t sync_pool = nullptr;
    ze_event_handle_t sync_event = nullptr;   // appended and waited for by synchronize

    std::mutex append_mu;  // a command list is not thread-safe: one append at a time
    std::mutex sync_mu;    // one synchronize at a time (they share sync_event)
    std::mutex cb_mu;      // the callback queue and records below
    std::condition_variable cb_cv;
    std::deque<Callback *> queue;                  // for the callback thread
    std::vector<std::unique_ptr<Callback>> callbacks;  // enqueued, not yet reclaimed
    uint64_t next_seq = 0;  // under append_mu
    bool stop = false;
    std::thread worker;    // runs the callbacks, in order
};

struct Event {
    int32_t device = 0;
    ze_event_pool_handle_t pool = nullptr;
    ze_event_handle_t event = nullptr;  // null once event_destroy destroyed it (under the instance's mu)
    bool recorded = false;  // under the instance's mutex; unrecorded events are complete
    // COPY-REUSE: the events of earlier records, replaced by a fresh one at each
    // record after the first (waits appended for them still use them); destroyed
    // with the event. Under the instance's mutex.
    std::vector<std::pair<ze_event_pool_handle_t, ze_event_handle_t>> retired;
};

struct Vmm;  // vmm.cpp: slots, requests and their threads

struct DevAlloc {
    int32_t device = 0;
    ze_context_handle_t ctx = nullptr;
};

// Streams, events and device allocations belong to the instance that made
// them and go with it; registrations and pinned blocks are process-wide.
struct Instance : xmc_instance {
    Instance();
    ~Instance() override;  // stream.cpp
    // Releases its streams, events and device allocations (close). Stops at
    // the first driver failure, which it returns with the failed call in
    // *what: the object that failed and those after it stay, so that calling
    // again finishes the job. No other call may be in flight, nor mu held.
    ze_result_t release_all(const char **what);  // stream.cpp
    std::mutex mu;
    std::map<xmc_stream *, std::shared_ptr<Stream>> streams;  // handle -> stream (handles are heap cookies)
    std::map<xmc_event *, std::shared_ptr<Event>> events;
    std::map<uintptr_t, DevAlloc> dev_allocs;
    std::shared_ptr<Vmm> vmm;
    std::map<xmc_graph *, std::shared_ptr<Graph>> graphs;  // graph.cpp
};

void fill_table(xmc_backend &table);

// The entry points, one group per primitive, each in its file: backend.cpp
// (INSTANCE), pin.cpp (PIN, PIN_REFS), register.cpp, stream.cpp, copy.cpp,
// vmm.cpp. Declared from the one list in <xmc/backend.h>. No transfer
// executor on Level Zero yet: the capability is not declared.
// ALWAYS_0_2: close_report in backend.cpp, pin_min_alignment in pin.cpp.
#define XMC_ZE_GROUPS(G) G(INSTANCE) G(PIN) G(PIN_REFS) G(REGISTER) G(STREAM) G(COPY) G(VMM) G(GRAPH) G(ALWAYS_0_2) G(REGISTER_LARGE)
XMC_ZE_GROUPS(XMC_DECLARE_GROUP)

// pin.cpp
void install_pin_hook();

// register.cpp: Level Zero's registration steps over reference/common/registration.hpp (one index
// for reg_register's ranges and pinned blocks' registrations, so that a range overlapping either is
// refused, REG-DOUBLE), and REG-CLOSE's release of every registration still held.
be::Registrations &registrations();
xmc_status reg_release_all(xmc_instance *inst, uint64_t *released);
// zeMemAllocHost with the external-memmap descriptor for [addr, addr+bytes)
// in `ctx`; the mapping must be the identity, else it is freed and refused
// (REG-IDENTITY). On success the driver holds one more registration.
xmc_status driver_register(xmc_instance *inst, const char *call, ze_context_handle_t ctx, int32_t device,
                           void *addr, size_t bytes, ze_result_t *native);

// stream.cpp
// The stream behind a handle of this instance; null if none.
std::shared_ptr<Stream> find_stream(xmc_instance *inst, xmc_stream *handle);
// host_callback's work, failures reported as `call`'s: fn runs on the
// stream's callback thread once the stream gets there. On failure fn never runs.
xmc_status enqueue_callback(xmc_instance *inst, Stream &s, xmc_host_fn fn, void *user, const char *call);
// A host-visible pool of `n` events in ctx, and its events; and their
// destruction, clearing each handle destroyed (stops at the first failure).
ze_result_t make_events(ze_context_handle_t ctx, uint32_t n, ze_event_pool_handle_t *pool, ze_event_handle_t *events);
ze_result_t destroy_events(ze_event_pool_handle_t *pool, ze_event_handle_t *events, uint32_t n);

// The list a stream's work goes to now: its capture's while it captures, its
// own otherwise. Caller holds s.append_mu.
inline ze_command_list_handle_t append_target(const Stream &s) { return s.capture ? s.capture->list : s.list; }
// The stream captures now.
bool capturing(Stream &s);
// The steps of streams, copies and graphs (reference/common/streams.hpp); copy.cpp's step.
be::StreamOps &stream_ops();
be::GraphOps &graph_ops();
xmc_status enqueue_copy(xmc_instance *inst, const xmc_copy_desc &c, xmc_stream *handle);

// graph.cpp
// GRAPH-CAPTURE, VMM-GRAPH-ORDER: `call` on a capturing stream may not join the capture: refused,
// nothing changed (Level Zero has no code for it: native 0).
xmc_status refuse_capturing(xmc_instance *inst, const char *call);
// Before the instance's streams go: ends the captures left open and destroys every graph, after
// its launches.
void graph_close(Instance *in);

// vmm.cpp
std::shared_ptr<Vmm> vmm_create();
// The open option vmm_workers=N (1..64; 1 = serial mode, VMM-SERIAL); false if `key` is another.
bool vmm_option(Instance *in, const std::string &key, const std::string &value, xmc_status *st);
// close, first: waits for the slots' work, closes them, stops the threads.
// Returns the slots it closed; *failed: a driver failure (what: the call), the rest kept for a retry.
size_t vmm_close(Instance *in, ze_result_t *failed, const char **what);
// VMM-UNMAPPED-FAULTS: copy's refusal of bytes in a slot that is not mapped (slot_book.hpp's
// check_copy_slots over this instance's slots); XMC_OK when no described byte lies in one.
xmc_status vmm_copy_check(xmc_instance *inst, const be::CopySpan (&spans)[2]);
// close, once the streams are gone (no list can still wait on a request's
// events): destroys the requests' events. Returns the first failure.
ze_result_t vmm_release_events(Instance *in);
// graph_begin's guard (graph.cpp): XMC_ERR_BUSY while a remap still has reload copies to issue for
// `s`; otherwise runs `begin` under the slots' lock, so that no such remap is submitted meanwhile.
xmc_status vmm_before_capture(xmc_instance *inst, xmc_stream *s, const std::function<xmc_status()> &begin);

} // namespace xmc::ze
